"""The threads phase (issue 37): what `--loop-threads` costs and saves on a free-threaded
CPython 3.13 (3.13t) with the GIL off (docs/free-threading.md).

Every server of the phase is our `cymongoose` CLI (`python -m cymongoose hello_apps:APP
--interface ...`, the hello apps of servers/hello_apps.py that the hello phase serves), on
one of two interpreters, each with an environment of its own under .envs/ (pythons.py's
ensure_ours(): our package built from the working tree, Flask and FastAPI at the project
.venv's versions; no uvloop in either, so the ASGI servers run asyncio's loop on both):

- the free-threaded 3.13t (--ft-python; default the one `make py313t-build` caches,
  ~/.cache/cymongoose-pythons/3.13t/bin/python3.13t), run with PYTHON_GIL=0 unless a leg
  says otherwise; pydantic-core only from a wheel (no free-threaded build at uv.lock's
  version: the newest with one, as make py313t-build does);
- a GIL build of 3.13 (--gil-python; default pyenv's newest 3.13), its Flask, FastAPI and
  pydantic pinned to what the 3.13t environment got.

Parts, each with interleaved rounds (every server of a group runs once, then the next
round), a warm-up of the same load first, medians over the rounds, and each ratio the median
of the per-round ratios of one run:

1. price: raw, WSGI and ASGI hello, one server each pinned to the server CPU and wrk
   (-t1 -c--connections) to the client CPU: (a) `--loop-threads 1` on 3.13t, GIL off;
   (b) one plain process on 3.13t, GIL off; (c) one process on the GIL build; also (d) 3.13t
   with the GIL on (PYTHON_GIL=1) and granian's WSGI and ASGI on 3.13t with the GIL off (part
   5). (a) ÷ (b) is the price of free threading's loop threads (serve.py takes the same path
   for `--loop-threads 1` as without the option, so on this code it is the run's noise
   floor), (b) ÷ (c) the price of the free-threaded build.
2. apps: WSGI app threads on free threading. Two apps of hello_apps.py, each served with
   app threads: one that waits WAIT_S per request off the CPU (as an app waits on its
   database: the realworld phase's slowdb shape without PostgreSQL; --threads 32, wrk
   -cWAIT_CONNECTIONS) and one that computes a fixed piece of pure Python per request
   (--threads 8). Legs: 3.13t GIL off, 3.13t GIL on, the GIL build, and granian on 3.13t
   (as many blocking threads). With the GIL off the computing app's threads run at once, but
   only with server CPUs to run on: where the machine has 2 + shapes.WRK_CPUS CPUs or more,
   the server gets all but wrk's. On fewer, the waiting app's servers get the price part's
   one CPU each, and the computing app's servers every CPU, with wrk sharing the last: at
   about a thousand requests a second wrk needs a few percent of it (each run records its
   share). info["apps"] says which.
3. scale: N loop threads in one process against N worker processes (`--workers N`), and
   granian's N workers, on 3.13t with the GIL off, for N in 1, 2, 4, 8: each N only where
   the machine has N + shapes.WRK_CPUS CPUs (the workers phase's rule: the server on CPUs
   0..N-1, wrk's threads on the others), else skipped, saying why.
4. rss: Flask and FastAPI (hello_apps) on 3.13t, GIL off: one process with
   `--loop-threads N` against `--workers N` for N in RSS_N, and one plain process for scale,
   each started fresh per round, loaded for the warm-up (wrk at --connections, at least 2 s),
   its connections closed, then sampled. For `--workers N` the figure is the sum of the N
   worker processes' RSS (the supervisor's, which serves nothing, is recorded apart); the
   goal (issue 37) is loops ÷ workers <= RSS_GOAL. PSS is recorded beside RSS.
5. granian: a free-threaded granian wheel (cp313t) from the package index into
   .envs/granian-ft-threads (only a wheel: no Rust build); if none installs, its servers are
   skipped with the installer's reason.

Every run records the interpreter it ran on: sys.version, Py_GIL_DISABLED and
sys._is_gil_enabled() as a probe with the run's PYTHON_GIL saw them once the core (and the
app's framework) was imported, and for PYTHON_GIL=0 whether the GIL would have stayed off
without it (an extension not declared free-threading safe turns it back on at import).
Without the free-threaded interpreter (or with one whose GIL will not stay off) the phase is
skipped, with one line in the log and in threads.json.
Results: results/threads.json and threads.md (benchkit/threadsreport.py).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import contenders as ck
from . import procstat, pythons, shapes
from . import wrk as wrkmod

log = logging.getLogger("bench")

PHASE = "threads"
FT_VERSION = "3.13t"
GIL_VERSION = "3.13"
SCALE = (1, 2, 4, 8)
RSS_GOAL = 0.6
RSS_WARMUP_S = 2.0
# What our servers import besides cymongoose, pinned to the project .venv's versions; pydantic
# follows fastapi (from a wheel on 3.13t).
FRAMEWORKS = ("flask", "werkzeug", "fastapi", "starlette")
PINNED_FROM_FT = FRAMEWORKS + ("pydantic", "pydantic-core")
# Not the pythons phase's granian-py3.13t, which holds the apps' packages too.
GRANIAN_ENV = "granian-ft-threads"


@dataclass(frozen=True)
class App:
    id: str
    ref: str
    interface: str
    label: str
    args: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()  # what the probe imports besides the core, for its GIL state
    blocking: int = 8  # granian's --blocking-threads for a WSGI app (ours: --threads in args)


HELLO = (App("raw", "hello_apps:raw_hello", "raw", "raw hello"),
         App("wsgi", "hello_apps:wsgi_hello", "wsgi", "WSGI hello", ("--threads", "8")),
         App("asgi", "hello_apps:asgi_hello", "asgi", "ASGI hello", ("--lifespan", "off")))
RSS_APPS = (App("flask", "hello_apps:flask_app", "wsgi", "Flask hello", ("--threads", "8"),
                ("flask",)),
            App("fastapi", "hello_apps:fastapi_app", "asgi", "FastAPI hello",
                ("--lifespan", "auto"), ("fastapi",)))


# The apps part: the app-thread counts (and granian's blocking threads) match, so each server
# has as many app threads; 32 threads x 2 ms bound the waiting app at 16,000 req/s, above
# what one CPU serves.
WAIT_CONNECTIONS = 64
APP_THREADS = (App("wait", "hello_apps:wsgi_wait", "wsgi", "WSGI app waiting 2 ms off the CPU",
                   ("--threads", "32"), blocking=32),
               App("cpu", "hello_apps:wsgi_cpu", "wsgi",
                   "WSGI app computing (a 20,000-step Python loop)", ("--threads", "8")))


@dataclass(frozen=True)
class Leg:
    """One way of serving an app: which interpreter, PYTHON_GIL, and the CLI's options."""

    id: str
    label: str
    interp: str  # "ft" or "gil"
    gil: str | None  # PYTHON_GIL for the server (None: unset)
    options: tuple[str, ...] = ()
    server: str = "cymongoose"  # or "granian"


PRICE_LEGS = (
    Leg("ft-loops1", "3.13t, GIL off, --loop-threads 1", "ft", "0", ("--loop-threads", "1")),
    Leg("ft", "3.13t, GIL off, one process", "ft", "0"),
    Leg("ft-gil-on", "3.13t, GIL on (PYTHON_GIL=1), one process", "ft", "1"),
    Leg("gil", "3.13 GIL build, one process", "gil", None),
    Leg("granian-ft", "granian on 3.13t, GIL off, 1 worker", "ft", "0", server="granian"),
)


APP_LEGS = tuple(leg for leg in PRICE_LEGS if leg.id in ("ft", "ft-gil-on", "gil", "granian-ft"))
SCALE_LEGS = ("loops", "workers", "granian")
# Memory needs no CPU of its own per loop (the servers are sampled idle), so every N here runs
# on any machine, unlike the scale part's.
RSS_N = (2, 4)
RSS_CONFIGS = (("plain", "one process", ()),
               *((f"{kind}{n}", f"--{option} {n}", (f"--{option}", str(n)))
                 for n in RSS_N
                 for kind, option in (("loops", "loop-threads"), ("workers", "workers"))))


def names() -> list[str]:
    """Every server the phase may run (for --only, --skip and --list): part-leg-app."""
    out = [f"price-{leg.id}-{app.id}" for app in HELLO for leg in PRICE_LEGS
           if not (leg.server == "granian" and app.interface == "raw")]
    out += [f"apps-{leg.id}-{app.id}" for app in APP_THREADS for leg in APP_LEGS]
    out += [f"scale-{leg}{n}-{app.id}" for n in SCALE for app in HELLO for leg in SCALE_LEGS
            if not (leg == "granian" and app.interface == "raw")]
    out += [f"rss-{cid}-{app.id}" for app in RSS_APPS for cid, _text, _opts in RSS_CONFIGS]
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ft-python", default=pythons.cached_free_threaded(),
                   help="the free-threaded CPython 3.13 of the threads phase (default: the one "
                   "`make py313t-build` caches)")
    p.add_argument("--gil-python", default="",
                   help="the GIL build of CPython 3.13 the threads phase compares it with "
                   "(default: pyenv's or PATH's newest 3.13)")


@dataclass
class Server:
    """A contender of the phase and what its runs record."""

    contender: ck.Contender
    part: str
    app: App
    leg: Leg
    n: int = 1
    interpreter: dict[str, Any] = field(default_factory=dict)


PROBE = """\
import importlib, json, sys, sysconfig
for name in sys.argv[1:]:
    importlib.import_module(name)
is_gil_enabled = getattr(sys, "_is_gil_enabled", None)
print(json.dumps({"version": sys.version, "executable": sys.executable,
                  "Py_GIL_DISABLED": sysconfig.get_config_var("Py_GIL_DISABLED"),
                  "gil_enabled": is_gil_enabled() if is_gil_enabled else True,
                  "imported": sys.argv[1:]}))
"""


def _hello_apps() -> Any:
    """servers/hello_apps.py as a module (the apps part records its constants)."""
    spec = importlib.util.spec_from_file_location("hello_apps", ck.SERVERS_DIR / "hello_apps.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _gil_env(gil: str | None) -> list[str]:
    """The argv prefix that sets (or unsets) PYTHON_GIL for what follows: a GIL build
    refuses PYTHON_GIL=0, so it must not inherit one."""
    return ["env", f"PYTHON_GIL={gil}"] if gil is not None else ["env", "-u", "PYTHON_GIL"]


def probe(python: str, gil: str | None, modules: list[str]) -> dict[str, Any]:
    """The interpreter as a server with PYTHON_GIL=`gil` sees itself once `modules` are
    imported (the GIL's state is final then: an extension not declared free-threading safe
    turns it back on at import)."""
    try:
        r = subprocess.run(_gil_env(gil) + [python, "-c", PROBE, *modules],
                           capture_output=True, text=True, timeout=120, cwd=ck.SERVERS_DIR)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": str(exc)}
    if r.returncode != 0:
        return {"error": ck._tail(r.stderr)}
    out: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    out["PYTHON_GIL"] = gil
    return out


class ThreadsPhase:
    """`bench` is a Bench of run.py's of its own: its status and runs are threads.json's."""

    def __init__(self, bench: Any, *, ft_python: str, gil_python: str = "",
                 only: set[str] | None = None, skip: set[str] | None = None) -> None:
        self.bench = bench
        self.ft_python, self.gil_python = ft_python, gil_python
        self.only, self.skip = only or set(), skip or set()
        self.skipped: str | None = None
        self.info: dict[str, Any] = {}
        self.settings: dict[str, Any] = {}
        self.pythons: dict[str, str] = {}  # "ft"/"gil" -> our environment's python
        self.granian: str | None = None
        self._probes: dict[tuple[str, str | None, tuple[str, ...]], dict[str, Any]] = {}

    # -- set-up ------------------------------------------------------------------------------

    def skip_phase(self, why: str) -> None:
        self.skipped = why
        log.warning("== threads phase skipped: %s", why)

    def check_ft(self) -> str | None:
        """Why the free-threaded interpreter cannot run the phase, or None."""
        if not Path(self.ft_python).exists():
            return (f"no free-threaded CPython 3.13 at {self.ft_python} (`make py313t-build` "
                    "builds and caches it; or give --ft-python)")
        build = probe(self.ft_python, "0", [])
        self.info["ft_interpreter"] = build
        if "error" in build:
            return f"{self.ft_python} does not run: {build['error']}"
        if not build.get("Py_GIL_DISABLED"):
            return f"{self.ft_python} is not a free-threaded build (Py_GIL_DISABLED is not 1)"
        if build.get("gil_enabled"):
            return f"{self.ft_python} runs with the GIL on even with PYTHON_GIL=0"
        return None

    def gil_base(self) -> str | None:
        if self.gil_python:
            return self.gil_python
        return pythons.find().get(GIL_VERSION)

    def prepare_envs(self) -> bool:
        """Our environments (and granian's); False, with the phase skipped, when the
        free-threaded one cannot be made."""
        project = ck.ROOT / ".venv" / "bin" / "python"
        pins = ck.package_versions(str(project), list(FRAMEWORKS)) if project.exists() else {}
        ft_extras = [f"{p}=={v}" if v not in ("missing", "unknown") else p
                     for p, v in (pins or {p: "missing" for p in FRAMEWORKS}).items()]
        try:
            # Not the pythons phase's cymongoose-py3.13t: its frameworks are pinned here.
            self.pythons["ft"] = pythons.ensure_ours(
                FT_VERSION, self.ft_python, env_name=f"cymongoose-py{FT_VERSION}-threads",
                extras=ft_extras, pip_args=pythons.FREE_THREADED_PIP_ARGS)
        except ck.Skip as exc:
            self.skip_phase(f"our environment for {FT_VERSION} could not be made: {exc}")
            return False
        ft_versions = ck.package_versions(self.pythons["ft"], list(PINNED_FROM_FT))
        self.info["ft_env"] = {"python": self.pythons["ft"], "versions": ft_versions}
        base = self.gil_base()
        gil_entry = self.info.setdefault("gil_env", {"base": base})
        if base is None:
            gil_entry["skipped"] = f"no CPython {GIL_VERSION} found (pyenv or PATH)"
        else:
            build = probe(base, None, [])
            gil_entry["interpreter"] = build
            if "error" in build or build.get("Py_GIL_DISABLED"):
                gil_entry["skipped"] = (f"{base} is not a GIL build of {GIL_VERSION}: "
                                        f"{build.get('error') or 'Py_GIL_DISABLED is 1'}")
            else:
                extras = [f"{p}=={v}" for p, v in ft_versions.items()
                          if v not in ("missing", "unknown")]
                try:
                    self.pythons["gil"] = pythons.ensure_ours(
                        GIL_VERSION, base, env_name=f"cymongoose-py{GIL_VERSION}-threads",
                        extras=extras)
                    gil_entry.update(python=self.pythons["gil"], versions=ck.package_versions(
                        self.pythons["gil"], list(PINNED_FROM_FT)))
                except ck.Skip as exc:
                    gil_entry["skipped"] = f"our environment could not be made: {exc}"
        if "skipped" in gil_entry:
            log.warning("threads phase: the GIL build's servers are skipped: %s",
                        gil_entry["skipped"])
        self.granian = self.ensure_granian()
        return True

    def ensure_granian(self) -> str | None:
        """granian from a free-threaded wheel in its own environment: its python, or None
        with info["granian"] saying why not."""
        entry = self.info.setdefault("granian", {})
        env_dir = ck.ENVS_DIR / GRANIAN_ENV
        python = env_dir / "bin" / "python"
        stamp = env_dir / ".requires"
        wanted = "granian --only-binary granian\n"
        try:
            uv = ck.uv_command()
        except ck.Skip as exc:
            entry["skipped"] = str(exc)
            return None
        if not (python.exists() and stamp.exists() and stamp.read_text() == wanted):
            r = subprocess.run(uv + ["venv", "--quiet", "--clear", "--python", self.ft_python,
                                     str(env_dir)], capture_output=True, text=True)
            if r.returncode == 0:
                r = subprocess.run(uv + ["pip", "install", "--quiet", "--python", str(python),
                                         "--only-binary", "granian", "granian"],
                                   capture_output=True, text=True)
            if r.returncode != 0:
                entry["skipped"] = (f"no free-threaded granian wheel installs on "
                                    f"{FT_VERSION}: {ck._tail(r.stderr, 3)}")
                log.warning("threads phase: granian skipped: %s", entry["skipped"])
                return None
            stamp.write_text(wanted)
        entry.update(python=str(python),
                     versions=ck.package_versions(str(python), ["granian"]),
                     interpreter=probe(str(python), None, ["granian._granian"]))
        return str(python)

    def interpreter(self, leg: Leg, app: App) -> dict[str, Any]:
        python = self.granian if leg.server == "granian" else self.pythons[leg.interp]
        assert python is not None
        modules = (["granian._granian"] if leg.server == "granian"
                   else ["cymongoose._mongoose", *app.imports])
        key = (python, leg.gil, tuple(modules))
        if key not in self._probes:
            found = probe(python, leg.gil, modules)
            if leg.gil == "0" and "error" not in found:
                # Whether what it imports would keep the GIL off without being told to.
                alone = probe(python, None, modules)
                found["gil_enabled_without_PYTHON_GIL"] = alone.get("gil_enabled")
            self._probes[key] = found
        return self._probes[key]

    # -- servers -----------------------------------------------------------------------------

    def command(self, leg: Leg, app: App, n: int = 1) -> list[str]:
        host = ["--host", "127.0.0.1", "--port", "{port}", "--log-level", "warning"]
        if leg.server == "granian":
            blocking = (["--blocking-threads", str(app.blocking)] if app.interface == "wsgi"
                        else [])
            argv = ["{python}", "-m", "granian", "--interface", app.interface, "--workers",
                    str(n), *blocking, *host, "--no-ws", app.ref]
        else:
            argv = ["{python}", "-m", "cymongoose", app.ref, "--interface", app.interface,
                    *host, *app.args, *leg.options]
        return _gil_env(leg.gil) + argv

    def server(self, part: str, app: App, leg: Leg, *, n: int = 1,
               options: tuple[str, ...] = (), label: str = "") -> Server | None:
        """A contender of `part`; None when its interpreter's environment is missing (the
        reason is in its status) or --only/--skip leave it out."""
        name = f"{part}-{leg.id}-{app.id}"
        if (self.only and name not in self.only) or name in self.skip:
            return None
        leg = Leg(leg.id, label or leg.label, leg.interp, leg.gil, leg.options + options,
                  leg.server)
        python = self.granian if leg.server == "granian" else self.pythons.get(leg.interp)
        command = self.command(leg, app, n)
        c = ck.Contender(name=name, label=f"{app.label}: {leg.label}", kind="hello",
                         file=ck.SERVERS_DIR / "hello_apps.py", command=command,
                         env=leg.interp, python=python,
                         notes=" ".join(command).replace("{port}", "PORT"))
        entry = self.bench.status.setdefault(name, {})
        entry.update(label=c.label, kind="hello", env=leg.interp, notes=c.notes, part=part,
                     app=app.id, leg=leg.id, n=n, keepalive=True,
                     file=str(c.file.relative_to(ck.BENCH_DIR)))
        if python is None:
            why = (self.info.get("granian", {}).get("skipped") if leg.server == "granian"
                   else self.info.get("gil_env", {}).get("skipped"))
            self.bench.exclude(name, "skipped", why or "its environment is missing")
            return None
        interp = self.interpreter(leg, app)
        versions = {"python": interp.get("version", "?").split()[0]}
        if leg.server == "granian":
            versions.update(self.info["granian"].get("versions", {}))
        else:
            versions.update(ck.package_versions(python, ["cymongoose", *app.imports]))
        entry.update(state="ready", python=python, interpreter=interp, versions=versions)
        if "error" in interp:
            self.bench.exclude(name, "skipped", f"its interpreter probe failed: "
                               f"{interp['error']}")
            return None
        if leg.gil == "0" and interp.get("gil_enabled"):
            self.bench.exclude(name, "skipped", "the GIL is on despite PYTHON_GIL=0")
            return None
        return Server(c, part, app, leg, n, interp)

    def annotate(self, servers: list[Server]) -> None:
        """What every run of `servers` records besides the bench's own fields."""
        by_name = {s.contender.name: s for s in servers}
        for run in self.bench.runs:
            s = by_name.get(run["contender"])
            if s is not None and "leg" not in run:
                run.update(part=s.part, app=s.app.id, leg=s.leg.id, n=s.n,
                           interpreter=s.interpreter)

    # -- the parts ---------------------------------------------------------------------------

    def price(self) -> None:
        info = self.info.setdefault("price", {"connections": self.bench.args.connections,
                                              "legs": {g.id: g.label for g in PRICE_LEGS}})
        for app in HELLO:
            group = [s for s in (self.server("price", app, leg) for leg in PRICE_LEGS
                                 if not (leg.server == "granian" and app.interface == "raw"))
                     if s is not None]
            info.setdefault("contenders", []).extend(s.contender.name for s in group)
            if not group:
                continue
            log.info("== threads phase, %s: %s", app.label,
                     ", ".join(s.contender.name for s in group))
            shapes.interleaved(self.bench, "price", [s.contender for s in group], [],
                               connections=self.bench.args.connections)
            self.annotate(group)

    def app_threads(self) -> None:
        bench = self.bench
        cpus = os.cpu_count() or 1
        apps = _hello_apps()
        plan: dict[str, Any] = {"cpus": cpus, "legs": {g.id: g.label for g in APP_LEGS},
                                "wait_s": apps.WAIT_S, "cpu_loop": apps.CPU_LOOP}
        self.info["apps"] = plan
        own = os.sched_getaffinity(0)
        try:
            for app in APP_THREADS:
                server_cpus: list[int] | None = None
                client_cpus: list[int] | None = None
                threads = 1
                if cpus >= 2 + shapes.WRK_CPUS:
                    server_cpus = list(range(min(shapes.MAX_WORKERS, cpus - shapes.WRK_CPUS)))
                    client_cpus = list(range(len(server_cpus), cpus))
                    threads = min(len(client_cpus), shapes.WRK_CPUS * 2)
                    layout = "apart"
                elif app.id == "cpu" and cpus >= 2:
                    server_cpus = list(range(cpus))
                    client_cpus = [cpus - 1]
                    layout = "shared"
                else:
                    layout = "one CPU"
                plan.setdefault("layout", {})[app.id] = {
                    "kind": layout, "wrk_threads": threads,
                    "server_cpus": server_cpus or [bench.server_cpu],
                    "client_cpus": client_cpus or [bench.client_cpu]}
                os.sched_setaffinity(0, set(client_cpus) if client_cpus else own)
                group = [s for s in (self.server("apps", app, leg) for leg in APP_LEGS)
                         if s is not None]
                conns = WAIT_CONNECTIONS if app.id == "wait" else bench.args.connections
                plan.setdefault("connections", {})[app.id] = conns
                plan.setdefault("contenders", []).extend(s.contender.name for s in group)
                if not group:
                    continue
                log.info("== threads phase, %s: %s", app.label,
                         ", ".join(s.contender.name for s in group))
                shapes.interleaved(bench, "apps", [s.contender for s in group], [],
                                   connections=conns, server_cpus=server_cpus,
                                   client_cpu=(None if client_cpus is None
                                               else ",".join(map(str, client_cpus))),
                                   threads=threads)
                self.annotate(group)
        finally:
            os.sched_setaffinity(0, own)

    def scale(self) -> None:
        cpus = os.cpu_count() or 1
        info = self.info.setdefault("scale", {"cpus": cpus, "n": {}})
        for n in SCALE:
            _, why = shapes.workers_plan(n, cpus)
            if why is not None:
                info["n"][str(n)] = {"skipped": why}
                log.warning("== threads phase, %d loops vs %d workers skipped: %s", n, n, why)
                continue
            server_cpus = list(range(n))
            client_cpus = list(range(n, cpus))
            threads = min(len(client_cpus), shapes.WRK_CPUS * 2)
            conns = max(self.bench.args.connections, shapes.CONNECTIONS_PER_WORKER * n)
            info["n"][str(n)] = {"server_cpus": server_cpus, "client_cpus": client_cpus,
                                 "wrk_threads": threads, "connections": conns}
            legs = [(Leg(f"loops{n}", f"3.13t, GIL off, --loop-threads {n}", "ft", "0"),
                     ("--loop-threads", str(n))),
                    (Leg(f"workers{n}", f"3.13t, GIL off, --workers {n}", "ft", "0"),
                     ("--workers", str(n))),
                    (Leg(f"granian{n}", f"granian on 3.13t, GIL off, {n} workers", "ft", "0",
                         server="granian"), ())]
            own = os.sched_getaffinity(0)
            os.sched_setaffinity(0, set(client_cpus))  # the runner off the servers' CPUs
            try:
                for app in HELLO:
                    group = [s for s in (self.server("scale", app, leg, n=n, options=opts)
                                         for leg, opts in legs
                                         if not (leg.server == "granian"
                                                 and app.interface == "raw"))
                             if s is not None]
                    if not group:
                        continue
                    log.info("== threads phase, %s, %d loops vs %d workers: %s", app.label,
                             n, n, ", ".join(s.contender.name for s in group))
                    shapes.interleaved(self.bench, f"scale{n}", [s.contender for s in group],
                                       [], connections=conns, server_cpus=server_cpus,
                                       client_cpu=",".join(map(str, client_cpus)),
                                       threads=threads, extra={"n": n})
                    self.annotate(group)
            finally:
                os.sched_setaffinity(0, own)

    def rss(self) -> None:
        bench = self.bench
        info = self.info.setdefault("rss", {
            "goal": RSS_GOAL, "warmup_s": max(float(bench.args.warmup), RSS_WARMUP_S),
            "connections": bench.args.connections,
            "counted": "--workers N: the N worker processes' RSS summed (the supervisor's "
                       "apart); --loop-threads N and the plain server: the one process"})
        plan: list[Server] = []
        for app in RSS_APPS:
            for cid, text, opts in RSS_CONFIGS:
                s = self.server("rss", app, Leg(cid, f"3.13t, GIL off, {text}", "ft", "0"),
                                options=opts)
                if s is not None:
                    plan.append(s)
        info["contenders"] = [s.contender.name for s in plan]
        if not plan:
            return
        log.info("== threads phase, RSS: %s", ", ".join(s.contender.name for s in plan))
        script = bench.script("hello", [])
        for rnd in range(1, bench.args.rounds + 1):
            for s in plan:
                if bench.ok(s.contender.name):
                    self.rss_run(s, rnd, script, info["warmup_s"])

    def rss_run(self, s: Server, rnd: int, script: Path, warmup_s: float) -> None:
        bench, name = self.bench, s.contender.name
        r = bench.start_checked(s.contender, [])
        if r is None:
            return
        run: dict[str, Any] = {"contender": name, "phase": "rss", "round": rnd, "part": "rss",
                               "app": s.app.id, "leg": s.leg.id, "interpreter": s.interpreter,
                               "valid": True, "invalid_reason": None}
        try:
            res = bench.wrk(r, script, bench.args.connections, warmup_s, f"rss-warmup.{rnd}")
            run.update(warmup_requests=res.requests, non2xx=res.non2xx,
                       socket_errors=res.errors)
            procstat.settle(r.port)
            pids = procstat.session_pids(r.pid)
            workers = [p for p in pids if p != r.pid]
            if s.leg.id.startswith("workers"):
                counted = workers
                run["rss_supervisor"] = procstat.sample_of([r.pid]).rss
            else:
                counted = [r.pid]
            sample = procstat.sample_of(counted)
            run.update(rss=sample.rss, pss=sample.pss, processes=len(pids),
                       counted_processes=len(counted),
                       rss_each=[procstat.rss_of(p) for p in counted],
                       threads=[procstat.status_field(p, "Threads") for p in counted])
            reasons = []
            if res.requests == 0 or res.non2xx:
                reasons.append(f"warm-up: {res.requests} requests, {res.non2xx} not 2xx")
            if s.leg.id.startswith("workers"):
                expected = int(s.leg.id.removeprefix("workers"))
                if len(workers) != expected:
                    reasons.append(f"{len(workers)} worker processes, not {expected}")
            if not r.alive():
                reasons.append(f"server exited with {r.proc.returncode}")
            if reasons:
                run.update(valid=False, invalid_reason="; ".join(reasons))
        except wrkmod.WrkError as exc:
            bench.exclude(name, "wrk failed", f"RSS warm-up: {exc}")
            bench.stop(r)
            return
        bench.runs.append(run)
        bench.status[name]["state"] = "measured"
        log.info("%-28s rss r%d %7.1f MiB RSS, %7.1f MiB PSS (%d processes counted)%s", name,
                 rnd, run["rss"] / 2**20, run["pss"] / 2**20, run["counted_processes"],
                 "" if run["valid"] else f"  INVALID: {run['invalid_reason']}")
        bench.stop(r)

    def run(self) -> None:
        bench = self.bench
        self.settings = {"duration_s": bench.args.duration, "warmup_s": bench.args.warmup,
                         "rounds": bench.args.rounds, "connections": bench.args.connections,
                         "server_cpu": bench.server_cpu, "client_cpu": bench.client_cpu,
                         "ft_python": self.ft_python, "rss_goal": RSS_GOAL,
                         "wrk": f"wrk -t1 -c{bench.args.connections} "
                                f"-d{bench.args.duration:g}s --latency"}
        why = self.check_ft()
        if why is not None:
            self.skip_phase(why)
            return
        if not self.prepare_envs():
            return
        log.info("== threads phase on %s (%s)", self.ft_python,
                 self.info["ft_interpreter"]["version"].split()[0])
        self.price()
        self.app_threads()
        self.scale()
        self.rss()


if __name__ == "__main__":  # pragma: no cover - a module of run.py
    sys.exit("run it through tests/benchmarks/run.py --phases threads")
