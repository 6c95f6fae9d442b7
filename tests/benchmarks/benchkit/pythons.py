"""The pythons phase: the app servers (WSGI, ASGI, Flask, FastAPI: ours and the peers) on each
CPython the machine has, for the ratios ours ÷ granian (and the others) per version. A
free-threaded build counts as a version of its own (3.13t), its servers run with PYTHON_GIL=0.

The project's own version runs what the run prepared (.venv, the peers' envs). Every other
version gets envs of its own under .envs/: ours built from the working tree (non-editable,
`uv pip install <root>`, with Flask, FastAPI and uvloop; rebuilt when the source tree's git
HEAD or its uncommitted changes differ: source_key()), and each peer's env as the run makes
it, from that interpreter. Every env is made before the first measured run. A version that is
not found, or for which ours fails to build, is skipped with one line saying why; a peer that
fails to install is skipped alone. Runs are named <contender>@py<X.Y>, phase "pythons".
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import logging
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from . import contenders as ck
from .shapes import interleaved, python_version

log = logging.getLogger("bench")

MINIMUM = (3, 10)
# What our servers import besides cymongoose (the project's .venv has them from its groups).
PROJECT_EXTRAS = ["flask", "fastapi", "uvloop"]
# On a free-threaded build: no uvloop (no free-threaded wheel; the ASGI servers run asyncio's
# loop), and pydantic-core only as a wheel (its source build needs Rust).
FREE_THREADED_EXTRAS = ["flask", "fastapi"]
FREE_THREADED_PIP_ARGS = ["--only-binary", "pydantic-core"]
# The peers' environments there: wheels only, so each package is its newest release with a
# free-threaded wheel (granian's newest may have none) and a peer whose extension has none
# (uvicorn's uvloop) is skipped saying so, rather than built from source.
FREE_THREADED_PEER_PIP_ARGS = ["--only-binary", ":all:"]
# A version as this phase names it: "3.13", or "3.13t" for a free-threaded build (the name
# of its wheels' tag and of its interpreter).
VERSION = re.compile(r"3\.\d+t?")
# The inputs of our build: a change in any of them means a new build.
SOURCE_PATHS = ["src", "CMakeLists.txt", "pyproject.toml", "vendor", "tools/packaging"]
BUILD_TIMEOUT_S = 1200


def _minor(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.removesuffix("t").split(".")[:2])


def order(version: str) -> tuple[tuple[int, ...], bool]:
    """3.13 before 3.13t before 3.14."""
    return _minor(version), version.endswith("t")


def cached_free_threaded() -> str:
    """The free-threaded 3.13 that `make test` builds and caches (make py313t-venv)."""
    cache = os.environ.get("CYMONGOOSE_PYTHONS_CACHE") or os.path.expanduser(
        "~/.cache/cymongoose-pythons")
    return f"{cache}/3.13t/bin/python3.13t"


def find() -> dict[str, str]:
    """{"3.12": interpreter, "3.13t": ..., ...}: every CPython 3.10+ of pyenv (PYENV_ROOT or
    ~/.pyenv; the newest patch release per version), on PATH (python3.X, python3.Xt) or
    cached by make test (cached_free_threaded()); a free-threaded build is named 3.Xt."""
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    candidates = sorted(glob.glob(f"{root}/versions/*/bin/python"), reverse=True,
                        key=lambda p: [int(x) if x.isdigit() else -1
                                       for x in re.split(r"[.-]", Path(p).parent.parent.name)])
    for minor in range(MINIMUM[1], 20):
        for name in (f"python3.{minor}", f"python3.{minor}t"):
            found = shutil.which(name)
            if found:
                candidates.append(found)
    candidates.append(cached_free_threaded())
    out: dict[str, str] = {}
    code = ("import platform, sys, sysconfig; "
            "print(platform.python_implementation(), '%d.%d' % sys.version_info[:2] + "
            "('t' if sysconfig.get_config_var('Py_GIL_DISABLED') else ''))")
    for path in candidates:
        try:
            r = subprocess.run([path, "-c", code], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        impl, _, version = r.stdout.strip().partition(" ")
        if r.returncode == 0 and impl == "CPython" and _minor(version) >= MINIMUM:
            out.setdefault(version, path)
    return dict(sorted(out.items(), key=lambda kv: order(kv[0])))


def source_key() -> str:
    """The git HEAD and a hash of the uncommitted changes (and untracked files) of our
    build's inputs."""
    def git(*a: str) -> bytes:
        return subprocess.run(["git", "-C", str(ck.ROOT), *a], capture_output=True).stdout

    h = hashlib.sha256(git("diff", "HEAD", "--", *SOURCE_PATHS))
    for name in git("ls-files", "--others", "--exclude-standard", "--", *SOURCE_PATHS).split():
        path = ck.ROOT / name.decode()
        h.update(name + (path.read_bytes() if path.is_file() else b""))
    return f"{git('rev-parse', 'HEAD').decode().strip()} {h.hexdigest()[:16]}"


def _all_cpus() -> None:
    # The runner pins itself to wrk's CPU; a build may use every CPU (nothing is measured).
    os.sched_setaffinity(0, range(os.cpu_count() or 1))


def ensure_ours(version: str, base_python: str, *, env_name: str | None = None,
                extras: list[str] | None = None, pip_args: list[str] | None = None) -> str:
    """Our package built for `version` into .envs/cymongoose-py<version> (or `env_name`),
    with `extras` (default PROJECT_EXTRAS) installed beside it and `pip_args` given to the
    install (constraints, --only-binary): its python."""
    extras = PROJECT_EXTRAS if extras is None else extras
    pip_args = pip_args or []
    env_dir = ck.ENVS_DIR / (env_name or f"cymongoose-py{version}")
    python = env_dir / "bin" / "python"
    stamp = env_dir / ".source"
    wanted = f"{source_key()}\n{' '.join(extras)}\n" + (
        f"{' '.join(pip_args)}\n" if pip_args else "")
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return str(python)
    uv = ck.uv_command()
    log.info("building cymongoose for Python %s into %s (a minute or two)", version,
             env_dir.relative_to(ck.ROOT))
    r = subprocess.run(uv + ["venv", "--quiet", "--clear", "--python", base_python,
                             str(env_dir)], capture_output=True, text=True)
    if r.returncode != 0:
        raise ck.Skip(f"could not create its venv: {ck._tail(r.stderr)}")
    # Our build tree for this version stays under .cache/ (scikit-build-core's build-dir),
    # out of the repository's build/ that the project's .venv uses.
    build_dir = ck.CACHE_DIR / "build" / env_dir.name
    cmd = uv + ["pip", "install", "--quiet", "--python", str(python), "--reinstall-package",
                "cymongoose", "--refresh-package", "cymongoose", "-C", f"build-dir={build_dir}",
                *pip_args, str(ck.ROOT)] + extras
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
                           preexec_fn=_all_cpus)
    except subprocess.TimeoutExpired:
        raise ck.Skip(f"building cymongoose took over {BUILD_TIMEOUT_S} s") from None
    if r.returncode != 0:
        raise ck.Skip(f"building cymongoose failed: {ck._tail(r.stderr)}")
    stamp.write_text(wanted)
    return str(python)


def build_flags(version: str) -> dict[str, str]:
    """The compile flags of our extension as built for `version` (its build.ninja)."""
    ninja = ck.CACHE_DIR / "build" / f"cymongoose-py{version}" / "build.ninja"
    if not ninja.exists():
        return {}
    m = re.search(r"^build \S*_mongoose\.c\.o: .*\n((?:  .*\n)+)", ninja.read_text(),
                  re.MULTILINE)
    return dict(re.findall(r"^  (FLAGS|DEFINES) = (.*)$", m.group(1), re.MULTILINE)) if m else {}


def register(bench: Any, d: ck.Contender, base: ck.Contender, version: str) -> None:
    """A status entry for `d`, the copy of `base` for Python `version`."""
    entry = bench.status.setdefault(d.name, {})
    entry.update(label=d.label, kind=d.kind, env=d.env, notes=d.notes, keepalive=d.keepalive,
                 file=str(d.file.relative_to(ck.BENCH_DIR)), of=base.name, python_for=version)
    if d.app:
        entry["app"] = dict(d.app)


def prepare_version(bench: Any, group: list[ck.Contender], version: str, python: str | None,
                    own: bool) -> list[ck.Contender]:
    """The group's copies for `version`, prepared (envs built); raises Skip when the version
    cannot run (not found, ours not built)."""
    if own:
        out = []
        for c in group:
            d = dataclasses.replace(c, name=f"{c.name}@py{version}",
                                    versions=dict(c.versions))
            register(bench, d, c, version)
            bench.status[d.name].update(state="ready", versions=d.versions,
                                        python=bench.status[c.name].get("python"),
                                        python_version=bench.status[c.name].get(
                                            "python_version"))
            out.append(d)
        return out
    if not VERSION.fullmatch(version):
        raise ck.Skip("not a CPython version (3.X, or 3.Xt free-threaded)")
    if _minor(version) < MINIMUM:
        raise ck.Skip(f"older than {'.'.join(map(str, MINIMUM))}, which cymongoose requires")
    if python is None:
        raise ck.Skip("not found (no pyenv version or python3.X on PATH)")
    free_threaded = version.endswith("t")
    ours = (ensure_ours(version, python,
                        extras=FREE_THREADED_EXTRAS if free_threaded else None,
                        pip_args=FREE_THREADED_PIP_ARGS if free_threaded else None)
            if any(c.env == "project" for c in group) else "")
    out = []
    for c in group:
        env = c.env if c.env in ("project", "system") else f"{c.env}-py{version}"
        # A free-threaded build keeps its GIL off even if an import would turn it back on.
        command = ["env", "PYTHON_GIL=0", *c.command] if free_threaded else c.command
        d = dataclasses.replace(c, name=f"{c.name}@py{version}", env=env, versions={},
                                python=None, command=command)
        register(bench, d, c, version)
        try:
            ck.prepare(d, ours, python,
                       FREE_THREADED_PEER_PIP_ARGS if free_threaded else None)
        except ck.Skip as exc:
            bench.exclude(d.name, "skipped", str(exc))
            continue
        # Build-only packages (cython) are absent from a non-editable install: not listed.
        d.versions = {k: v for k, v in d.versions.items() if v != "missing"}
        bench.status[d.name].update(state="ready", versions=d.versions, python=d.python,
                                    python_version=python_version(d.python or python))
        out.append(d)
    return out


def wanted_versions(bench: Any, own: str, found: dict[str, str]) -> list[str]:
    if bench.args.pythons:
        asked = {v.strip() for v in bench.args.pythons.split(",") if v.strip()}
        return sorted(asked, key=lambda v: order(v) if VERSION.fullmatch(v)
                      else ((99,), False))
    if bench.args.quick:
        return [own]
    return sorted(set(found) | {own}, key=order)


def run(bench: Any, group: list[ck.Contender], files: list[Path],
        info: dict[str, Any]) -> None:
    if not group:
        return
    project_python = ck.ROOT / ".venv" / "bin" / "python"
    own_python = group[0].python if group[0].env == "project" and group[0].python else str(
        project_python)
    own = ".".join(python_version(own_python).split(".")[:2])
    found = find()
    versions = wanted_versions(bench, own, found)
    info.update(project_version=own, found=found, contenders=[c.name for c in group],
                versions={})
    log.info("== pythons phase: %s on Python %s", ", ".join(c.name for c in group),
             ", ".join(versions))
    plans: list[tuple[str, list[ck.Contender]]] = []
    for version in versions:  # every env first: nothing builds between measured runs
        entry = info["versions"].setdefault(version, {})
        try:
            copies = prepare_version(bench, group, version, found.get(version), version == own)
        except ck.Skip as exc:
            entry.update(state="skipped", reason=str(exc))
            log.warning("Python %s: skipped: %s", version, exc)
            continue
        # 3.13.5t: the release, and "t" for a free-threaded build (run with PYTHON_GIL=0).
        full = python_version(own_python if version == own else found[version])
        entry.update(state="ready", python=own_python if version == own else found[version],
                     full_version=full + ("t" if version.endswith("t") else ""),
                     contenders=[d.name for d in copies])
        if version != own:
            entry["extension_build"] = build_flags(version)
        plans.append((version, copies))
    for version, copies in plans:
        log.info("== pythons phase, Python %s: %s", version, ", ".join(d.name for d in copies))
        interleaved(bench, "pythons", copies, files, connections=bench.args.connections,
                    extra={"python": version})
        info["versions"][version]["state"] = "measured"
