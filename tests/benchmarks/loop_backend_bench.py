"""The ASGI server on epoll against the same server on Mongoose's poll() backend (make
test-poll's build, where aio.LoopDriver watches each socket): a hello app under wrk, with and
without many idle keep-alive connections, runs interleaved, the server pinned to one CPU and
wrk to the other. Prints one JSON object: medians of requests/s and of the server's CPU time
per request (user + system, from /proc), with the context.

    python tests/benchmarks/loop_backend_bench.py --epoll .venv/bin/python \\
        --poll .venv-poll/bin/python --runs 5 --idle 0,1000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys

SERVE = r"""
import asyncio, sys
from cymongoose.aio import new_event_loop
from cymongoose.asgi import ASGIServer

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"hello"})

async def main():
    server = ASGIServer(app)
    await server.start(f"http://127.0.0.1:{sys.argv[1]}")
    print("ready", flush=True)
    await asyncio.Event().wait()

loop = new_event_loop()
loop.run_until_complete(main())
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_clients(port: int, n: int) -> list[socket.socket]:
    """n keep-alive connections, each answered once, then left idle."""
    out = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        out.append(s)
    for s in out:
        got = b""
        while b"hello" not in got:
            got += s.recv(4096)
    return out


def one_run(python: str, idle: int, seconds: int, connections: int) -> dict[str, float]:
    port = free_port()
    server = subprocess.Popen(["taskset", "-c", "0", python, "-c", SERVE, str(port)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        idlers = idle_clients(port, idle)
        before = cpu_seconds(server.pid)
        out = subprocess.run(
            ["taskset", "-c", "1", "wrk", "-t1", f"-c{connections}", f"-d{seconds}s",
             f"http://127.0.0.1:{port}/"], capture_output=True, text=True, check=True).stdout
        cpu = cpu_seconds(server.pid) - before
        requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
        for s in idlers:
            s.close()
        return {"rps": requests / seconds, "cpu_us_per_request": cpu / requests * 1e6}
    finally:
        server.terminate()
        server.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epoll", required=True, help="python with the epoll build")
    parser.add_argument("--poll", required=True, help="python with the poll() build")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--idle", default="0,1000", help="idle connections, comma-separated")
    args = parser.parse_args()
    builds = {"epoll": args.epoll, "poll": args.poll}
    results: dict[str, dict[str, list[dict[str, float]]]] = {}
    for idle in (int(x) for x in args.idle.split(",")):
        per = results.setdefault(str(idle), {name: [] for name in builds})
        for _ in range(args.runs):
            for name, python in builds.items():  # interleaved: drift hits both alike
                per[name].append(one_run(python, idle, args.seconds, args.connections))
    summary = {
        idle: {name: {key: round(statistics.median(r[key] for r in runs), 2)
                      for key in ("rps", "cpu_us_per_request")}
               for name, runs in per.items()}
        for idle, per in results.items()}
    print(json.dumps({
        "context": {"python": sys.version.split()[0], "machine": platform.machine(),
                    "cpus": os.cpu_count(), "pinning": "server on CPU 0, wrk on CPU 1",
                    "wrk": f"-t1 -c{args.connections} -d{args.seconds}s", "runs": args.runs,
                    "loop": "uvloop (cymongoose.aio.new_event_loop)"},
        "medians": summary}, indent=1))


if __name__ == "__main__":
    main()
