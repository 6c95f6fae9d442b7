"""A clone of the committed HEAD installs from source the three ways a user builds it: the pip a
fresh `python3 -m venv` bundles (Python 3.11's is 23.x), `uv pip install <clone>` and
`uv build`. Each build fetches Mongoose (vendor/mongoose/fetch.py) inside its frontend's
build environment: pip's sets PEP517_BACKEND_PATH, which pip 23.x's inner `pip download`
read as its own and died with BackendInvalid; uv's has no pip at all. The uv builds run with
every pip on this machine hidden, as on a machine where only uv is installed.

A current pip (upgraded from the index) builds a small project whose backend runs the same
fetch.py, under pip's build isolation as ours: pip 26's hook runner names the backend path
_PYPROJECT_HOOKS_BACKEND_PATH_JSON, which failed the same way.

These need the package index (build requirements and the pinned artifact) and build the
extension twice: `make test-installed` runs them, in 5 to 12 minutes on a shared 2-core
machine (pip 159-290 s, uv pip install 82-387 s, uv build --sdist 13-32 s, the current pip
about 20 s); each prints its own time."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD_SECONDS = 1500
pytestmark = [pytest.mark.no_asan, pytest.mark.timeout(BUILD_SECONDS + 120)]
# A raw handler served from the installed copy: it prints where it was imported from and its
# port, then answers one request from the test and stops.
SERVE_ONE = """
import sys, cymongoose
from cymongoose import Manager, MG_EV_HTTP_MSG
done = []
def handler(conn, ev, msg):
    if ev == MG_EV_HTTP_MSG:
        conn.reply(200, b"built from a clone")
        done.append(1)
with Manager(handler) as mgr:
    listener = mgr.listen("http://127.0.0.1:0")
    print(cymongoose.__file__, listener.local_addr[1], flush=True)
    while not done:
        mgr.poll(50)
    for _ in range(10):
        mgr.poll(10)
"""


def _environment(path: str) -> dict[str, str]:
    """What a user's shell would have: no CYMONGOOSE_MONGOOSE_DIR (so the build must fetch),
    none of this test run's Python settings, the index configuration left alone."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("CYMONGOOSE_", "PYTHON", "VIRTUAL_ENV", "UV_PROJECT",
                                  "PIP_NO_INDEX", "LD_PRELOAD", "ASAN_"))}
    env.update(PATH=path, UV_PYTHON_DOWNLOADS="never")
    return env


def _run(command: list[str], env: dict[str, str], cwd: Path,
         prefix: list[str] | None = None) -> str:
    started = time.monotonic()
    done = subprocess.run([*(prefix or []), *command], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=BUILD_SECONDS, check=False)
    print(f"{' '.join(command[:3])} ...: {time.monotonic() - started:.0f} s")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-8000:]
    return done.stdout + done.stderr


def _clone(tmp: Path) -> Path:
    """The committed HEAD, as `git clone` gives it: Mongoose's two files are not in it."""
    clone = tmp / "clone"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)],
                   check=True, timeout=120)
    assert not (clone / "vendor" / "mongoose" / "mongoose.c").exists()
    return clone


def _serves(python: Path, env: dict[str, str], cwd: Path,
            prefix: list[str] | None = None) -> None:
    """The installed copy (not the clone) answers an HTTP request over 127.0.0.1."""
    proc = subprocess.Popen([*(prefix or []), str(python), "-c", SERVE_ONE], env=env, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        where, port = proc.stdout.readline().split()
        assert where.startswith(str(python.parent.parent / "lib")), where
        answer = httpx.get(f"http://127.0.0.1:{port}/", timeout=30)
        assert (answer.status_code, answer.text) == (200, "built from a clone")
        assert proc.wait(timeout=30) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def _uv() -> str:
    """The uv binary: the one running these tests (`uv run` names itself in $UV), else as
    tools/bootstrap-uv.sh finds it (`uv` on PATH, or the uv package of python3)."""
    found = os.environ.get("UV") or shutil.which("uv")
    if found:
        return found
    probe = subprocess.run(["python3", "-c", "import uv; print(uv.find_uv_bin())"],
                           capture_output=True, text=True, check=False, timeout=60)
    assert probe.returncode == 0, "no uv: run `make setup` (tools/bootstrap-uv.sh installs it)"
    return probe.stdout.strip()


def _pip_packages() -> list[str]:
    """Every pip package directory an interpreter on this machine would import: the one
    running these tests, its base, and those PATH names."""
    pythons = {sys.executable, getattr(sys, "_base_executable", sys.executable)}
    pythons |= {found for name in ("python3", "python") if (found := shutil.which(name))}
    pythons |= {"/usr/bin/python3"} if Path("/usr/bin/python3").exists() else set()
    where = set()
    for python in pythons:
        probe = subprocess.run(
            [python, "-c", "import importlib.util as u; s = u.find_spec('pip'); "
             "print(s.submodule_search_locations[0] if s else '')"],
            capture_output=True, text=True, check=False, timeout=60,
            env={"PATH": os.environ["PATH"]})
        if probe.returncode == 0 and probe.stdout.strip():
            where.add(probe.stdout.strip())
    return sorted(where)


@pytest.fixture(scope="module")
def without_pip(seal: Callable[..., list[str] | None],
                tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], str]:
    """A command prefix under which no pip can run (each pip package this machine has is an
    empty directory), and a PATH holding uv and the system's tools."""
    prefix = seal(*_pip_packages())
    if prefix is None:
        pytest.skip("needs a private mount namespace (unshare --mount) to hide every pip")
    tools = tmp_path_factory.mktemp("uv-bin")
    (tools / "uv").symlink_to(_uv())
    path = f"{tools}{os.pathsep}/usr/local/bin{os.pathsep}/usr/bin{os.pathsep}/bin"
    probe = subprocess.run(
        [*prefix, sys.executable, "-m", "pip", "--version"], capture_output=True,
        check=False, env={"PATH": path}, timeout=60)
    assert probe.returncode != 0, "pip still runs under the seal"
    for name in ("pip3", "pip"):
        found = shutil.which(name, path=path)
        if found:
            ran = subprocess.run([*prefix, found, "--version"], capture_output=True,
                                 check=False, env={"PATH": path}, timeout=60)
            assert ran.returncode != 0, f"{found} still runs under the seal"
    return prefix, path


def test_a_fresh_venvs_bundled_pip_installs_a_clone(tmp_path: Path) -> None:
    """pip 23.x (Python 3.11's ensurepip) failed here with BackendInvalid before the fix."""
    clone = _clone(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    env = _environment(f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}")
    version = _run([str(python), "-m", "pip", "--version"], env, tmp_path)
    print("bundled", version.strip())
    _run([str(python), "-m", "pip", "install", "--disable-pip-version-check", str(clone)],
         env, tmp_path)
    _serves(python, env, tmp_path)


def test_uv_pip_install_of_a_clone_with_no_pip_anywhere(
        tmp_path: Path, without_pip: tuple[list[str], str]) -> None:
    """uv's build environment has no pip: fetch.py said "no pip found" before the fix."""
    prefix, path = without_pip
    clone = _clone(tmp_path)
    venv = tmp_path / "venv"
    env = _environment(path)
    _run(["uv", "venv", "--quiet", "--python", sys.executable, str(venv)], env, tmp_path,
         prefix)
    _run(["uv", "pip", "install", "--python", str(venv / "bin" / "python"), str(clone)],
         env, tmp_path, prefix)
    _serves(venv / "bin" / "python", env, tmp_path, prefix)


def test_uv_build_of_a_clone_with_no_pip_anywhere(
        tmp_path: Path, without_pip: tuple[list[str], str]) -> None:
    """`uv build --sdist`: the build backend fetches Mongoose in uv's build environment and
    packs it. (The wheel built from such an sdist is make test-installed's own, in
    tools/packaging/dist.py; building one here would compile a third time.)"""
    prefix, path = without_pip
    clone = _clone(tmp_path)
    out = _run(["uv", "build", "--sdist", "--python", sys.executable, "--out-dir",
                str(tmp_path / "dist"), str(clone)], _environment(path), tmp_path,
               prefix)
    assert re.search(r"fetch\.py: Mongoose \S+ ready", out), out
    (sdist,) = (tmp_path / "dist").glob("cymongoose-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    assert {"vendor/mongoose/mongoose.c", "vendor/mongoose/mongoose.h"} <= names
    # and what build_fixes.py applies to them
    assert {"vendor/mongoose/inventory.py", "vendor/mongoose/cym_fixes.h",
            "vendor/mongoose/fixes/accept4.c"} <= names


# A backend, loaded from the project's own backend-path as ours is, whose wheel is empty but
# whose build runs vendor/mongoose/fetch.py the way CMakeLists.txt does.
FETCHING_BACKEND = """
import base64, hashlib, subprocess, sys, zipfile

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    subprocess.run([sys.executable, "vendor/mongoose/fetch.py"], check=True)
    name = "fetchprobe-0-py3-none-any.whl"
    files = {"fetchprobe-0.dist-info/METADATA": "Metadata-Version: 2.1\\nName: fetchprobe\\n"
             "Version: 0\\n", "fetchprobe-0.dist-info/WHEEL": "Wheel-Version: 1.0\\n"
             "Generator: probe\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}
    record = []
    with zipfile.ZipFile(f"{wheel_directory}/{name}", "w") as whl:
        for path, text in files.items():
            whl.writestr(path, text)
            digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest())
            record.append(f"{path},sha256={digest.rstrip(b'=').decode()},{len(text)}")
        record.append("fetchprobe-0.dist-info/RECORD,,")
        whl.writestr("fetchprobe-0.dist-info/RECORD", "\\n".join(record) + "\\n")
    return name
"""


def test_a_current_pips_build_isolation_runs_the_fetch(tmp_path: Path) -> None:
    """Cheap (no compile): the fetch itself, under the newest pip's build isolation."""
    project = tmp_path / "project"
    (project / "backend").mkdir(parents=True)
    (project / "vendor" / "mongoose").mkdir(parents=True)
    for name in ("fetch.py", "pin.json"):
        shutil.copy(ROOT / "vendor" / "mongoose" / name, project / "vendor" / "mongoose" / name)
    (project / "backend" / "fetching_backend.py").write_text(FETCHING_BACKEND)
    (project / "pyproject.toml").write_text(textwrap.dedent("""\
        [build-system]
        requires = []
        build-backend = "fetching_backend"
        backend-path = ["backend"]
        """))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    env = _environment(f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}")
    _run([str(python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"], env, tmp_path)
    print("current", _run([str(python), "-m", "pip", "--version"], env, tmp_path).strip())
    out = _run([str(python), "-m", "pip", "install", "--disable-pip-version-check", "--verbose",
                str(project)], env, tmp_path)
    assert re.search(r"fetch\.py: Mongoose \S+ ready", out), out[-4000:]
    assert (project / "vendor" / "mongoose" / "mongoose.c").is_file()
