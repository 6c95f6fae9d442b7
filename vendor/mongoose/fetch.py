#!/usr/bin/env python3
"""Put a verified copy of Mongoose's mongoose.c / mongoose.h beside this script.

Mongoose is a dependency, never committed. The pin (pin.json) names a package-index
source distribution that carries the two amalgamated files and their sha256. This script:

1. does nothing if both files are already here with the pinned hashes;
2. else, if CYMONGOOSE_MONGOOSE_DIR names a directory holding the two files, copies them
   from there after checking that mongoose.h declares the pinned MG_VERSION (a user's own
   copy may carry changes of its own, so its hashes are reported, not enforced: build_fixes.py
   patches it like the pinned one, and refuses it if an anchor of the fixes does not fit);
3. else downloads the pinned artifact with pip (no dependencies, source only; a pip found
   as pip_command() says, run without the build frontend's variables), extracts only the
   two files, verifies both hashes and writes them here.

Any mismatch stops with a message that says what was expected and what to do.
Only the standard library is used, so it runs before any environment exists.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PIN = json.loads((HERE / "pin.json").read_text())
FILES = ("mongoose.c", "mongoose.h")
ENV_DIR = "CYMONGOOSE_MONGOOSE_DIR"


class FetchError(RuntimeError):
    pass


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pinned_copy_present(directory: Path) -> bool:
    return all(
        (directory / name).is_file() and sha256_of(directory / name) == PIN["sha256"][name]
        for name in FILES
    )


def declared_version(header: Path) -> str | None:
    match = re.search(rb'#define\s+MG_VERSION\s+"([^"]+)"', header.read_bytes())
    return match.group(1).decode() if match else None


def copy_from_user_dir(source: Path) -> None:
    missing = [name for name in FILES if not (source / name).is_file()]
    if missing:
        raise FetchError(f"{ENV_DIR}={source} lacks {', '.join(missing)}")
    version = declared_version(source / "mongoose.h")
    if version != PIN["version"]:
        raise FetchError(
            f"{ENV_DIR}={source} holds Mongoose {version!r}, but cymongoose is built and "
            f"tested against {PIN['version']!r}. Point {ENV_DIR} at a {PIN['version']} copy, "
            f"or unset it to fetch the pinned one."
        )
    for name in FILES:
        digest = sha256_of(source / name)
        if digest != PIN["sha256"][name]:
            print(f"fetch.py: note: {name} from {source} differs from the pin ({digest}); "
                  "the build fixes are applied to it all the same")
        shutil.copyfile(source / name, HERE / name)


# What a build frontend sets for the build backend it runs, and which must not reach the pip
# we start. The hook runner of pip 23.x (pep517) reads PEP517_BACKEND_PATH, and that of pip
# 26 (pyproject_hooks) _PYPROJECT_HOOKS_BACKEND_PATH_JSON: an inner pip building the pinned
# artifact's metadata finds the outer build's backend path there and refuses its own backend
# (BackendInvalid, backend-unavailable). Whole prefixes go, for the names of later versions.
# pip's build isolation also hides the outer environment's packages, pip included, with
# PYTHONPATH (a sitecustomize) and PYTHONNOUSERSITE, and shares its build tracker by
# PIP_BUILD_TRACKER (PIP_REQ_TRACKER before pip 22.1); uv runs the backend in a virtual
# environment of its own (VIRTUAL_ENV) and passes it UV_INTERNAL__* variables.
FRONTEND_VARIABLES = (
    "PIP_BUILD_TRACKER", "PIP_REQ_TRACKER", "PYTHONPATH", "PYTHONNOUSERSITE", "VIRTUAL_ENV",
)
FRONTEND_PREFIXES = ("PEP517_", "_PYPROJECT_HOOKS_", "UV_INTERNAL__")


def clean_environment() -> dict[str, str]:
    """This process's environment without what a build frontend set for its backend, so the
    pip we start behaves as it would from the user's shell (their PIP_* settings, such as an
    index or PIP_NO_INDEX, still apply)."""
    return {
        key: value for key, value in os.environ.items()
        if key not in FRONTEND_VARIABLES and not key.startswith(FRONTEND_PREFIXES)
    }


def _runs(command: list[str], env: dict[str, str]) -> bool:
    try:
        probe = subprocess.run(command + ["--version"], capture_output=True, env=env,
                               check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def pip_command(env: dict[str, str]) -> list[str]:
    """A pip that can download, found without the user installing anything:
    1. this interpreter's (under pip's build isolation, the environment pip runs from);
    2. the base interpreter's, when this one is a virtual environment without pip (a uv or
       `python -m build --installer uv` build environment);
    3. pip3 or pip on PATH;
    4. uv's pip, when uv runs this build (it names itself in $UV) or is on PATH: `uv tool
       run` brings pip from the index uv is configured with.
    """
    interpreters = [sys.executable]
    base = getattr(sys, "_base_executable", None)
    if base and os.path.realpath(base) != os.path.realpath(sys.executable):
        interpreters.append(base)
    candidates = [[python, "-m", "pip"] for python in interpreters]
    candidates += [[found] for found in map(shutil.which, ("pip3", "pip")) if found]
    uv = env.get("UV") or shutil.which("uv")
    if uv:
        candidates.append([uv, "tool", "run", "--quiet", "--from", "pip", "pip"])
    for command in candidates:
        if _runs(command, env):
            return command
    raise FetchError(
        "no pip found to download the pinned Mongoose sources (tried this interpreter, its "
        "base interpreter, pip3/pip on PATH and uv); install pip or uv, or set "
        f"{ENV_DIR} to a directory holding mongoose.c and mongoose.h {PIN['version']}"
    )


def download_pinned(workdir: Path) -> Path:
    name = PIN["artifact"].split("==")[0]
    env = clean_environment()
    # Source only for the artifact itself; its build requirements may come as wheels, which
    # keeps this to seconds instead of compiling cmake from source.
    command = pip_command(env) + [
        "download", "--no-deps", "--no-binary", name, "--dest", str(workdir),
        "--disable-pip-version-check", "--quiet", PIN["artifact"],
    ]
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    archives = sorted(workdir.glob("*.tar.gz"))
    if result.returncode != 0 or not archives:
        raise FetchError(
            f"downloading {PIN['artifact']} failed (exit {result.returncode}, "
            f"{' '.join(command[:3])}):\n"
            f"{result.stderr.strip()}\nCheck network access to the package index, or set "
            f"{ENV_DIR} to a local Mongoose {PIN['version']} copy."
        )
    return archives[0]


def extract_pinned(archive: Path) -> None:
    wanted = {PIN["member_prefix"] + name: name for name in FILES}
    found: dict[str, bytes] = {}
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar.getmembers():
            # Members sit under "<project>-<version>/"; match the rest of the path exactly.
            relative = member.name.split("/", 1)[-1]
            if relative in wanted and member.isfile():
                handle = tar.extractfile(member)
                assert handle is not None
                found[wanted[relative]] = handle.read()
    for name in FILES:
        if name not in found:
            raise FetchError(f"{archive.name} has no {PIN['member_prefix']}{name}")
        digest = hashlib.sha256(found[name]).hexdigest()
        if digest != PIN["sha256"][name]:
            raise FetchError(
                f"{name} from {archive.name} has sha256 {digest}, expected "
                f"{PIN['sha256'][name]}. The artifact changed or was tampered with: "
                "refusing to build with it."
            )
    for name in FILES:
        (HERE / name).write_bytes(found[name])


def main() -> int:
    try:
        if pinned_copy_present(HERE):
            return 0
        user_dir = os.environ.get(ENV_DIR)
        if user_dir:
            copy_from_user_dir(Path(user_dir))
        else:
            with tempfile.TemporaryDirectory(prefix="cymongoose-fetch-") as tmp:
                extract_pinned(download_pinned(Path(tmp)))
        print(f"fetch.py: Mongoose {PIN['version']} ready in {HERE}")
        return 0
    except FetchError as exc:
        print(f"fetch.py: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
