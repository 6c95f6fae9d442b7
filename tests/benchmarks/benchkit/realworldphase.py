"""The realworld phase (issue 35): TechEmpower's test types against a real PostgreSQL, each app
of tests/realworld/apps on ours and on the peers (benchkit/realworldservers.py).

1. A cluster of the phase's own (tests/realworld/postgres_cluster.py: a fresh directory under
   /tmp, a free port, fsync off as TechEmpower runs it) is started, pinned to the client CPU
   with wrk, and seeded (world: 10,000 rows; fortune: 12); the servers find it in
   REALWORLD_DSN (and their pool size in REALWORLD_POOL). It is stopped at the end, whatever
   happens (a `with` block).
2. App by app (Flask, FastAPI, Django WSGI, Django ASGI), its contenders start together,
   one worker process each, pinned to the server CPU. Each one's answers are checked with
   tests/realworld/techempower_verify.py (TechEmpower's verify rules on every endpoint); one
   that fails is reported with the problems and not timed. Then per round (--realworld-rounds:
   3; quick 1), per test type, each contender in turn (each round starting with the next):
   a warm-up at the same load in round 1, then `wrk -t1 -c64` (--realworld-connections) for
   --duration seconds. The app's servers are stopped before the next app's start, so their
   database pools never add up past the cluster's connections.
3. Per run, besides what every run records (req/s, p99, non-2xx, socket errors, server CPU
   of the whole process tree): the database's CPU (the postmaster's session) as a fraction
   of a CPU, and for the WSGI apps what /_stats saw (most app calls in flight at once,
   distinct threads), reset before the run and read after it.

Bad input: a database that goes away answers with 500s; the run records them as non-2xx (and
is not counted), and before the next run the cluster is restarted on the same data (an
event in the report). --realworld-outage TEST stops it halfway through that test's first
run on purpose, to check exactly that. Every wait is bounded: wrk by its watchdog, the
checks and /_stats by socket timeouts, the verifier by VERIFY_TIMEOUT_S, the cluster by
pg_ctl's own.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import contenders as ck
from . import procstat
from . import realworldservers as rs
from . import wrk as wrkmod
from .realworlddb import Database

if str(ck.ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ck.ROOT / "tests"))

log = logging.getLogger("bench")

PHASE = "realworld"
QUERIES = 20
PIPELINE = 16
VERIFY_TIMEOUT_S = 120.0
STATS_TIMEOUT_S = 5.0
# How long a run waits for the server CPU to be quiet (procstat.wait_cpu_quiet): 64 clients
# leave a server little to finish, so a CPU busy past this is busy with someone else's work,
# which waiting longer would not change.
QUIET_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class TestType:
    id: str
    path: str
    pipeline: int = 0


TEST_TYPES = [
    TestType("json", "/json"),
    TestType("plaintext", "/plaintext"),
    TestType("pipelined", "/plaintext", PIPELINE),
    TestType("db", "/db"),
    TestType("queries", f"/queries?queries={QUERIES}"),
    TestType("fortunes", "/fortunes"),
    TestType("updates", f"/updates?queries={QUERIES}"),
    TestType("slowdb", "/slowdb"),
]
TEST_IDS = [t.id for t in TEST_TYPES]
# The short form (make bench-quick): the hello-like baseline and the database tests where
# the servers differ most (realworldservers.QUICK names its contenders).
QUICK_TESTS = ("json", "db", "queries", "fortunes", "updates", "slowdb")


def select(all_contenders: list[ck.Contender], only: set[str], skip: set[str], *,
           quick: bool, apps: list[str]) -> list[ck.Contender]:
    """The phase's contenders: --only names them (else the quick ones in the short form),
    --skip leaves some out, --realworld-apps keeps those apps'."""
    return [c for c in all_contenders
            if (c.name in only if only else (c.quick or not quick)) and c.name not in skip
            and rs.app_of(c.name).id in apps]


def verify(port: int) -> list[str]:
    """techempower_verify's problems with the server on `port`, bounded in time (it runs in
    a thread that is left behind if it does not finish)."""
    from realworld.techempower_verify import verify as te_verify

    out: list[list[str]] = []
    failed: list[BaseException] = []

    def check() -> None:
        try:
            out.append(list(te_verify(f"http://127.0.0.1:{port}")))
        except Exception as exc:  # noqa: BLE001 - a verifier crash is a failed check
            failed.append(exc)

    worker = threading.Thread(target=check, name="realworld-verify", daemon=True)
    worker.start()
    worker.join(VERIFY_TIMEOUT_S)
    if out:
        return out[0]
    if failed:
        return [f"the verifier raised {type(failed[0]).__name__}: {failed[0]}"]
    return [f"verification did not finish within {VERIFY_TIMEOUT_S:g} s"]


def app_stats(port: int, reset: bool = False) -> dict[str, Any] | None:
    """The WSGI app's /_stats (None if it has none or does not answer)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=STATS_TIMEOUT_S)
    try:
        conn.request("GET", "/_stats?reset=1" if reset else "/_stats")
        resp = conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            return None
        data = json.loads(body)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError, http.client.HTTPException):
        return None
    finally:
        conn.close()


class RealworldPhase:
    """`bench` is a Bench of run.py's of its own (its status and runs are this phase's
    document; its wrk, measure, CPUs and run directory are used as every phase uses them)."""

    def __init__(self, bench: Any, group: list[ck.Contender], *, tests: list[str],
                 rounds: int, connections: int, pool: int, outage: str | None = None) -> None:
        self.bench = bench
        self.group = group
        self.tests = [t for t in TEST_TYPES if t.id in tests]
        self.rounds, self.connections, self.pool = rounds, connections, pool
        self.outage = outage
        self.db: Database | None = None
        self.settings: dict[str, Any] = {}
        self.scripts: dict[str, Path] = {}

    # -- set-up ------------------------------------------------------------------------------

    def prepare(self, skip: str | None) -> list[ck.Contender]:
        """The contenders ready to start (venvs made); none, each excluded with `skip`, when
        that says why the phase cannot run."""
        project_python = ck.ROOT / ".venv" / "bin" / "python"
        python = str(project_python) if project_python.exists() else sys.executable
        base_python = getattr(sys, "_base_executable", sys.executable)
        if skip is None:
            rs.set_peer_requires(self.group, python)
        ready = []
        for c in self.group:
            app = rs.app_of(c.name)
            self.bench.status[c.name] = {"label": c.label, "kind": c.kind, "env": c.env,
                                         "notes": c.notes, "app": app.id,
                                         "app_ref": app.ref, "ours": rs.is_ours(c.name)}
            if skip is not None:
                self.bench.exclude(c.name, "skipped", skip)
                continue
            log.info("preparing %s", c.name)
            try:
                ck.prepare(c, python, base_python)
            except ck.Skip as exc:
                self.bench.exclude(c.name, "skipped", str(exc))
                continue
            self.bench.status[c.name].update(state="ready", versions=c.versions)
            ready.append(c)
        return ready

    def script(self, test: TestType) -> Path:
        key = f"realworld-pipeline{test.pipeline}" if test.pipeline else "realworld"
        if key not in self.scripts:
            self.bench.scripts_dir.mkdir(parents=True, exist_ok=True)
            self.scripts[key] = wrkmod.write_script(self.bench.scripts_dir / f"{key}.lua",
                                                    pipeline=test.pipeline)
        return self.scripts[key]

    def start(self, c: ck.Contender) -> ck.Running | None:
        bench = self.bench
        r: ck.Running | None = bench.launch(c)
        if r is None:
            return None
        problems = verify(r.port)
        if problems:
            bench.exclude(c.name, "failed verification",
                          "; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)"
                                                     if len(problems) > 5 else ""))
            bench.stop(r)
            return None
        bench.status[c.name]["check"] = "techempower_verify: every endpoint passed"
        log.info("%s: verified, port %d, pid %d", c.name, r.port, r.pid)
        return r

    # -- measuring -------------------------------------------------------------------------------

    def measure(self, r: ck.Running, test: TestType, rnd: int) -> None:
        bench, db = self.bench, self.db
        assert db is not None
        name = r.contender.name
        if not db.ensure_up():
            bench.exclude(name, "database down", f"PostgreSQL could not be restarted before "
                          f"{test.id} round {rnd}")
            return
        procstat.settle(r.port, timeout=15)
        script = self.script(test)
        if rnd == 1 and bench.args.warmup > 0:
            try:
                bench.wrk(r, script, self.connections, bench.args.warmup,
                          f"warmup-rw-{test.id}", path=test.path)
            except wrkmod.WrkError as exc:
                bench.exclude(name, "wrk failed", f"warm-up of {test.id}: {exc}")
                return
            procstat.settle(r.port, timeout=15)
        procstat.wait_cpu_quiet(bench.server_cpu, timeout=QUIET_TIMEOUT_S)
        wsgi = rs.app_of(name).interface == "wsgi"
        has_stats = wsgi and app_stats(r.port, reset=True) is not None
        outage = None
        if self.outage == test.id:
            self.outage = None  # once: the first run of that test
            outage = threading.Timer(bench.args.duration / 2, db.stop,
                                     args=(f"--realworld-outage {test.id}, during {name}",))
            outage.start()
        db_before = db.sample()
        try:
            run = bench.measure(r, test.id, rnd, self.connections, script, path=test.path,
                                extra={"app": rs.app_of(name).id, "test": test.id,
                                       "path": test.path, "pipeline": test.pipeline})
        finally:
            if outage is not None:
                outage.cancel()
                outage.join()
        if run is None:
            return
        db_cpu = procstat.cpu_between(db_before, db.sample())
        run["db_cpu_s"] = round(db_cpu, 3)
        run["db_cpu_util"] = round(db_cpu / run["duration_s"], 3) if run["duration_s"] else None
        run["db_outage"] = outage is not None
        if test.pipeline:
            # wrk times a pipelined batch as a whole, and its percentiles come out as 0.
            run.update(p50_us=None, p90_us=None, p99_us=None)
        if has_stats:
            procstat.settle(r.port, timeout=15)
            stats = app_stats(r.port)
            if stats is not None:
                run["max_in_flight"] = stats.get("max_in_flight")
                run["threads_seen"] = stats.get("threads")
                run["app_calls"] = stats.get("calls")
        log.info("%-30s %-9s r%d server CPU %.2f, database CPU %s%s", name, test.id, rnd,
                 run["server_cpu_util"] or 0, run["db_cpu_util"],
                 f", apps in flight at most {run.get('max_in_flight')} on "
                 f"{run.get('threads_seen')} threads" if "max_in_flight" in run else "")

    def run_app(self, app: rs.App, group: list[ck.Contender]) -> None:
        bench = self.bench
        log.info("== realworld phase, %s: %s; %s", app.label,
                 ", ".join(c.name for c in group), ", ".join(t.id for t in self.tests))
        running: list[ck.Running] = []
        try:
            running = [r for r in (self.start(c) for c in group) if r is not None]
            for rnd in range(1, self.rounds + 1):
                # Each round starts with another contender, so none always follows the same one.
                k = (rnd - 1) % len(running) if running else 0
                for test in self.tests:
                    for r in running[k:] + running[:k]:
                        if bench.ok(r.contender.name):
                            self.measure(r, test, rnd)
            for r in running:
                name = r.contender.name
                if bench.ok(name) and self.db is not None and self.db.ensure_up():
                    problems = verify(r.port)
                    if problems:
                        bench.exclude(name, "failed verification", f"after the load: "
                                      f"{'; '.join(problems[:3])}")
                        bench.invalidate(name, "failed verification after the load")
        finally:
            for r in running:
                bench.stop(r)

    def run(self) -> None:
        if not self.group or not self.tests:
            return
        # A directory the cluster makes (and removes): under /tmp, which the postgres user
        # can reach, never a folder of root's.
        directory = Path(tempfile.gettempdir()) / f"cymongoose-bench-pg-{os.getpid()}"
        port = ck.free_port()
        cluster: Any = None
        try:
            from realworld.postgres_cluster import PostgresCluster

            cluster = PostgresCluster(directory, port)  # finds the server's binaries
            skip = None
        except Exception as exc:  # noqa: BLE001 - ImportError, PostgresNotInstalled: reported
            skip = f"no PostgreSQL cluster: {type(exc).__name__}: {exc}"
        ready = self.prepare(skip)
        if not ready or cluster is None:
            return
        self.settings = {
            "tests": [t.id for t in self.tests], "rounds": self.rounds,
            "connections": self.connections, "duration_s": self.bench.args.duration,
            "warmup_s": self.bench.args.warmup, "queries": QUERIES, "pipeline": PIPELINE,
            "pool": self.pool, "server_cpu": self.bench.server_cpu,
            "database_cpu": self.bench.client_cpu, "client_cpu": self.bench.client_cpu,
            "wrk": f"wrk -t1 -c{self.connections} -d{self.bench.args.duration:g}s --latency",
            "outage": self.outage,
        }
        saved = {k: os.environ.get(k) for k in ("REALWORLD_DSN", "REALWORLD_POOL")}
        try:
            with cluster:
                cluster.start()
                self.db = Database(cluster, self.bench.client_cpu)
                cluster.seed()
                self.settings["database"] = {"version": server_version(cluster),
                                             "port": port}
                log.info("realworld: %s on port %d (pid %d, CPUs %s), seeded",
                         self.settings["database"]["version"], port, self.db.pid,
                         sorted(os.sched_getaffinity(self.db.pid)))
                os.environ.update(REALWORLD_DSN=self.db.dsn, REALWORLD_POOL=str(self.pool))
                for app in rs.APPS:
                    group = [c for c in ready if rs.app_of(c.name) == app]
                    if group:
                        self.run_app(app, group)
        except Exception as exc:  # noqa: BLE001 - the cluster's failures end the phase only
            log.error("realworld phase: %s: %s", type(exc).__name__, exc)
            for c in ready:
                if self.bench.status[c.name].get("state") == "ready":
                    self.bench.exclude(c.name, "not measured",
                                       f"the database: {type(exc).__name__}: {exc}")
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            if self.db is not None:
                self.settings["database_events"] = self.db.events


def server_version(cluster: Any) -> str:
    """`postgres --version` of the cluster's binaries ("postgres (PostgreSQL) 15.14")."""
    try:
        done = subprocess.run([str(Path(cluster.bin) / "postgres"), "--version"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, AttributeError, subprocess.SubprocessError):
        return "PostgreSQL"
    return done.stdout.strip().replace("postgres (PostgreSQL)", "PostgreSQL") or "PostgreSQL"
