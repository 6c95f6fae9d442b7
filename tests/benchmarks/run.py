"""The HTTP benchmark runner: `make bench` (every contender) and `make bench-quick` (a subset).

For each phase (hello at 50 connections, hello at 200, static files) the runner starts every
contender of that kind (server pinned to one CPU, wrk to the other), checks each one's answer
(status, body, Content-Type, keep-alive: a wrong answer is reported and never measured), warms
each up, then runs `wrk -t1 -cN -dDs --latency` in interleaved rounds (A B C ... A B C ...).
Per run it records req/s, bytes/s, p50/p99, socket errors, non-2xx, the server's CPU time per
request (/proc, whole process tree) and its RSS. A separate run counts our server's RSS growth
over a fixed number of requests. Each WSGI/ASGI app is also called in-process (app_cost.py,
in each of its servers' environments; before the servers start and at each hello round) for
its own CPU cost per call, which the report subtracts from each server's CPU per request: the
server's overhead. The connections phase runs the contenders that declare it (ours, Mongoose in C,
nginx with its defaults and nginx tuned) at 1,000 and 10,000 keep-alive connections (wrk -cN)
and reports socket errors and p99 beside req/s. Everything, with every version and build flag,
goes to results/results.json, results.md, results.png/.svg, the README's Performance block
and the top of docs/performance.md.

The traffic shapes of issue 22 (benchkit/shapes.py, pythons.py; results.json as well, a small
table each in the README's block): close, every hello server with a new connection per
request (wrk -H "Connection: close"; CPU per request is the figure there, wrk being the limit
of req/s); clients256, the Flask and FastAPI servers at 256 keep-alive connections; workers,
the servers taking {workers} with --workers N processes pinned to N CPUs and wrk to the
others, only where the machine has N + 2 CPUs (else skipped, saying why); pythons, the app
servers (ours built per version under .envs/, and the peers) on each CPython of --pythons.

The proxy phase (benchkit/proxyphase.py) puts each reverse proxy (ours, nginx tuned and with
its default proxy settings, Caddy) in front of a C backend that counts the connections it
accepts, for a hello and a 100 KiB answer at --proxy-loads and the --scale counts of clients;
it goes to results/proxy.json and proxy.md (its own run, with its own date) and to a table of
the README's block. A run of that phase alone rewrites only those, and re-renders the
README's block with the last results.json.

The idle phase (benchkit/idlephase.py, issue 22) times a fresh client's first byte on each
server declaring it (ours: raw, WSGI, ASGI; Mongoose in C; tuned nginx), quiet and then with
--idle-count connections held open that never send a byte, in interleaved rounds, with the
server's CPU time while they are held; it goes to results/idle.json and idle.md and to a
table of the README's block, like the proxy phase (`--phases idle` runs it alone).

The realworld phase (benchkit/realworldphase.py, issue 35) runs TechEmpower's test types
(json, plaintext, plaintext 16 deep pipelined, db, queries 20, fortunes, updates 20, and
slowdb: one query that also sleeps 1 ms) against a PostgreSQL cluster of its own
(tests/realworld/postgres_cluster.py, pinned to the client CPU with wrk, stopped at the end
whatever happens), on the apps of tests/realworld/apps: Flask + psycopg pool on ours (default
--threads and each of --realworld-threads), granian WSGI (1, 8, 32 blocking threads) and
gunicorn gthread (8, 32 threads); FastAPI + asyncpg pool on ours, uvicorn (httptools,
uvloop) and granian; the Django ORM app on ours, granian and gunicorn (WSGI) and on ours,
uvicorn and granian (ASGI): benchkit/realworldservers.py. One worker process each, 64
keep-alive clients (--realworld-connections), 3 interleaved rounds (--realworld-rounds; 1 in
the quick form, which runs json, db, queries, fortunes, updates and slowdb on Flask: ours,
granian 8, gunicorn 32, and FastAPI: ours, uvicorn, granian). Each server's answers are
verified first (tests/realworld/techempower_verify.py; one that fails is reported, not
timed). Per run: req/s, p99, non-2xx and socket errors, server CPU and database CPU as
fractions of a CPU, and for the WSGI apps the most app calls in flight and the threads seen
(/_stats). A database that goes away mid-run shows as non-2xx, and the cluster is restarted
before the next run (--realworld-outage TEST does that on purpose). It goes to
results/realworld.json and realworld.md (its own run and date), a table of
docs/performance.md's block and rows of the README's summary (`--phases realworld` runs it
alone; `--only rw-flask-cymongoose,rw-flask-granian-b8 --realworld-tests db` narrows it).

The threads phase (benchkit/threadsphase.py, issue 37) runs our CLI on a free-threaded CPython
3.13 with the GIL off: `--loop-threads 1` against one plain process (the price of free
threading) and against one process on a GIL build of 3.13 (the price of the build), with
granian's free-threaded wheel beside them, for the raw, WSGI and ASGI hello on one CPU; N loop
threads against N worker processes where the machine has N + 2 CPUs; and the RSS of one
process with `--loop-threads 2` against `--workers 2` (the workers' sum) for Flask and
FastAPI. Every figure records its interpreter (sys.version, Py_GIL_DISABLED, whether the GIL
is on); without the free-threaded interpreter the phase is skipped, saying why. It goes to
results/threads.json and threads.md (`--phases threads`).

The compression phase (benchkit/compressphase.py, issue 39) measures response compression:
a 10 KiB JSON and a 100 KiB HTML body asked for with gzip, zstd or neither (wrk -H), on ours
(WSGI and ASGI, --compression on) against Starlette's GZipMiddleware on uvicorn and granian,
Flask-Compress on granian and nginx `gzip on` (levels 3 and 1); a precompressed page on ours
(--static, serve_dir) against nginx `gzip_static on`; the compressed sizes against zlib's and
zstandard's own; the first event of a stream, compressed and not; and codec_costs.py's table
(brotli against gzip and zstd). Every answer is checked (status, Content-Encoding, the body
decoding to the exact bytes) before it is measured. It goes to results/compression.json and
compression.md and to the tables between the bench-compression markers of the README and
docs/performance.md (`--phases compression`; quick: 1 round, the main contenders).

    python tests/benchmarks/run.py [--quick] [--only a,b] [--skip a,b] [--list] ...
    python tests/benchmarks/run.py --report-from results/results.json   # re-render only
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import logging
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import (  # noqa: E402
    compressphase,
    compressreport,
    httpcheck,
    idlephase,
    idlereport,
    procstat,
    proxyphase,
    proxyreport,
    pythonsmerge,
    realworldphase,
    realworldreport,
    report,
    shapes,
    threadsphase,
    threadsreport,
)
from benchkit import contenders as ck  # noqa: E402
from benchkit import realworldservers as rws  # noqa: E402
from benchkit import wrk as wrkmod  # noqa: E402
from benchkit.appcost import AppCosts  # noqa: E402

log = logging.getLogger("bench")

BENCH_DIR = ck.BENCH_DIR
ROOT = ck.ROOT
STATIC_FILES = 100
STATIC_SIZE = 100 * 1024

# Contenders measured first in every round, in this order; the rest follow by name.
LEADING = ["cymongoose-raw", "mongoose-c", "cymongoose-handles", "nginx", "cymongoose-wsgi",
           "granian-wsgi", "cymongoose-flask", "granian-flask", "flask-gunicorn-gthread",
           "cymongoose-asgi", "granian-asgi", "uvicorn-raw", "cymongoose-fastapi",
           "granian-fastapi", "fastapi", "cymongoose-static", "mongoose-c-static", "nginx-static",
           "cymongoose-proxy", "nginx-proxy-tuned", "nginx-proxy-defaults", "caddy-proxy"]
# The phases whose runs go to results.json; the others each have a document of their own
# (proxy.json, idle.json, realworld.json, threads.json, compression.json).
MAIN_PHASES = ("app", "hello", "static", "rss", "connections") + shapes.PHASES
OWN_PHASES = ("proxy", "idle", "realworld", "threads", "compression")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="the 2-3 minute subset: quick contenders, shorter runs, results/quick/")
    p.add_argument("--only", default="", help="comma-separated contender names to run")
    p.add_argument("--skip", default="", help="comma-separated contender names to leave out")
    p.add_argument("--list", action="store_true", help="list the contenders and exit")
    p.add_argument("--report-from", type=Path, metavar="RESULTS_JSON",
                   help="measure nothing: re-render the outputs of a finished run "
                        "(its results.json) with the current targets and tables")
    p.add_argument("--duration", type=int, help="seconds per measured run (default 5; quick 3)")
    p.add_argument("--warmup", type=int, help="seconds of warm-up per contender (2; quick 1)")
    p.add_argument("--rounds", type=int, help="interleaved rounds at -c50 (default 3; quick 2)")
    p.add_argument("--connections", type=int, default=50)
    p.add_argument("--c200", type=int, default=200,
                   help="connections of the extra hello round (0 skips it)")
    p.add_argument("--static-rounds", type=int, default=1, help="rounds of the static phase")
    p.add_argument("--rss-requests", type=int,
                   help="requests of the RSS-growth run (default 1000000; quick 100000; 0 skips)")
    p.add_argument("--rss-contender", default="cymongoose-raw")
    p.add_argument("--scale", default="",
                   help="connection counts of the connections phase (default 1000,10000; "
                        "quick 1000)")
    p.add_argument("--phases", default=",".join(MAIN_PHASES + OWN_PHASES),
                   help="which phases to run (comma-separated from app, hello, static, rss, "
                   "connections, close, clients256, workers, pythons, proxy, idle, "
                   "realworld, threads, compression; app: the in-process cost of each "
                   "selected server's WSGI/ASGI app; close, clients256, workers, pythons: "
                   "benchkit/shapes.py; "
                   "threads: --loop-threads on a free-threaded 3.13, benchkit/threadsphase.py)")
    shapes.add_arguments(p)
    threadsphase.add_arguments(p)
    compressphase.add_arguments(p)
    p.add_argument("--proxy-loads", default="",
                   help="keep-alive clients of the proxy phase besides the --scale counts "
                   "(default 10,200; quick 10)")
    p.add_argument("--idle-count", type=int,
                   help="connections the idle phase holds open (default 15000; quick 5000)")
    p.add_argument("--idle-probes", type=int, default=400,
                   help="fresh clients timed by the idle phase, quiet and with them held")
    p.add_argument("--realworld-tests", default="",
                   help="test types of the realworld phase (default all: "
                   f"{','.join(realworldphase.TEST_IDS)}; quick "
                   f"{','.join(realworldphase.QUICK_TESTS)})")
    p.add_argument("--realworld-apps", default=",".join(rws.APP_IDS),
                   help="apps of the realworld phase (comma-separated from "
                   f"{', '.join(rws.APP_IDS)})")
    p.add_argument("--realworld-threads", default="32",
                   help="--threads values ours also runs the Flask app with, besides its "
                   "default (comma-separated; empty: the default only)")
    p.add_argument("--realworld-rounds", type=int,
                   help="interleaved rounds of the realworld phase (default 3; quick 1)")
    p.add_argument("--realworld-connections", type=int, default=64,
                   help="keep-alive clients of the realworld phase")
    p.add_argument("--realworld-pool", type=int, default=16,
                   help="database connections per app pool (REALWORLD_POOL)")
    p.add_argument("--realworld-outage", choices=realworldphase.TEST_IDS, metavar="TEST",
                   help="stop PostgreSQL halfway through TEST's first run on purpose (the "
                   "bad-input check: the run shows non-2xx, the phase restarts it and goes on)")
    p.add_argument("--app-seconds", type=float,
                   help="CPU seconds per repeat of the in-process app calls (0.6; quick 0.3)")
    p.add_argument("--app-repeats", type=int,
                   help="repeats of the app calls before the hello phase (3; quick 2), "
                   "besides one at the start of each hello round")
    p.add_argument("--server-cpu", type=int, default=0)
    p.add_argument("--client-cpu", type=int, default=1)
    p.add_argument("--out", type=Path, help="output directory (results/ or results/quick/)")
    p.add_argument("--readme", choices=["auto", "yes", "no"], default="auto",
                   help="rewrite the results blocks of README.md and docs/performance.md "
                   "(auto: full runs only)")
    p.add_argument("--merge-pythons", action="store_true",
                   help="with --phases pythons alone: add the versions measured to the "
                   "per-Python table of the full run's results.json in --out (and the docs' "
                   "blocks) instead of replacing it (benchkit/pythonsmerge.py)")
    p.add_argument("--no-chart", action="store_true")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    quick = args.quick
    for name, full, short in (("duration", 5, 3), ("warmup", 2, 1), ("rounds", 3, 2),
                              ("rss_requests", 1_000_000, 100_000), ("app_seconds", 0.6, 0.3),
                              ("app_repeats", 3, 2)):
        if getattr(args, name) is None:
            setattr(args, name, short if quick else full)
    if args.idle_count is None:
        args.idle_count = 5000 if quick else 15000
    if args.realworld_rounds is None:
        args.realworld_rounds = 1 if quick else 3
    args.realworld_tests = [t for t in (args.realworld_tests or ",".join(
        realworldphase.QUICK_TESTS if quick else realworldphase.TEST_IDS)).split(",") if t]
    args.realworld_apps = [a for a in args.realworld_apps.split(",") if a]
    bad = (set(args.realworld_tests) - set(realworldphase.TEST_IDS)) | (
        set(args.realworld_apps) - set(rws.APP_IDS))
    if bad:
        p.error(f"unknown realworld test type(s) or app(s): {', '.join(sorted(bad))}")
    if args.out is None:
        args.out = BENCH_DIR / "results" / ("quick" if quick else "")
    try:
        args.realworld_threads = [int(n) for n in args.realworld_threads.split(",") if n]
    except ValueError:
        p.error("--realworld-threads takes comma-separated thread counts, e.g. 8,32")
    try:
        args.scale = [int(n) for n in (args.scale or ("1000" if quick else "1000,10000"))
                      .split(",") if n]
        args.proxy_loads = [int(n) for n in (args.proxy_loads or ("10" if quick else "10,200"))
                            .split(",") if n]
    except ValueError:
        p.error("--scale and --proxy-loads take comma-separated client counts, e.g. 1000,10000")
    return args


def _cmd_output(cmd: list[str]) -> str:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unavailable"
    return (r.stdout + r.stderr).strip()


def machine() -> dict[str, Any]:
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_kib = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    distro = ""
    try:
        distro = dict(re.findall(r'^(\w+)="?([^"\n]*)"?$', Path("/etc/os-release").read_text(),
                                 re.MULTILINE)).get("PRETTY_NAME", "")
    except OSError:
        pass
    virt = _cmd_output(["systemd-detect-virt"]) if shutil.which("systemd-detect-virt") else ""
    return {
        "cpu_model": cpu,
        "logical_cpus": os.cpu_count(),
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "kernel": platform.release(),
        "os": distro,
        "virtualization": virt,
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def project_info(project_python: str) -> dict[str, Any]:
    pin = json.loads((ROOT / "vendor" / "mongoose" / "pin.json").read_text())
    git = _cmd_output(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
    dirty = _cmd_output(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"])
    versions = ck.package_versions(project_python, ["cymongoose", "cython",
                                                    "scikit-build-core"])
    ext_flags = {}
    for ninja in sorted(ROOT.glob("build/*/build.ninja")):
        m = re.search(r"^build \S*_mongoose\.c\.o: .*\n((?:  .*\n)+)", ninja.read_text(),
                      re.MULTILINE)
        if m:
            ext_flags = dict(re.findall(r"^  (FLAGS|DEFINES) = (.*)$", m.group(1), re.MULTILINE))
    return {
        "git_commit": git + ("-dirty" if dirty and dirty != "unavailable" else ""),
        "versions": versions,
        "mongoose_version": pin.get("version"),
        "mongoose_build": ck.mongoose_flags(),
        "extension_build": ext_flags,
        "asan": os.environ.get("CYMONGOOSE_ASAN", "OFF"),
        "python": _cmd_output([project_python, "-c", "import sys; print(sys.version)"]),
    }


def make_static_files(directory: Path) -> list[Path]:
    """100 files of 100 KiB, deterministic content, made once."""
    directory.mkdir(parents=True, exist_ok=True)
    files = [directory / f"file_{i:03d}.bin" for i in range(STATIC_FILES)]
    for i, path in enumerate(files):
        if not path.exists() or path.stat().st_size != STATIC_SIZE:
            path.write_bytes(random.Random(i).randbytes(STATIC_SIZE))
    return files


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out: Path = args.out
        self.raw_dir = BENCH_DIR / "results" / "raw" / ("quick" if args.quick else "full")
        self.run_dir = ck.CACHE_DIR / "run"
        self.scripts_dir = ck.CACHE_DIR / "lua"
        self.static_dir = ck.CACHE_DIR / "static"
        pin = os.cpu_count() is not None and os.cpu_count() >= 2  # type: ignore[operator]
        self.server_cpu = args.server_cpu if pin else None
        self.client_cpu = args.client_cpu if pin else None
        self.status: dict[str, dict[str, Any]] = {}
        self.runs: list[dict[str, Any]] = []
        self.rss: dict[str, Any] | None = None
        self.apps: list[dict[str, Any]] = []
        self.app_costs: AppCosts | None = None
        self.live: list[ck.Running] = []

    def exclude(self, name: str, state: str, reason: str) -> None:
        entry = self.status.setdefault(name, {})
        entry.update(state=state, reason=reason)
        log.warning("%s: %s: %s", name, state, reason)

    def invalidate(self, name: str, reason: str) -> None:
        """A server that crashed or answered wrongly under load: none of its runs count."""
        for run in self.runs:
            if run["contender"] == name and run["valid"]:
                run.update(valid=False, invalid_reason=reason)

    def ok(self, name: str) -> bool:
        return self.status.get(name, {}).get("state") in ("ready", "measured")

    def prepare(self, selected: list[ck.Contender]) -> list[ck.Contender]:
        project_python = our_python()
        base_python = getattr(sys, "_base_executable", sys.executable)
        ready = []
        for c in selected:
            entry = self.status.setdefault(c.name, {})
            entry.update(label=c.label, kind=c.kind, env=c.env, notes=c.notes,
                         file=str(c.file.relative_to(BENCH_DIR)), keepalive=c.keepalive)
            if c.app:
                entry["app"] = dict(c.app)
            log.info("preparing %s", c.name)
            try:
                ck.prepare(c, project_python, base_python)
            except ck.Skip as exc:
                self.exclude(c.name, "skipped", str(exc))
                continue
            python = Path(c.python) if c.python else None
            entry.update(state="ready", versions=c.versions,
                         python=str(python.relative_to(ROOT)) if python
                         and python.is_relative_to(ROOT) else c.python)
            ready.append(c)
        return ready

    def launch(self, c: ck.Contender, *, cpu: str | None = None,
               values: dict[str, str] | None = None) -> ck.Running | None:
        """c started, pinned to the server CPU (or `cpu`), and in the list of live servers;
        None, with c excluded, if it did not start."""
        try:
            r = ck.start(c, cpu=cpu if cpu is not None else self.server_cpu,
                         static_dir=self.static_dir, run_dir=self.run_dir, values=values)
        except ck.Skip as exc:
            self.exclude(c.name, "failed to start", str(exc))
            return None
        self.live.append(r)
        return r

    def start_checked(self, c: ck.Contender, files: list[Path], *, cpu: str | None = None,
                      values: dict[str, str] | None = None) -> ck.Running | None:
        """`cpu`, `values`: the workers phase's CPUs ("0-7") and {workers}."""
        r = self.launch(c, cpu=cpu, values=values)
        if r is None:
            return None
        try:
            if c.kind == "hello":
                note, self.status[c.name]["answer"] = httpcheck.check_hello(r.port,
                                                                            c.keepalive)
            else:
                note = httpcheck.check_static(r.port, files, c.keepalive)
        except (httpcheck.CheckFailed, OSError) as exc:
            self.exclude(c.name, "wrong answer", f"{exc} (not measured)")
            self.stop(r)
            return None
        self.status[c.name]["check"] = note
        log.info("%s: answer checked (%s), port %d, pid %d", c.name, note, r.port, r.pid)
        return r

    def stop(self, r: ck.Running) -> None:
        code = r.stop()
        if r in self.live:
            self.live.remove(r)
        self.status[r.contender.name]["exit_status"] = code

    def script(self, kind: str, files: list[Path]) -> Path:
        self.scripts_dir.mkdir(parents=True, exist_ok=True)
        paths = [f"/{p.name}" for p in files] if kind == "static" else None
        return wrkmod.write_script(self.scripts_dir / f"{kind}.lua", paths)

    def wrk(self, r: ck.Running, script: Path, connections: int, duration: float,
            label: str, path: str = "/", *, headers: list[str] | None = None,
            threads: int = 1, client_cpu: int | str | None = None) -> wrkmod.WrkResult:
        """`client_cpu`: wrk's CPU(s) instead of self.client_cpu (the workers phase)."""
        return wrkmod.run(f"http://127.0.0.1:{r.port}{path}", script, connections=connections,
                          duration_s=duration, cpu=client_cpu if client_cpu is not None
                          else self.client_cpu, threads=threads, headers=headers,
                          raw_out=self.raw_dir / f"{r.contender.name}.{label}.txt")

    def measure(self, r: ck.Running, phase: str, rnd: int, connections: int,
                script: Path, path: str = "/", *, headers: list[str] | None = None,
                threads: int = 1, client_cpu: int | str | None = None,
                server_cpus: list[int] | None = None,
                extra: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """One wrk run of `phase`, recorded in self.runs; the record, or None if none was
        made (the server had died, or wrk failed). `headers`, `threads` and `client_cpu` go to
        wrk; `server_cpus`: the server's CPUs when not self.server_cpu alone; `extra`: more
        fields of the record (the workers, the Python)."""
        name = r.contender.name
        if not r.alive():
            self.exclude(name, "died", f"exited with {r.proc.returncode}: {r.log_tail()}")
            self.invalidate(name, "the server died during the benchmark")
            return None
        before = procstat.sample(r.pid)
        server_cpu = server_cpus if server_cpus is not None else self.server_cpu
        cpu_before, started = procstat.cpu_times(server_cpu), time.monotonic()
        try:
            res = self.wrk(r, script, connections, self.args.duration, f"{phase}.{rnd}",
                           path=path, headers=headers, threads=threads, client_cpu=client_cpu)
        except wrkmod.WrkError as exc:
            self.exclude(name, "wrk failed", str(exc))
            return None
        after = procstat.sample(r.pid)
        cpu = procstat.cpu_between(before, after)
        server_cpu_load = procstat.cpu_load_between(
            cpu_before, procstat.cpu_times(server_cpu), time.monotonic() - started, cpu)
        run = {
            "contender": name, "phase": phase, "round": rnd, "connections": connections,
            "requests": res.requests, "duration_s": round(res.duration_s, 3),
            "rps": round(res.rps, 1), "bytes": res.bytes,
            "bytes_per_s": round(res.bytes_per_s, 1),
            "p50_us": res.p50_us, "p90_us": res.p90_us, "p99_us": res.p99_us,
            "mean_us": res.mean_us, "max_us": res.max_us,
            "socket_errors": {k: res.errors[k] for k in ("connect", "read", "write", "timeout")},
            "non2xx": res.non2xx,
            "server_cpu_s": round(cpu, 3),
            "server_cpu_us_per_req": round(cpu / res.requests * 1e6, 3) if res.requests else None,
            "server_cpu_util": round(cpu / res.duration_s, 3) if res.duration_s else None,
            "client_cpu_util": round(res.client_cpu_s / res.duration_s, 3)
            if res.duration_s else None,
            "server_processes": len(after.pids),
            "server_cpu_load": server_cpu_load,
            "rss_before": before.rss, "rss_after": after.rss, "pss_after": after.pss,
            "valid": True,
        } | (extra or {})
        if res.requests == 0:
            run.update(valid=False, invalid_reason="no request completed")
        elif res.non2xx:
            run.update(valid=False, invalid_reason=f"{res.non2xx} responses were not 2xx/3xx")
        elif not r.alive():
            run.update(valid=False, invalid_reason=f"server exited with {r.proc.returncode}")
        self.runs.append(run)
        self.status[name]["state"] = "measured"
        log.info("%-24s %-7s r%d c%-3d %10.0f req/s %8.1f MiB/s p99 %6.2f ms  cpu %6.2f us/req"
                 "%s", name, phase, rnd, connections, res.rps, res.bytes_per_s / 2**20,
                 res.p99_us / 1000, run["server_cpu_us_per_req"] or 0,
                 "" if run["valid"] else f"  INVALID: {run['invalid_reason']}")
        return run

    def phase(self, kind: str, group: list[ck.Contender], files: list[Path]) -> None:
        if not group:
            return
        log.info("== %s phase: %s", kind, ", ".join(c.name for c in group))
        running = [r for r in (self.start_checked(c, files) for c in group) if r is not None]
        script = self.script(kind, files)
        for r in running:
            procstat.settle(r.port)  # the check's connection
            self.status[r.contender.name]["rss_start"] = procstat.sample(r.pid).rss
            if self.args.warmup > 0:
                try:
                    self.wrk(r, script, self.args.connections, self.args.warmup, "warmup")
                except wrkmod.WrkError as exc:
                    self.exclude(r.contender.name, "wrk failed", f"warm-up: {exc}")
        rounds = self.args.rounds if kind == "hello" else self.args.static_rounds
        phase = "hello" if kind == "hello" else "static"
        for rnd in range(1, rounds + 1):
            if kind == "hello" and self.app_costs is not None:
                self.app_costs.repeat()  # the apps' in-process cost, sampled alongside
            for r in running:
                if self.ok(r.contender.name):
                    self.measure(r, phase, rnd, self.args.connections, script)
        if kind == "hello" and self.args.c200:
            for r in running:
                if self.ok(r.contender.name):
                    self.measure(r, "c200", 1, self.args.c200, script)
        for r in running:
            name = r.contender.name
            if self.ok(name):
                # The answer must still be right after the load, or none of it counts.
                try:
                    if kind == "hello":
                        httpcheck.check_hello(r.port, r.contender.keepalive)
                    else:
                        httpcheck.check_static(r.port, files, r.contender.keepalive)
                except (httpcheck.CheckFailed, OSError) as exc:
                    self.exclude(name, "wrong answer", f"after the load: {exc}")
                    self.invalidate(name, "wrong answer after the load")
                procstat.settle(r.port)
                self.status[name]["rss_end"] = procstat.sample(r.pid).rss
            self.stop(r)

    def connections_phase(self, group: list[ck.Contender], files: list[Path]) -> None:
        """Each contender at every count of args.scale keep-alive connections, one wrk run
        per count after a warm-up at that count."""
        if not group:
            return
        levels = sorted(self.args.scale)
        # wrk and the servers inherit the runner's limit; 10,000 clients need 10,000 each.
        limit = raise_open_file_limit(max(levels) + 512)
        if limit < max(levels) + 512:
            log.warning("the open-file hard limit is %d: counts above %d are skipped", limit,
                        limit - 512)
            levels = [n for n in levels if n + 512 <= limit]
        log.info("== connections phase: %s at %s connections",
                 ", ".join(c.name for c in group), ", ".join(map(str, levels)))
        script = self.script("hello", files)
        for c in group:
            r = self.start_checked(c, files)
            if r is None:
                continue
            for n in levels:
                if not self.ok(c.name):
                    break
                procstat.settle(r.port, timeout=15)
                if self.args.warmup > 0:
                    try:
                        self.wrk(r, script, n, self.args.warmup, f"warmup-c{n}")
                    except wrkmod.WrkError as exc:
                        self.exclude(c.name, "wrk failed", f"warm-up at {n}: {exc}")
                        break
                    procstat.settle(r.port, timeout=15)
                self.measure(r, f"c{n}", 1, n, script)
            if self.ok(c.name):
                try:
                    httpcheck.check_hello(r.port, c.keepalive)
                except (httpcheck.CheckFailed, OSError) as exc:
                    self.exclude(c.name, "wrong answer", f"after the load: {exc}")
                    self.invalidate(c.name, "wrong answer after the load")
            self.stop(r)

    def rss_growth(self, c: ck.Contender, files: list[Path]) -> None:
        n = self.args.rss_requests
        log.info("== RSS phase: %s over %d requests", c.name, n)
        r = self.start_checked(c, files)
        if r is None:
            return
        script = self.script("hello", files)
        try:
            warm = self.wrk(r, script, self.args.connections, max(self.args.warmup, 2),
                            "rss-warmup")
            procstat.settle(r.port)
            start = procstat.rss_of(r.pid)
            steps, done, rate = [], 0, max(warm.rps, 1.0)
            # wrk runs for a duration, not a count: four chunks sized from the measured rate,
            # each on fresh connections. A leak grows step after step; a one-off allocation
            # does not.
            for i in range(4):
                want = n * (i + 1) // 4 - done
                if want <= 0:
                    break
                res = self.wrk(r, script, self.args.connections, want / rate * 1.02,
                               f"rss.{i}")
                rate = max(res.rps, 1.0)
                done += res.requests
                procstat.settle(r.port)
                steps.append({"requests": done, "rss": procstat.rss_of(r.pid),
                              "non2xx": res.non2xx, "socket_errors": res.socket_errors})
        except wrkmod.WrkError as exc:
            self.exclude(c.name, "wrk failed", f"RSS run: {exc}")
            self.stop(r)
            return
        self.stop(r)
        growth = steps[-1]["rss"] - start
        self.rss = {"contender": c.name, "requests": done, "rss_after_warmup": start,
                    "steps": steps, "growth": growth,
                    "valid": all(s["non2xx"] == 0 for s in steps)}
        log.info("RSS after warm-up %.1f MiB, after %d requests %.1f MiB (growth %+d KiB)",
                 start / 2**20, done, steps[-1]["rss"] / 2**20, growth // 1024)

    def stop_all(self) -> None:
        for r in list(self.live):
            try:
                self.stop(r)
            except Exception:  # noqa: BLE001 - best effort at exit
                pass


def raise_open_file_limit(want: int) -> int:
    """Raise this process's soft RLIMIT_NOFILE towards `want` (children inherit it); return
    the soft limit now in force."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft if soft != resource.RLIM_INFINITY else want


def order(contenders: list[ck.Contender]) -> list[ck.Contender]:
    rank = {n: i for i, n in enumerate(LEADING)}
    return sorted(contenders, key=lambda c: (rank.get(c.name, len(rank)), c.name))


def preflight() -> None:
    missing = [t for t in ("wrk", "taskset") if shutil.which(t) is None]
    if missing:
        pkgs = {"wrk": "wrk", "taskset": "util-linux"}
        sys.exit(f"bench: {', '.join(missing)} not found. Install with `apt-get install "
                 f"{' '.join(pkgs[m] for m in missing)}`, or run `make bench`, which installs "
                 "the Debian packages listed in tools/debian-packages.txt.")


def our_python() -> str:
    """The interpreter our own contenders run on: the project's .venv, or the runner's when
    that is not there (or is another machine's: bench-py314 runs the runner in the sid root,
    where .venv's link leads nowhere)."""
    project = ROOT / ".venv" / "bin" / "python"
    return str(project) if project.exists() else sys.executable


def load_main(path: Path) -> dict[str, Any] | None:
    """A finished run's results.json, summarized again with the current code."""
    if not path.exists():
        return None
    old = json.loads(path.read_text())
    return report.build(old["meta"], old["contenders"], old["runs"], old["rss"], old["apps"])


def readme_extra(proxy_data: dict[str, Any] | None, out: Path,
                 idle_data: dict[str, Any] | None = None,
                 realworld_data: dict[str, Any] | None = None) -> list[str]:
    """The other documents' tables for docs/performance.md's block."""
    tables = [proxyreport.readme_lines(proxy_data, out, ROOT) if proxy_data else [],
              idlereport.readme_lines(idle_data, out, ROOT) if idle_data else [],
              realworldreport.readme_lines(realworld_data, out, ROOT) if realworld_data
              else []]
    lines: list[str] = []
    for table in (t for t in tables if t):
        lines += ([""] if lines else []) + table
    return lines


def readme_rows(realworld_data: dict[str, Any] | None, out: Path) -> list[tuple[str, str]]:
    """The rows other documents add to the README's summary table: the realworld apps' and
    the compression phase's (its last compression.json in `out`)."""
    return (realworldreport.readme_rows(realworld_data)
            + compressreport.readme_rows(compressreport.load(out)))


def proxy_loads(args: argparse.Namespace) -> list[int]:
    """The proxy phase's client counts: --proxy-loads and --scale, within the open-file
    limit (a proxied client holds a descriptor in wrk and one or two in the proxy)."""
    loads = sorted(set(args.proxy_loads) | set(args.scale))
    limit = raise_open_file_limit(2 * max(loads, default=0) + 512)
    fit = [n for n in loads if n + 512 <= limit]
    if fit != loads:
        log.warning("the open-file limit is %d: the proxy phase skips %s clients", limit,
                    ", ".join(str(n) for n in loads if n not in fit))
    return fit


def rerender(args: argparse.Namespace) -> int:
    """The same runs, summarized again: for a target or table added after the run."""
    data = load_main(args.report_from)
    assert data is not None
    out = args.out or args.report_from.parent
    report.write_all(data, out, chart=not args.no_chart)
    proxy_data = proxyreport.load(args.report_from.parent)
    if proxy_data is not None:
        proxyreport.write_all(proxy_data, out)
    idle_data = idlereport.load(args.report_from.parent)
    if idle_data is not None:
        idlereport.write_all(idle_data, out)
    realworld_data = realworldreport.load(args.report_from.parent)
    if realworld_data is not None:
        realworldreport.write_all(realworld_data, out)
    compression_data = compressreport.load(args.report_from.parent)
    if compression_data is not None:
        compressreport.write_all(compression_data, out)
    if args.readme == "yes" or (args.readme == "auto" and data["meta"].get("mode") == "full"):
        if compression_data is not None:
            compressreport.update_docs(ROOT, compression_data, out)
        report.update_docs(ROOT, data, out, readme_extra(proxy_data, out, idle_data,
                                                         realworld_data),
                           rows=readme_rows(realworld_data, args.out))
    report.print_targets(data)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)-7s %(message)s", datefmt="%H:%M:%S")
    if args.report_from is not None:
        return rerender(args)
    all_contenders = order(ck.discover())
    realworld_all = rws.contenders(args.realworld_threads)
    if args.list:
        for c in all_contenders:
            print(f"{c.name:26} {c.kind:7} {'quick' if c.quick else '':6} {c.label}")
        for c in realworld_all:
            print(f"{c.name:26} {'rw':7} {'quick' if c.quick else '':6} "
                  f"{rws.app_of(c.name).label} on {c.label}")
        for name in threadsphase.names():
            print(f"{name:26} {'threads':7} {'quick':6} threads phase: {name.split('-')[0]}")
        for spec in compressphase.specs(sys.executable):
            print(f"{spec.name:26} {'compr':7} {'quick' if spec.contender.quick else '':6} "
                  f"{spec.contender.label}")
        return 0
    preflight()
    names = ({c.name for c in all_contenders} | {c.name for c in realworld_all}
             | set(threadsphase.names()) | set(compressphase.names()))
    only = {n for n in args.only.split(",") if n}
    skip = {n for n in args.skip.split(",") if n}
    unknown = (only | skip) - names
    if unknown:
        sys.exit(f"bench: unknown contender(s) {', '.join(sorted(unknown))}; "
                 f"known: {', '.join(sorted(names))}")
    phases = {p for p in args.phases.split(",") if p}
    if args.merge_pythons and phases != {"pythons"}:
        sys.exit("bench: --merge-pythons goes with --phases pythons alone")
    bad = phases - set(MAIN_PHASES) - set(OWN_PHASES)
    if bad:
        sys.exit(f"bench: unknown phase(s) {', '.join(sorted(bad))}; "
                 "use app, hello, static, rss, connections, close, clients256, workers, "
                 "pythons, proxy, idle, realworld, threads, compression")
    selected = [c for c in all_contenders
                if (c.name in only if only else (c.quick or not args.quick))
                and c.name not in skip
                and (bool(phases & set(c.phases)) or c.name == args.rss_contender
                     or ("app" in phases and c.app is not None))]
    bench = Bench(args)
    loads = proxy_loads(args) if "proxy" in phases else []
    idle = (idlephase.IdlePhase(bench, idlephase.select(all_contenders, only, skip),
                                count=args.idle_count, probes=args.idle_probes,
                                rounds=1 if args.quick else args.rounds,
                                window_s=1.0 if args.quick else 2.0)
            if "idle" in phases else None)
    # A Bench of its own: its status and runs are realworld.json's.
    realworld = (realworldphase.RealworldPhase(
        Bench(args), realworldphase.select(realworld_all, only, skip, quick=args.quick,
                                           apps=args.realworld_apps),
        tests=args.realworld_tests, rounds=args.realworld_rounds,
        connections=args.realworld_connections, pool=args.realworld_pool,
        outage=args.realworld_outage) if "realworld" in phases else None)
    # The same: its status and runs are threads.json's.
    # --only narrows it when it names some of its servers.
    threads = (threadsphase.ThreadsPhase(Bench(args), ft_python=args.ft_python,
                                         gil_python=args.gil_python,
                                         only=only & set(threadsphase.names()), skip=skip)
               if "threads" in phases else None)
    # The same: its status and runs are compression.json's.
    compression = (compressphase.CompressionPhase(
        Bench(args), only & set(compressphase.names()), skip, quick=args.quick,
        sse_requests=args.compression_sse) if "compression" in phases else None)
    if bench.client_cpu is not None:
        # The runner's own work (reading /proc, parsing) stays off the server's CPU.
        os.sched_setaffinity(0, {bench.client_cpu})
    else:
        log.warning("fewer than 2 CPUs: server and client are not pinned apart")
    started = time.time()
    meta: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "mode": "quick" if args.quick else "full",
        "machine": machine(),
        "tools": {"wrk": wrkmod.version(),
                  "nginx": _cmd_output(["nginx", "-v"]) if shutil.which("nginx") else "absent",
                  "uv": _cmd_output(ck.uv_command() + ["--version"])
                  if shutil.which("uv") or os.environ.get("UV") else "absent",
                  "runner_python": sys.version.split()[0]},
        "settings": {"wrk": f"wrk -t1 -c{args.connections} -d{args.duration:g}s --latency",
                     "duration_s": args.duration, "warmup_s": args.warmup,
                     "rounds": args.rounds, "connections": args.connections,
                     "c200": args.c200, "static_rounds": args.static_rounds,
                     "static_files": f"{STATIC_FILES} x {STATIC_SIZE // 1024} KiB",
                     "server_cpu": bench.server_cpu, "client_cpu": bench.client_cpu,
                     "rss_requests": args.rss_requests,
                     "scale_connections": args.scale,
                     "app_seconds": args.app_seconds, "app_repeats": args.app_repeats,
                     "proxy_loads": loads, "workers": args.workers,
                     "pythons": args.pythons},
        "shapes": {},
    }
    ready: list[ck.Contender] = []
    try:
        files = make_static_files(bench.static_dir)
        ready = bench.prepare(selected)
        shapes.note_pythons(bench, ready)
        meta["project"] = project_info(our_python())
        if "app" in phases:
            bench.app_costs = AppCosts(cpu=bench.server_cpu, seconds=args.app_seconds,
                                       run_dir=bench.run_dir)
            bench.app_costs.start(ready, args.app_repeats)
        for kind in ("hello", "static"):
            if kind in phases:
                bench.phase(kind, [c for c in ready if c.kind == kind and kind in c.phases],
                            files)
        if "connections" in phases:
            bench.connections_phase([c for c in ready if "connections" in c.phases], files)
        rss_c = next((c for c in ready if c.name == args.rss_contender), None)
        if "rss" in phases and args.rss_requests and rss_c is not None:
            bench.rss_growth(rss_c, files)
        shapes.run(bench, phases, ready, files, meta["shapes"])
        if "proxy" in phases:
            proxyphase.run(bench, [c for c in ready if "proxy" in c.phases], loads)
        if idle is not None:
            idle.run()
        if realworld is not None:
            realworld.run()
        if threads is not None:
            threads.run()
        if compression is not None:
            compression.run()
    except KeyboardInterrupt:
        log.warning("interrupted: writing what was measured")
    finally:
        if bench.app_costs is not None:
            try:
                bench.apps = bench.app_costs.finish(bench.status)
            finally:
                bench.app_costs.close()
        bench.stop_all()
        if realworld is not None:
            realworld.bench.stop_all()
        if threads is not None:
            threads.bench.stop_all()
        if compression is not None:
            compression.bench.stop_all()
    meta["elapsed_s"] = round(time.time() - started, 1)
    measured = ready + (realworld.group if realworld is not None else [])
    for env_name in sorted({c.env for c in measured if c.env not in ("project", "system")}):
        python = ck.ENVS_DIR / env_name / "bin" / "python"
        meta.setdefault("environments", {})[env_name] = ck.freeze(str(python))
    # Each document holds its own contenders: the proxies' runs and status go to proxy.json.
    proxies = {n for n, s in bench.status.items() if s.get("kind") == "proxy"}
    paths, data, proxy_data = [], None, None
    if args.merge_pythons:
        old = pythonsmerge.load(args.out / "results.json")
        data = report.build(*pythonsmerge.merge(old, meta, bench.status, bench.runs),
                            old["rss"], old["apps"])
    elif phases & set(MAIN_PHASES):
        data = report.build(meta, {n: s for n, s in bench.status.items() if n not in proxies},
                            [r for r in bench.runs if r["contender"] not in proxies],
                            bench.rss, bench.apps)
    if data is not None:
        paths += report.write_all(data, args.out, chart=not args.no_chart)
    if "proxy" in phases:
        proxy_data = proxyreport.build(meta, {n: bench.status[n] for n in proxies},
                                       [r for r in bench.runs if r["contender"] in proxies])
        paths += proxyreport.write_all(proxy_data, args.out)
    idle_data = None
    if idle is not None and idle.runs:
        idle_data = idlereport.build(meta, idle.settings, idle.status, idle.runs)
        paths += idlereport.write_all(idle_data, args.out)
    realworld_data = None
    if realworld is not None and realworld.bench.runs:  # its own Bench (below)
        realworld_data = realworldreport.build(meta, realworld.settings,
                                               realworld.bench.status, realworld.bench.runs)
        paths += realworldreport.write_all(realworld_data, args.out)
    threads_data = None
    if threads is not None:  # written skipped too: threads.json says why
        threads_data = threadsreport.build(meta, threads.settings, threads.bench.status,
                                           threads.bench.runs, threads.info, threads.skipped)
        paths += threadsreport.write_all(threads_data, args.out)
    compression_data = None
    if compression is not None and (compression.bench.runs or compression.sse):
        compression_data = compressreport.build(meta, compression)
        paths += compressreport.write_all(compression_data, args.out)
        if args.readme == "yes" or (args.readme == "auto" and not args.quick):
            compressreport.update_docs(ROOT, compression_data, args.out)
    for p in paths:
        log.info("wrote %s", p.relative_to(ROOT) if p.is_relative_to(ROOT) else p)
    # The README's block shows every document: one this run did not make is the last one
    # written. A run of only some of results.json's phases leaves the block alone.
    whole = (set(MAIN_PHASES) <= phases or not phases & set(MAIN_PHASES)
             or args.merge_pythons)  # the merged document is whole again
    if args.readme == "yes" or (args.readme == "auto" and not args.quick and not args.only
                                and whole):
        data = data or load_main(args.out / "results.json")
        proxy_data = proxy_data or proxyreport.load(args.out)
        idle_data = idle_data or idlereport.load(args.out)
        realworld_data = realworld_data or realworldreport.load(args.out)
        if data is not None:
            report.update_docs(ROOT, data, args.out,
                               readme_extra(proxy_data, args.out, idle_data, realworld_data),
                               rows=readme_rows(realworld_data, args.out))
        else:
            log.warning("no results.json in %s: the README's block is left as it is", args.out)
    if data is not None:
        report.print_targets(data)
    if proxy_data is not None:
        proxyreport.print_summary(proxy_data)
    if idle_data is not None:
        idlereport.print_summary(idle_data)
    if realworld_data is not None:
        realworldreport.print_summary(realworld_data)
    elif realworld is not None:
        for name, s in sorted(realworld.status.items()):
            log.warning("realworld %s not measured: %s: %s", name, s.get("state"),
                        s.get("reason"))
    if threads_data is not None:
        threadsreport.print_summary(threads_data)
    if compression_data is not None:
        compressreport.print_summary(compression_data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
