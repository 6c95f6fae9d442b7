"""The built artifacts under test: `make test-installed` builds them (tools/packaging/dist.py,
from a clean clone, offline) and names their directory in CYMONGOOSE_DIST. And the sealing:
running a program where no compiler works and OpenSSL's headers are not there."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def dist() -> Path:
    where = os.environ.get("CYMONGOOSE_DIST")
    if not where:
        raise pytest.UsageError("tests/installed needs CYMONGOOSE_DIST: run `make test-installed`")
    return Path(where).resolve()


@pytest.fixture(scope="session")
def wheel(dist: Path) -> Path:
    (found,) = dist.glob("cymongoose-*.whl")
    return found


@pytest.fixture(scope="session")
def sdist(dist: Path) -> Path:
    (found,) = dist.glob("cymongoose-*.tar.gz")
    return found


def sealing(*hidden: str) -> list[str] | None:
    """A command prefix that runs a program in a private mount namespace where each of the
    `hidden` directories is empty (a tmpfs over it); None where namespaces cannot be made
    (not root, or a container that forbids them). unshare, sh and mount are named by absolute
    path: the sealed program's PATH may find none of them."""
    tools = [shutil.which(name) or "" for name in ("unshare", "sh", "mount")]
    if "" in tools:
        return None
    unshare, sh, mount = tools
    probe = subprocess.run([unshare, "--mount", "--propagation", "private", "true"],
                           capture_output=True, check=False)
    if probe.returncode != 0:
        return None
    mounts = " && ".join(f"{mount} -t tmpfs tmpfs {d}" for d in hidden if Path(d).is_dir())
    return [unshare, "--mount", "--propagation", "private", sh, "-c",
            f'{mounts or "true"} && exec "$@"', "sealed"]


@pytest.fixture(scope="session")
def seal() -> Callable[..., list[str] | None]:
    return sealing
