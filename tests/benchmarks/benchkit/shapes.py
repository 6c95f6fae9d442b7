"""The traffic shapes of issue 22, each a phase of its own after the hello phase:

close       every hello server with a new connection per request (wrk -H "Connection: close");
            each must close the connection after its answer (checked), so wrk reconnects
clients256  the Flask and FastAPI servers (ours and the peers') at 256 keep-alive connections,
            one worker each
workers     the servers that take {workers} (contenders.py) with N worker processes, pinned to
            N CPUs and wrk (WRK_CPUS threads) to the others: only where the machine has
            N + WRK_CPUS CPUs; otherwise skipped, and results.json says why
pythons     the app servers on each CPython the machine has (pythons.py)

Rounds are interleaved as in the hello phase (every server of the phase runs, then the next
round), each after a warm-up of the same shape. A phase's contenders are those selected for the
run (--only, --skip) that declare it; --quick takes QUICK's short list instead.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
from pathlib import Path
from typing import Any

from . import contenders as ck
from . import httpcheck, procstat
from . import wrk as wrkmod

log = logging.getLogger("bench")

PHASES = ("close", "clients256", "workers", "pythons")
CLOSE_HEADERS = ["Connection: close"]
MANY_CLIENTS = 256
WRK_CPUS = 2  # the workers phase: wrk's threads, each on a CPU of its own
MAX_WORKERS = 8
CONNECTIONS_PER_WORKER = 32
# --quick: the short form of each phase (a server and its reference, per app).
QUICK = {
    "close": ("cymongoose-raw", "mongoose-c", "nginx", "cymongoose-wsgi", "granian-wsgi",
              "cymongoose-asgi", "granian-asgi"),
    "clients256": ("cymongoose-flask", "granian-flask", "cymongoose-fastapi", "granian-fastapi"),
    "workers": ("nginx", "cymongoose-wsgi", "granian-wsgi", "cymongoose-asgi", "granian-asgi"),
    "pythons": ("cymongoose-wsgi", "granian-wsgi", "cymongoose-asgi", "granian-asgi"),
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=int, default=0,
                   help="worker processes of each server in the workers phase (default "
                   f"{MAX_WORKERS}, or the CPUs minus wrk's {WRK_CPUS}); the phase runs only "
                   f"where the machine has N + {WRK_CPUS} CPUs")
    p.add_argument("--pythons", default="",
                   help="CPython versions of the pythons phase, e.g. 3.10,3.12,3.13,3.13t "
                   "(default: every pyenv or system CPython 3.10+ found; quick: the "
                   "project's own)")


_VERSIONS: dict[str, str] = {}


def python_version(python: str) -> str:
    """The interpreter's version ("3.11.7"), asked once per path."""
    if python not in _VERSIONS:
        try:
            _VERSIONS[python] = subprocess.run(
                [python, "-c", "import platform; print(platform.python_version())"],
                capture_output=True, text=True, timeout=30).stdout.strip() or "?"
        except (OSError, subprocess.TimeoutExpired):
            _VERSIONS[python] = "?"
    return _VERSIONS[python]


def note_pythons(bench: Any, contenders: list[ck.Contender]) -> None:
    """Each Python server's interpreter version in its status (the tables say it)."""
    for c in contenders:
        if c.python:
            bench.status[c.name]["python_version"] = python_version(c.python)


# The contenders group() prepared itself (--quick's lists), for the later phases.
_PREPARED: dict[str, ck.Contender] = {}


def group(bench: Any, phase: str, ready: list[ck.Contender]) -> list[ck.Contender]:
    """The contenders of `phase`, prepared: those the run selected that declare it, or with
    --quick (and no --only) the phase's QUICK list (preparing the ones the run had not)."""
    args = bench.args
    skip = {n for n in args.skip.split(",") if n}
    if not (args.quick and not args.only):
        return [c for c in ready if phase in c.phases and c.name not in skip]
    want = [n for n in QUICK[phase] if n not in skip]
    have = {c.name: c for c in ready} | _PREPARED
    missing = [c for c in ck.discover() if c.name in want and c.name not in have
               and c.name not in bench.status]
    if missing:
        bench.prepare(missing)
        note_pythons(bench, [c for c in missing if bench.ok(c.name)])
        _PREPARED.update({c.name: c for c in missing if bench.ok(c.name)})
        have.update(_PREPARED)
    return [have[n] for n in want if n in have and phase in have[n].phases]


def interleaved(bench: Any, phase: str, group: list[ck.Contender], files: list[Path], *,
                connections: int, headers: list[str] | None = None,
                values: dict[str, str] | None = None, server_cpus: list[int] | None = None,
                client_cpu: str | None = None, threads: int = 1,
                extra: dict[str, Any] | None = None) -> None:
    """Start every contender of the group, check each, warm each up with the phase's shape,
    then args.rounds interleaved rounds of one wrk run each; check the answers again and stop
    them. `values`, `server_cpus`: the workers phase's substitutions and CPUs."""
    cpu = ",".join(map(str, server_cpus)) if server_cpus else None
    running = []
    for c in group:
        r = bench.start_checked(c, files, cpu=cpu, values=values)
        if r is None:
            continue
        if headers == CLOSE_HEADERS:
            try:
                bench.status[c.name]["close_check"] = httpcheck.check_close(r.port)
            except (httpcheck.CheckFailed, OSError) as exc:
                bench.exclude(c.name, "wrong answer", f"to Connection: close: {exc}")
                bench.stop(r)
                continue
        running.append(r)
    script = bench.script("hello", files)
    wrk_kw: dict[str, Any] = {"headers": headers, "threads": threads, "client_cpu": client_cpu}
    for r in running:
        procstat.settle(r.port)
        if bench.args.warmup > 0:
            try:
                bench.wrk(r, script, connections, bench.args.warmup, f"{phase}-warmup", **wrk_kw)
            except wrkmod.WrkError as exc:
                bench.exclude(r.contender.name, "wrk failed", f"{phase} warm-up: {exc}")
    for rnd in range(1, bench.args.rounds + 1):
        for r in running:
            if bench.ok(r.contender.name):
                procstat.settle(r.port)  # the previous run's connections gone
                bench.measure(r, phase, rnd, connections, script, server_cpus=server_cpus,
                              extra=extra, **wrk_kw)
    for r in running:
        name = r.contender.name
        if bench.ok(name):
            try:
                httpcheck.check_hello(r.port, r.contender.keepalive)
            except (httpcheck.CheckFailed, OSError) as exc:
                bench.exclude(name, "wrong answer", f"after the {phase} load: {exc}")
                bench.invalidate(name, f"wrong answer after the {phase} load")
        bench.stop(r)


def workers_plan(requested: int, cpus: int) -> tuple[int, str | None]:
    """(N, None) when the machine can run N workers beside wrk, else (N, why not)."""
    n = requested or min(MAX_WORKERS, cpus - WRK_CPUS)
    if n < 1:
        return n, (f"this machine has {cpus} CPUs, none left for a server's workers beside "
                   f"wrk's {WRK_CPUS} (N workers need N + {WRK_CPUS})")
    if cpus < n + WRK_CPUS:
        return n, (f"{n} workers need {n + WRK_CPUS} CPUs ({n} for the server, {WRK_CPUS} "
                   f"for wrk), this machine has {cpus}")
    return n, None


def workers_phase(bench: Any, group: list[ck.Contender], files: list[Path],
                  info: dict[str, Any]) -> None:
    cpus = os.cpu_count() or 1
    n, why = workers_plan(bench.args.workers, cpus)
    info.update(workers=n, cpus=cpus, contenders=[c.name for c in group])
    if why is not None:
        info["skipped"] = why
        log.warning("== workers phase skipped: %s", why)
        return
    if not group:
        return
    server_cpus = list(range(n))
    client_cpus = list(range(n, cpus))
    threads = min(len(client_cpus), WRK_CPUS * 2)
    conns = max(bench.args.connections, CONNECTIONS_PER_WORKER * n)
    info.update(server_cpus=server_cpus, client_cpus=client_cpus, wrk_threads=threads,
                connections=conns)
    log.info("== workers phase: %s with %d workers on CPUs %s, wrk -t%d -c%d on %s",
             ", ".join(c.name for c in group), n, server_cpus, threads, conns, client_cpus)
    own = os.sched_getaffinity(0)
    os.sched_setaffinity(0, set(client_cpus))  # the runner off the servers' CPUs too
    try:
        interleaved(bench, "workers", group, files, connections=conns,
                    values={"workers": str(n)}, server_cpus=server_cpus,
                    client_cpu=",".join(map(str, client_cpus)), threads=threads,
                    extra={"workers": n})
    finally:
        os.sched_setaffinity(0, own)


def run(bench: Any, phases: set[str], ready: list[ck.Contender], files: list[Path],
        info: dict[str, Any]) -> None:
    """The selected shapes, in PHASES order; `info` (results.json's meta["shapes"]) gets what
    each did or why it did not run."""
    from . import pythons  # the per-Python phase has its own module

    if "close" in phases:
        g = group(bench, "close", ready)
        info["close"] = {"connections": bench.args.connections, "headers": CLOSE_HEADERS,
                         "contenders": [c.name for c in g]}
        if g:
            log.info("== close phase (a connection per request): %s",
                     ", ".join(c.name for c in g))
            interleaved(bench, "close", g, files, connections=bench.args.connections,
                        headers=CLOSE_HEADERS)
    if "clients256" in phases:
        g = group(bench, "clients256", ready)
        info["clients256"] = {"connections": MANY_CLIENTS, "contenders": [c.name for c in g]}
        if g:
            log.info("== clients256 phase: %s", ", ".join(c.name for c in g))
            interleaved(bench, "clients256", g, files, connections=MANY_CLIENTS)
    if "workers" in phases:
        workers_phase(bench, group(bench, "workers", ready), files,
                      info.setdefault("workers", {}))
    if "pythons" in phases:
        pythons.run(bench, group(bench, "pythons", ready), files,
                    info.setdefault("pythons", {}))
