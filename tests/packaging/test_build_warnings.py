"""The build prints no warnings: Cython on our sources, and gcc on the C Cython generates and
on the patched mongoose.c, each run with the command and definitions CMakeLists.txt uses.

gcc runs with -fsyntax-only (about a second; the real -O2 compile of _mongoose.c takes about
a minute): it sees what the front end reports (types, const, declarations), which is where a
mistake in a .pyx/.pxi/.pxd shows in the C, but not the warnings only the optimiser emits."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENDOR = ROOT / "vendor" / "mongoose"
CMAKE = (ROOT / "CMakeLists.txt").read_text()
TLS_ENGINES = ("openssl", "builtin")
# How Mongoose waits: epoll on Linux (CMakeLists.txt adds MG_ENABLE_EPOLL=1 there), poll()
# elsewhere (macOS), where src/cymongoose/includes/cym_os.h stands in for Linux's epoll and
# sendfile; "poll" compiles that path here, as no other check on this machine does.
WAITS = ("epoll", "poll")

pytestmark = pytest.mark.no_asan


def _cython_args() -> list[str]:
    m = re.search(r'COMMAND \$\{CYMONGOOSE_CYTHON\}(.*?)"\$\{PYX\}" '
                  r'-o "\$\{GENERATED_C\}"', CMAKE, re.S)
    assert m, "CMakeLists.txt's Cython command moved: update this test"
    return shlex.split(m.group(1).replace("${CMAKE_CURRENT_SOURCE_DIR}", str(ROOT)))


def _gcc_args(target: str, tls: str, wait: str = "epoll") -> list[str]:
    """The target's warning options and Mongoose's definitions (PUBLIC: both targets)."""
    m = re.search(r"target_compile_definitions\(mongoose PUBLIC\n(.*?)\)\n", CMAKE, re.S)
    assert m, "CMakeLists.txt's Mongoose definitions moved: update this test"
    words = [w for line in m.group(1).splitlines() for w in line.split("#", 1)[0].split()]
    linux = re.search(r'if\(CMAKE_SYSTEM_NAME STREQUAL "Linux"\)\n'
                      r"  target_compile_definitions\(mongoose PUBLIC ([^)]*)\)", CMAKE)
    assert linux, "CMakeLists.txt's Linux-only definitions moved: update this test"
    if wait == "epoll":
        words += linux.group(1).split()
    else:  # mongoose.h would turn epoll on by itself on Linux
        words += ["MG_ENABLE_EPOLL=0", "CYM_HAVE_SENDFILE=0"]
    words = [f"MG_TLS=MG_TLS_{tls.upper()}" if w == "${MONGOOSE_TLS_DEFINE}" else w
             for w in words]
    assert not [w for w in words if "$" in w], words
    options = re.findall(rf"target_compile_options\({target} PRIVATE ([^)]*)\)", CMAKE)
    warnings = [o for line in options for o in line.split() if o.startswith("-W")]
    return [f"-D{w}" for w in words] + warnings


def _gcc(source: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    gcc = shutil.which("gcc") or shutil.which("cc")
    assert gcc is not None, "a C compiler is needed (the extension is built with one)"
    return subprocess.run([gcc, "-fsyntax-only", *args, str(source)],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def cythonized(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("cython") / "_mongoose.c"
    r = subprocess.run([sys.executable, "-m", "cython", *_cython_args(),
                        str(ROOT / "src" / "cymongoose" / "_mongoose.pyx"), "-o", str(out)],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    return out, r.stdout + r.stderr


def test_cython_prints_nothing(cythonized: tuple[Path, str]) -> None:
    # Warnings and performance hints alike: fix the source, don't silence Cython.
    assert cythonized[1] == ""


@pytest.mark.parametrize("wait", WAITS)
@pytest.mark.parametrize("tls", TLS_ENGINES)
def test_generated_c_compiles_without_warnings(cythonized: tuple[Path, str], tls: str,
                                               wait: str) -> None:
    includes = ["-I", str(ROOT / "src" / "cymongoose" / "includes"), "-I", str(VENDOR),
                "-isystem", sysconfig.get_paths()["include"]]
    r = _gcc(cythonized[0], includes + _gcc_args("_mongoose", tls, wait))
    assert r.returncode == 0 and r.stderr == "", r.stderr[-4000:]


@pytest.mark.parametrize("wait", WAITS)
@pytest.mark.parametrize("tls", TLS_ENGINES)
def test_mongoose_c_compiles_without_warnings(tmp_path: Path, tls: str, wait: str) -> None:
    built = tmp_path / "mongoose.c"
    subprocess.run([sys.executable, str(VENDOR / "build_fixes.py"), str(VENDOR / "mongoose.c"),
                    str(built)], check=True, timeout=60)
    r = _gcc(built, ["-I", str(VENDOR)] + _gcc_args("mongoose", tls, wait))
    assert r.returncode == 0 and r.stderr == "", r.stderr[-4000:]
