"""Environment for the Python subprocesses tests start (reference servers, bulk clients)."""

from __future__ import annotations

import os


def child_env(pythonpath: str | None = None) -> dict[str, str]:
    """This environment without the AddressSanitizer preload (the children never load our
    extension, and ASan would only slow them down), with `pythonpath` put first."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.pop("ASAN_OPTIONS", None)
    if pythonpath:
        rest = env.get("PYTHONPATH")
        env["PYTHONPATH"] = pythonpath + (os.pathsep + rest if rest else "")
    return env
