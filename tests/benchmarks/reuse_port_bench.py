"""One shared listening socket against a socket per worker (`--reuse-port`), measured through
the command line as users run it: `cymongoose --workers N` with a WSGI hello app, under wrk,
interleaved (shared, own, own, shared...), for two loads:

- keep-alive: wrk's connections open once, so the spread is decided at accept time;
- close: a new connection per request (`Connection: close`), accepted all the time.

For each run: requests a second, p99, how the workers shared the work (each worker's CPU
time over the run, as a share of the busiest's: 1.0 is an even split) and, for keep-alive,
how many of wrk's connections each worker holds (from `ss`).

    python tests/benchmarks/reuse_port_bench.py [--workers 2] [--repeats 5] [--seconds 5]

Writes results/reuse_port.json and results/reuse_port.md. `make bench-reuse-port` runs it.
With fewer than N + 1 CPUs wrk shares the servers' CPUs (it is pinned to the last one
either way): the figures then compare the two modes, not the machine's best.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import procstat, wrk  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
APP = '''\
def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "12")])
    return [b"Hello world!"]
'''
MODES = {"shared": [], "own": ["--reuse-port"]}
LOADS = {"keep-alive": [], "close": ["Connection: close"]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(tmp: Path, workers: int, mode: str) -> tuple[subprocess.Popen[bytes], int, Path]:
    port = _free_port()
    log = tmp / f"{mode}-{port}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cymongoose", "bench_app:app", "--port", str(port),
             "--workers", str(workers), "--threads", "2", *MODES[mode]],
            cwd=tmp, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while "workers of bench_app:app ready" not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the server did not start: {log.read_text()}")
        time.sleep(0.05)
    return proc, port, log


def _workers_of(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return sorted(int(p) for p in out.split())


def _connections_by_pid(port: int) -> dict[int, int]:
    out = subprocess.run(["ss", "-tnpH", "state", "established", f"( sport = :{port} )"],
                         capture_output=True, text=True).stdout
    counts: dict[int, int] = {}
    for pid in re.findall(r"pid=(\d+)", out):
        counts[int(pid)] = counts.get(int(pid), 0) + 1
    return counts


def _one_run(tmp: Path, args: argparse.Namespace, mode: str, load: str,
             script: Path) -> dict[str, Any]:
    proc, port, log = _start(tmp, args.workers, mode)
    try:
        pids = _workers_of(proc.pid)
        before = {p: procstat.sample_of([p]).cpu_s for p in pids}
        held: dict[int, int] = {}

        def sample_connections() -> None:
            time.sleep(args.seconds / 2)  # a benchmark's own pacing, not a test's wait
            held.update(_connections_by_pid(port))

        sampler = threading.Thread(target=sample_connections)
        sampler.start()
        result = wrk.run(f"http://127.0.0.1:{port}/", script, connections=args.connections,
                         duration_s=args.seconds, cpu=(os.cpu_count() or 1) - 1,
                         headers=LOADS[load])
        sampler.join()
        cpu = [procstat.sample_of([p]).cpu_s - before[p] for p in pids]
    finally:
        proc.terminate()
        proc.wait(30)
    busiest = max(cpu) or 1.0
    return {"mode": mode, "load": load, "rps": round(result.rps), "p99_us": result.p99_us,
            "errors": result.socket_errors + result.non2xx,
            "cpu_share": [round(c / busiest, 3) for c in cpu],
            "connections": sorted(held.get(p, 0) for p in pids)}


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in runs))


def _evenness(run: dict[str, Any]) -> float:
    """The least busy worker's CPU as a share of the busiest's (1.0: even)."""
    return float(min(run["cpu_share"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=64)
    args = parser.parse_args()
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        (tmp / "bench_app.py").write_text(APP)
        script = wrk.write_script(tmp / "report.lua")
        for load in LOADS:
            for i in range(args.repeats):
                order = list(MODES) if i % 2 == 0 else list(reversed(MODES))
                for mode in order:
                    run = _one_run(tmp, args, mode, load, script)
                    print(json.dumps(run), flush=True)
                    runs.append(run)
    lines = [f"# One shared socket against a socket per worker, --workers {args.workers}", "",
             f"{os.cpu_count()} CPUs, wrk -c{args.connections} on the last one, "
             f"{args.repeats} interleaved runs of {args.seconds:g} s each, medians.", "",
             "| Load | Sockets | req/s | p99 | least busy worker's CPU ÷ busiest's | "
             "wrk's connections per worker | errors |", "|---|---|---|---|---|---|---|"]
    for load in LOADS:
        for mode in MODES:
            mine = [r for r in runs if r["mode"] == mode and r["load"] == load]
            conns = statistics.median_low([tuple(r["connections"]) for r in mine]) \
                if load == "keep-alive" else ()
            lines.append(
                f"| {load} | {mode} | {_median(mine, 'rps'):,.0f} | "
                f"{_median(mine, 'p99_us') / 1000:.2f} ms | "
                f"{statistics.median(_evenness(r) for r in mine):.2f} | "
                f"{' / '.join(map(str, conns)) or '-'} | {sum(r['errors'] for r in mine)} |")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "reuse_port.json").write_text(json.dumps(runs, indent=1) + "\n")
    (RESULTS / "reuse_port.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
