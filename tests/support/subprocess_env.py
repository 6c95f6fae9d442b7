"""Environment for the subprocesses tests start: reference servers, bulk clients, external tools."""

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


def tool_env() -> dict[str, str]:
    """Environment for external tools (curl, openssl, mosquitto, wrk...): without the
    AddressSanitizer preload that `make asan-test` sets for our extension, which would
    otherwise be injected into programs that are not built for it."""
    return child_env()
