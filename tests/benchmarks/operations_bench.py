"""The production options measured (docs/operations.md), through the `cymongoose` command
line as users run it, server pinned to one core and the client to the other:

1. metrics overhead: hello throughput with `--metrics` against without, for the raw handler,
   WSGI and ASGI, interleaved (off, on, off, on...) and reported as the median ratio;
2. overload: a WSGI app that takes 20 ms, 8 threads, `--limit-concurrency 8`; a probe
   client in a process of its own measures the p99 of admitted requests with 8 clients in all
   (no overload) and with 16 (twice what it admits), and how fast shed requests get their
   503;
3. the counters against the access log: requests counted by the metrics equal the lines the
   access log wrote over a wrk run.

    python tests/benchmarks/operations_bench.py [--repeats 5] [--seconds 5]

Writes results/operations.json and prints a summary. `make bench-operations` runs it.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "servers"))

from benchkit import wrk  # noqa: E402

RESULTS = HERE / "results" / "operations.json"
SERVER_CPU, CLIENT_CPU = 0, 1

APPS = {
    "raw": ("demo_server:http_only_handler", str(HERE)),
    "wsgi": ("hello_apps:wsgi_hello", str(HERE / "servers")),
    "asgi": ("hello_apps:asgi_hello", str(HERE / "servers")),
}

SLOW_APP = '''\
import asyncio
import time

HEADERS = [(b"content-type", b"text/plain"), (b"content-length", b"2")]


def wsgi(environ, start_response):
    time.sleep(0.02)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]


async def asgi(scope, receive, send):
    if scope["type"] != "http":
        return
    await asyncio.sleep(0.02)
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": b"ok"})
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """`cymongoose APP OPTIONS` pinned to SERVER_CPU (its workers inherit the pinning)."""

    def __init__(self, app: str, path: str, *options: str) -> None:
        self.port = _free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("CYMONGOOSE_")}
        env["PYTHONPATH"] = path
        self.proc = subprocess.Popen(
            ["taskset", "-c", str(SERVER_CPU), sys.executable, "-m", "cymongoose", app,
             "--port", str(self.port), "--log-level", "warning", *options],
            cwd=path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"server ended: {self.proc.stderr.read()}") from None
                time.sleep(0.05)
        else:
            raise RuntimeError("server did not come up")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def metrics_overhead(repeats: int, seconds: float, run_dir: Path,
                     interfaces: list[str]) -> dict[str, object]:
    script = wrk.write_script(run_dir / "report.lua")
    out: dict[str, object] = {}
    for iface in interfaces:
        app, path = APPS[iface]
        rps: dict[str, list[float]] = {"off": [], "on": []}
        for _ in range(repeats):
            for mode in ("off", "on"):
                extra = ["--metrics", "--metrics-port", "0"] if mode == "on" else []
                server = Server(app, path, "--interface", iface, *extra)
                try:
                    result = wrk.run(f"http://127.0.0.1:{server.port}/", script,
                                     connections=50, duration_s=seconds, cpu=CLIENT_CPU)
                finally:
                    server.stop()
                rps[mode].append(result.rps)
        ratios = [on / off for off, on in zip(rps["off"], rps["on"], strict=True)]
        out[iface] = {"rps_off": rps["off"], "rps_on": rps["on"],
                      "median_ratio": statistics.median(ratios)}
        print(f"{iface:5} metrics on/off: median ratio {statistics.median(ratios):.3f} "
              f"(off {statistics.median(rps['off']):,.0f} req/s, "
              f"on {statistics.median(rps['on']):,.0f} req/s)", flush=True)
    return out


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _client(port: int, seconds: float, pause_s: float) -> dict[str, list[float]]:
    """One client: a request on a fresh connection (connected before the clock starts),
    then `pause_s` after a 503 (after a 200 only when measuring), until `seconds` pass.
    The latency of each request by its status."""
    latencies: dict[str, list[float]] = {"200": [], "503": [], "other": []}
    stop_at = time.monotonic() + seconds
    while time.monotonic() < stop_at:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            conn.connect()
            started = time.perf_counter()
            conn.request("GET", "/")
            resp = conn.getresponse()
            resp.read()
            status = str(resp.status)
        except OSError:
            started, status = time.perf_counter(), "other"
        finally:
            conn.close()
        elapsed = time.perf_counter() - started
        latencies[status if status in latencies else "other"].append(elapsed)
        if status == "503" or pause_s >= 0.02:
            time.sleep(pause_s)
    return latencies


def _role(argv: list[str]) -> int:
    """`--role load N PORT SECONDS`: N clients on threads, each waiting the app's 20 ms
    after a 503, so what they offer stays N per 20 ms. `--role probe PORT SECONDS`: one
    client in a process of its own (no other thread to share its GIL with, so its clock is
    the server's latency), a request every 20 ms; prints its latencies as JSON."""
    if argv[0] == "load":
        clients, port, seconds = int(argv[1]), int(argv[2]), float(argv[3])
        threads = [threading.Thread(target=_client, args=(port, seconds, 0.02))
                   for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return 0
    port, seconds = int(argv[1]), float(argv[2])
    print(json.dumps(_client(port, seconds, 0.02)))
    return 0


def _probe_under_load(port: int, load_clients: int, seconds: float) -> dict[str, list[float]]:
    pin = ["taskset", "-c", str(CLIENT_CPU), sys.executable, __file__, "--role"]
    load = subprocess.Popen(pin + ["load", str(load_clients), str(port), str(seconds + 2)])
    try:
        time.sleep(1.0)  # the load is running before the probe measures
        probe = subprocess.run(pin + ["probe", str(port), str(seconds)], capture_output=True,
                               text=True, check=True)
    finally:
        load.wait(60)
    result: dict[str, list[float]] = json.loads(probe.stdout)
    return result


def overload(seconds: float, run_dir: Path) -> dict[str, object]:
    """An app that takes 20 ms (WSGI: 8 threads) and --limit-concurrency 8; the probe is one
    client among 8 (at the limit, nothing shed), then one among 16 (twice the limit)."""
    (run_dir / "slow_app.py").write_text(SLOW_APP)
    out: dict[str, object] = {}
    for iface in ("wsgi", "asgi"):
        server = Server(f"slow_app:{iface}", str(run_dir), "--threads", "8",
                        "--limit-concurrency", "8")
        try:
            unloaded = _probe_under_load(server.port, 7, seconds)
            loaded = _probe_under_load(server.port, 15, seconds)
        finally:
            server.stop()
        p99_unloaded = _percentile(unloaded["200"], 0.99)
        p99_loaded = _percentile(loaded["200"], 0.99)
        shed = loaded["503"]
        result = {
            "admitted_p50_ms_unloaded": _percentile(unloaded["200"], 0.5) * 1000,
            "admitted_p99_ms_unloaded": p99_unloaded * 1000,
            "admitted_p50_ms_2x": _percentile(loaded["200"], 0.5) * 1000,
            "admitted_p99_ms_2x": p99_loaded * 1000,
            "p99_ratio": p99_loaded / p99_unloaded,
            "probe_admitted_2x": len(loaded["200"]),
            "probe_shed_2x": len(shed),
            "shed_p50_ms": _percentile(shed, 0.5) * 1000,
            "shed_p99_ms": _percentile(shed, 0.99) * 1000,
            "shed_max_ms": max(shed, default=float("nan")) * 1000,
            "probe_errors": len(loaded["other"]) + len(unloaded["other"]),
        }
        out[iface] = result
        print(f"{iface} overload 2x: admitted p50/p99 {result['admitted_p50_ms_unloaded']:.1f}/"
              f"{result['admitted_p99_ms_unloaded']:.1f} ms -> "
              f"{result['admitted_p50_ms_2x']:.1f}/{result['admitted_p99_ms_2x']:.1f} ms "
              f"(p99 x{result['p99_ratio']:.2f}); {len(shed)} of the probe's requests shed, "
              f"503 in p50 {result['shed_p50_ms']:.2f} ms, p99 {result['shed_p99_ms']:.2f} ms, "
              f"max {result['shed_max_ms']:.2f} ms; errors {result['probe_errors']}",
              flush=True)
    return out


def counters_match_access_log(seconds: float, run_dir: Path) -> dict[str, object]:
    app, path = APPS["wsgi"]
    log_file = run_dir / "access.log"
    metrics_port = _free_port()
    server = Server(app, path, "--metrics", "--metrics-port", str(metrics_port),
                    "--access-log", "--access-log-file", str(log_file))
    try:
        script = wrk.write_script(run_dir / "count.lua")
        wrk.run(f"http://127.0.0.1:{server.port}/", script, connections=20,
                duration_s=seconds, cpu=CLIENT_CPU)
        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",
                                      timeout=10).read().decode()
    finally:
        server.stop()  # the access log is flushed at exit
    counted = sum(int(float(m.group(1))) for m in re.finditer(
        r"^cymongoose_requests_total\{[^}]*\} (\S+)$", text, re.MULTILINE))
    lines = sum(1 for _ in log_file.open())
    print(f"counters vs access log: {counted} requests counted, {lines} log lines",
          flush=True)
    return {"requests_counted": counted, "access_log_lines": lines, "equal": counted == lines}


def main() -> int:
    if sys.argv[1:2] == ["--role"]:
        return _role(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--interfaces", default="raw,wsgi,asgi",
                        help="the metrics overhead of these (comma-separated)")
    parser.add_argument("--only", default="overhead,overload,counters",
                        help="the parts to run (comma-separated)")
    args = parser.parse_args()
    parts = args.only.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
        if "overhead" in parts:
            results.setdefault("metrics_overhead", {}).update(metrics_overhead(
                args.repeats, args.seconds, run_dir, args.interfaces.split(",")))
        if "overload" in parts:
            results["overload"] = overload(args.seconds * 2, run_dir)
        if "counters" in parts:
            results["counters"] = counters_match_access_log(args.seconds, run_dir)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written {RESULTS.relative_to(HERE.parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
