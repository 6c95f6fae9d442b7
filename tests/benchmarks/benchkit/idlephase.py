"""The idle phase (issue 22): a fresh client's time to first byte, with no other client and
then with N connections held open that never send a byte (--idle-count: 15,000; quick 5,000).

The contenders are named in CONTENDERS (ours: raw handler taking every event and with
@handles(MG_EV_HTTP_MSG), WSGI, ASGI; Mongoose in C;
nginx tuned, the reference, whose 20,000 worker_connections hold them), in the short form
too: the comparison needs every one of them. They are started together, one worker each,
pinned to the server CPU, and their answers checked before and after. Each round measures
each contender in turn (A B C ... A B C, each round starting with the next one):

1. quiet: the server CPU quiet, the server's CPU time over a window (2 s; quick 1 s) with
   nothing connected, then --idle-probes probes: a new connection each, connect + GET +
   first byte timed (tests/reliability/flood.py's Probe), one every PROBE_EVERY_S;
2. held: N idle connections opened from client processes (flood.py's IdleClients: as many as
   the descriptor limit asks for, forked from the runner so on the client CPU; connecting
   from IDLE_SOURCE), held until the server's own descriptors show it holds every one of
   them; its CPU time over the same window, no request anywhere, then the same probes again.
   The held connections are counted again after the probes: a server that closed some (an
   idle timeout: ours closes a connection without a request after 30 s, nginx after 60 s;
   the held period lasts about 10 s) makes the run invalid.

Server CPU time is read from /proc/<pid>/task/*/schedstat (nanoseconds) over the server's
whole process tree. The runner's soft open-file limit is raised to fit N (the servers inherit
it; ours raises its own to the hard limit as well); a count the hard limit cannot hold is
lowered, with a warning. Runs go to results/idle.json and idle.md (benchkit/idlereport.py).
"""

from __future__ import annotations

import logging
import resource
import statistics
import sys
import time
from typing import Any

from . import contenders as ck
from . import httpcheck, procstat

if str(ck.ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ck.ROOT / "tests"))
from reliability.flood import IdleClients, Probe, raise_soft_limit  # noqa: E402

log = logging.getLogger("bench")

PHASE = "idle"
REF = "nginx-tuned"
# By name, not by a phase declared in servers/: declaring one would replace the defaults
# (contenders.default_phases) of the servers that declare none.
CONTENDERS = ("cymongoose-raw", "cymongoose-handles", "cymongoose-wsgi", "cymongoose-asgi",
              "mongoose-c", REF)
PROBE_EVERY_S = 0.005
HELD_TIMEOUT_S = 60.0  # for the server to accept every idle connection
SETTLE_S = 0.5  # after the last one is accepted, before the CPU window
# The idle clients' address; the probes connect from 127.0.0.1. From the same address,
# 15,000 connections to the port make each probe's connect() search the ephemeral ports for a
# free one: about 1 ms of the client's kernel time measured as the server's (a fresh client
# from elsewhere does not pay it).
IDLE_SOURCE = "127.0.0.2"
# Descriptors a server needs besides the idle connections (listener, epoll, logs, probes).
FD_MARGIN = 512


def select(contenders: list[ck.Contender], only: set[str], skip: set[str]) -> list[ck.Contender]:
    """The phase's contenders, in the runner's order, --only and --skip applied (not --quick:
    the short form measures the same servers, with fewer connections)."""
    return [c for c in contenders if c.name in CONTENDERS
            and (c.name in only if only else True) and c.name not in skip]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


class IdlePhase:
    """`bench` is run.py's Bench (its CPUs, run directory and list of live processes); the
    phase keeps its own status and runs, for a document of its own."""

    def __init__(self, bench: Any, group: list[ck.Contender], *, count: int, probes: int,
                 rounds: int, window_s: float) -> None:
        self.bench = bench
        self.group = group
        self.count, self.probes, self.rounds, self.window_s = count, probes, rounds, window_s
        self.status: dict[str, dict[str, Any]] = {}
        self.runs: list[dict[str, Any]] = []
        self.settings: dict[str, Any] = {}

    # -- bookkeeping -------------------------------------------------------------------------

    def exclude(self, name: str, state: str, reason: str) -> None:
        self.status.setdefault(name, {}).update(state=state, reason=reason)
        log.warning("%s: %s: %s", name, state, reason)

    def ok(self, name: str) -> bool:
        return self.status.get(name, {}).get("state") in ("ready", "measured")

    def prepare(self) -> list[ck.Contender]:
        project_python = ck.ROOT / ".venv" / "bin" / "python"
        python = str(project_python) if project_python.exists() else sys.executable
        base_python = getattr(sys, "_base_executable", sys.executable)
        ready = []
        for c in self.group:
            self.status[c.name] = {"label": c.label, "kind": c.kind, "env": c.env,
                                   "notes": c.notes,
                                   "file": str(c.file.relative_to(ck.BENCH_DIR))}
            try:
                ck.prepare(c, python, base_python)
            except ck.Skip as exc:
                self.exclude(c.name, "skipped", str(exc))
                continue
            self.status[c.name].update(state="ready", versions=c.versions)
            ready.append(c)
        return ready

    def fit_count(self) -> int:
        """The runner's soft open-file limit raised for the servers it starts; the count
        lowered to what the hard limit holds."""
        raise_soft_limit(self.count + FD_MARGIN)
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft != resource.RLIM_INFINITY and soft < self.count + FD_MARGIN:
            log.warning("the open-file limit is %d: the idle phase holds %d connections, not "
                        "%d", soft, soft - FD_MARGIN, self.count)
            return int(soft) - FD_MARGIN
        return self.count

    def start(self, c: ck.Contender) -> ck.Running | None:
        bench = self.bench
        try:
            r = ck.start(c, cpu=bench.server_cpu, static_dir=bench.static_dir,
                         run_dir=bench.run_dir)
        except ck.Skip as exc:
            self.exclude(c.name, "failed to start", str(exc))
            return None
        bench.live.append(r)
        try:
            note, _answer = httpcheck.check_hello(r.port, c.keepalive)
        except (httpcheck.CheckFailed, OSError) as exc:
            self.exclude(c.name, "wrong answer", f"{exc} (not measured)")
            self.stop(r)
            return None
        self.status[c.name]["check"] = note
        log.info("%s: answer checked (%s), port %d, pid %d", c.name, note, r.port, r.pid)
        return r

    def stop(self, r: ck.Running) -> None:
        # Not bench.stop(): that records in the main document's status.
        self.status[r.contender.name]["exit_status"] = r.stop()
        if r in self.bench.live:
            self.bench.live.remove(r)

    # -- measuring -----------------------------------------------------------------------------

    def cpu_window(self, r: ck.Running) -> dict[str, Any]:
        """The server's CPU time over the window, no request made: what its loop costs with
        what it holds."""
        cpu = self.bench.server_cpu
        before, cpu_before, t0 = procstat.cpu_ns(r.pid), procstat.cpu_times(cpu), time.monotonic()
        time.sleep(self.window_s)
        used = (procstat.cpu_ns(r.pid) - before) / 1e9
        elapsed = time.monotonic() - t0
        return {"server_cpu_ms_per_s": round(used / elapsed * 1000, 3),
                "server_cpu_load": procstat.cpu_load_between(
                    cpu_before, procstat.cpu_times(cpu), elapsed, used)}

    def probe(self, r: ck.Running) -> dict[str, Any]:
        """self.probes fresh clients one after the other, PROBE_EVERY_S apart."""
        p = Probe(r.port)
        before, t0 = procstat.cpu_ns(r.pid), time.monotonic()
        for _ in range(self.probes):
            try:
                p.once()
            except OSError as exc:
                p.errors.append(f"{type(exc).__name__}: {exc}")
            time.sleep(PROBE_EVERY_S)
        used = (procstat.cpu_ns(r.pid) - before) / 1e9
        out: dict[str, Any] = dict(p.summary())
        if p.ttfb_ms:
            out["mean_ms"] = round(statistics.fmean(p.ttfb_ms), 3)
            out["p90_ms"] = round(_pct(p.ttfb_ms, 0.9), 3)
        out.update(seconds=round(time.monotonic() - t0, 2),
                   server_cpu_us_per_probe=round(used / self.probes * 1e6, 1),
                   first_errors=sorted(set(p.errors))[:3])
        return out

    def wait_held(self, r: ck.Running, base_fds: int) -> int:
        """How many more descriptors than `base_fds` the server holds once it holds
        self.count more, or the deadline passes."""
        deadline = time.monotonic() + HELD_TIMEOUT_S
        held = procstat.fds_of(r.pid) - base_fds
        while held < self.count and time.monotonic() < deadline and r.alive():
            time.sleep(0.1)
            held = procstat.fds_of(r.pid) - base_fds
        return held

    def measure(self, r: ck.Running, rnd: int) -> None:
        name = r.contender.name
        if not r.alive():
            self.exclude(name, "died", f"exited with {r.proc.returncode}: {r.log_tail()}")
            return
        procstat.settle(r.port, timeout=15)
        procstat.wait_cpu_quiet(self.bench.server_cpu)
        base_fds = procstat.fds_of(r.pid)
        run: dict[str, Any] = {"contender": name, "phase": PHASE, "round": rnd,
                               "idle_count": self.count, "server_fds_before": base_fds,
                               "rss_quiet": procstat.sample(r.pid).rss}
        run["quiet_window"] = self.cpu_window(r)
        run["quiet"] = self.probe(r)
        started = time.monotonic()
        with IdleClients(r.port, self.count, timeout=HELD_TIMEOUT_S + 30,
                         source=IDLE_SOURCE) as clients:
            run["client_held"], run["client_errors"] = clients.held, clients.errors
            run["client_processes"] = len(clients.parts)
            run["held"] = self.wait_held(r, base_fds)
            run["open_s"] = round(time.monotonic() - started, 2)
            time.sleep(SETTLE_S)
            run["rss_held"] = procstat.sample(r.pid).rss
            run["held_window"] = self.cpu_window(r)
            run["idle"] = self.probe(r)
            run["held_end"] = procstat.fds_of(r.pid) - base_fds
            run["held_s"] = round(time.monotonic() - started, 2)
        reasons = []
        if run["client_held"] < self.count:
            reasons.append(f"the clients connected {run['client_held']} of {self.count}"
                           + (f" ({run['client_errors'][0]})" if run["client_errors"] else ""))
        if run["held"] < self.count:
            reasons.append(f"the server accepted {max(run['held'], 0)} of {self.count} within "
                           f"{HELD_TIMEOUT_S:g} s")
        elif run["held_end"] < self.count:
            reasons.append(f"the server closed {self.count - run['held_end']} idle "
                           "connections while they were held")
        for key in ("quiet", "idle"):
            if run[key].get("errors"):
                reasons.append(f"{run[key]['errors']} {key} probes failed")
        if not r.alive():
            reasons.append(f"server exited with {r.proc.returncode}")
        run.update(valid=not reasons, invalid_reason="; ".join(reasons) if reasons else None)
        self.runs.append(run)
        self.status[name]["state"] = "measured"
        q, i = run["quiet"], run["idle"]
        log.info("%-18s idle r%d first byte p50/p99 %s/%s ms quiet, %s/%s ms with %d idle "
                 "(held %d, opened in %.1f s); server CPU %.1f ms/s held%s", name, rnd,
                 q.get("p50_ms"), q.get("p99_ms"), i.get("p50_ms"), i.get("p99_ms"),
                 self.count, run["held_end"], run["open_s"],
                 run["held_window"]["server_cpu_ms_per_s"],
                 "" if run["valid"] else f"  INVALID: {run['invalid_reason']}")
        procstat.settle(r.port, timeout=30)

    def run(self) -> None:
        if not self.group:
            return
        ready = self.prepare()
        self.count = self.fit_count()
        bench = self.bench
        self.settings = {"idle_count": self.count, "probes": self.probes,
                         "probe_every_ms": PROBE_EVERY_S * 1000, "rounds": self.rounds,
                         "cpu_window_s": self.window_s, "server_cpu": bench.server_cpu,
                         "client_cpu": bench.client_cpu, "reference": REF}
        log.info("== idle phase: %s, quiet and with %d idle connections, %d probes each",
                 ", ".join(c.name for c in ready), self.count, self.probes)
        running = [r for r in (self.start(c) for c in ready) if r is not None]
        for rnd in range(1, self.rounds + 1):
            # Each round starts with another contender, so none always follows the same one.
            k = (rnd - 1) % len(running) if running else 0
            for r in running[k:] + running[:k]:
                if self.ok(r.contender.name):
                    self.measure(r, rnd)
        for r in running:
            name = r.contender.name
            if self.ok(name):
                try:
                    httpcheck.check_hello(r.port, r.contender.keepalive)
                except (httpcheck.CheckFailed, OSError) as exc:
                    self.exclude(name, "wrong answer", f"after the load: {exc}")
                    for run in self.runs:
                        if run["contender"] == name and run["valid"]:
                            run.update(valid=False, invalid_reason="wrong answer afterwards")
            self.stop(r)

