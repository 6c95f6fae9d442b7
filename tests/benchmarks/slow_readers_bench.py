"""How long a fresh request waits while clients that never read hold streamed responses
(issue 35, item 3): a WSGI server with `--threads 8`, N clients (default 20) with a tiny
receive buffer asking for a 64 MiB streamed response and reading nothing, then fresh
requests for a hello, each timed from its connect to its last byte.

    python tests/benchmarks/slow_readers_bench.py [--readers 20] [--threads 8]
        [--fresh 20] [--cpu 0] [--server cymongoose|gunicorn]

The server runs in a subprocess (pinned to --cpu when given, this script to the other CPU);
the app counts the streams it has started, and the fresh requests start once min(N, threads)
have started and a second has passed (their writes are held by the clients). Prints one JSON
object: the fresh requests' latencies (p50, max, timeouts), the server's RSS growth with the
readers connected, and the context. Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

APP = '''\
STREAM = 64 << 20
CHUNK = b"s" * 65536
started = 0


def app(environ, start_response):
    global started
    if environ["PATH_INFO"] == "/started":
        body = str(started).encode()
        start_response("200 OK", [("Content-Length", str(len(body)))])
        return [body]
    if environ["PATH_INFO"] == "/hello":
        start_response("200 OK", [("Content-Length", "5")])
        return [b"hello"]
    started += 1
    start_response("200 OK", [("Content-Length", str(STREAM))])
    return (CHUNK for _ in range(STREAM // len(CHUNK)))
'''


def _get(port: int, path: str, timeout: float) -> tuple[float, bytes]:
    """(seconds from connect to the end of the answer, its body); raises on a timeout."""
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        got = bytearray()
        while chunk := sock.recv(65536):
            got += chunk
    return time.perf_counter() - start, bytes(got).partition(b"\r\n\r\n")[2]


def _wait_up(port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}")
        try:
            _get(port, "/hello", 1.0)
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("the server did not answer")


def _rss(pid: int) -> int:
    """Resident memory of process `pid`, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--readers", type=int, default=20)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--fresh", type=int, default=20)
    ap.add_argument("--cpu", type=int, default=None)
    ap.add_argument("--server", choices=("cymongoose", "gunicorn"), default="cymongoose")
    ap.add_argument("--timeout", type=float, default=30.0, help="per fresh request")
    args = ap.parse_args()
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "stream_app.py").write_text(APP)
        if args.server == "cymongoose":
            cmd = [sys.executable, "-m", "cymongoose", "stream_app:app", "--port", str(port),
                   "--threads", str(args.threads)]
        else:
            cmd = [sys.executable, "-m", "gunicorn", "-k", "gthread", "--threads",
                   str(args.threads), "-b", f"127.0.0.1:{port}", "stream_app:app"]
        if args.cpu is not None:
            cmd = ["taskset", "-c", str(args.cpu), *cmd]
            os.sched_setaffinity(0, {1 - args.cpu} if os.cpu_count() == 2 else
                                 set(range(os.cpu_count() or 1)) - {args.cpu})
        env = {k: v for k, v in os.environ.items() if not k.startswith("CYMONGOOSE_")}
        proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        readers: list[socket.socket] = []
        try:
            _wait_up(port, proc, 30)
            rss_before = _rss(proc.pid)
            for _ in range(args.readers):
                sock = socket.socket()
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.connect(("127.0.0.1", port))
                sock.sendall(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
                readers.append(sock)
            # The first `threads` streams start at once; on a server whose threads wait, the
            # rest only once a thread comes free: wait for min(readers, threads) of them.
            want = min(args.readers, args.threads)
            end = time.monotonic() + 30
            # gunicorn's threads are all held at once: its /started would wait for one too.
            while (args.server == "cymongoose"
                   and int(_get(port, "/started", 30)[1] or 0) < want):
                if time.monotonic() > end:
                    raise SystemExit("the streams did not start")
                time.sleep(0.05)
            time.sleep(1.0)  # the writes fill the kernel's buffers and stop
            rss_growth = _rss(proc.pid) - rss_before
            lat: list[float] = []
            timeouts = 0
            for _ in range(args.fresh):
                try:
                    took, body = _get(port, "/hello", args.timeout)
                    assert body == b"hello", body
                    lat.append(took)
                except TimeoutError:
                    timeouts += 1
            try:
                started = int(_get(port, "/started", args.timeout)[1] or 0)
            except TimeoutError:  # starved too
                started = -1
        finally:
            for sock in readers:
                sock.close()
            proc.terminate()
            proc.wait(30)
    print(json.dumps({
        "server": args.server, "readers": args.readers, "threads": args.threads,
        "fresh": args.fresh, "timeouts": timeouts, "streams_started": started,
        "rss_growth_mib": round(rss_growth / (1 << 20), 1),
        "p50_ms": round(statistics.median(lat) * 1000, 2) if lat else None,
        "max_ms": round(max(lat) * 1000, 2) if lat else None,
        "python": platform.python_version(), "cpu": args.cpu,
        "load": os.getloadavg()[0],
    }))


if __name__ == "__main__":
    main()
