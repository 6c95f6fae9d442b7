"""An ASGI app that awaits N round trips to a TCP echo peer per request (as an app awaits its
database: asyncpg's pattern, one outstanding request per pooled connection), on ours and on
uvicorn (uvloop + httptools): instructions per request under callgrind, and req/s with the
server's CPU from interleaved wrk runs (server on CPU 0, wrk and the peer on CPU 1).

    python tests/benchmarks/asgi_round_trips.py [--rounds 20] [--connections 64]
        [--requests 4000] [--uvicorn-python PY] [--wrk-seconds 8 --wrk-rounds 3]

--rounds 0 is a hello world. The peer is an asyncio echo server on uvloop; uvicorn runs from
--uvicorn-python (an environment with uvicorn[standard]), skipped without it. Issue 35's
figures in docs/performance.md ("Many awaits per request") come from this script.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))

BODY = b'{"message":"Hello, World!"}'
HEADERS = [(b"content-type", b"application/json"), (b"content-length", b"27")]


class _Peer(asyncio.Protocol):
    """One pooled connection to the echo peer, one question at a time."""

    def __init__(self) -> None:
        self.transport: Any = None
        self.waiter: asyncio.Future[bytes] | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(data)

    async def ask(self, question: bytes) -> bytes:
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(question)
        return await self.waiter


def make_app(rounds: int, peer_port: int, pool_size: int = 16) -> Any:
    pool: asyncio.Queue[_Peer] = asyncio.Queue()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                loop = asyncio.get_running_loop()
                for _ in range(pool_size if rounds else 0):
                    _, peer = await loop.create_connection(_Peer, "127.0.0.1", peer_port)
                    pool.put_nowait(peer)
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if rounds:
            peer = await pool.get()
            try:
                for _ in range(rounds):
                    await peer.ask(b"x" * 32)
            finally:
                pool.put_nowait(peer)
        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        await send({"type": "http.response.body", "body": BODY})

    return app


class _Echo(asyncio.Protocol):
    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.transport.write(data)


async def _echo_peer(port: int) -> None:
    server = await asyncio.get_running_loop().create_server(_Echo, "127.0.0.1", port)
    await server.serve_forever()


def serve(kind: str, port: int, rounds: int, peer_port: int) -> None:
    import uvloop

    app = make_app(rounds, peer_port)
    if kind == "ours":
        from cymongoose.asgi import serve as serve_ours

        serve_ours(app, f"http://127.0.0.1:{port}", lifespan="on")
    else:
        import uvicorn

        uvicorn.run(app, host="127.0.0.1", port=port, loop="uvloop", http="httptools",
                    lifespan="on", access_log=False, log_level="warning")
    del uvloop  # imported first so a missing uvloop fails here, not as a slower loop


def _server_argv(python: str, kind: str, port: int, rounds: int, peer_port: int) -> list[str]:
    return [python, str(HERE), "--serve", kind, "--port", str(port), "--rounds", str(rounds),
            "--peer-port", str(peer_port)]


def callgrind(python: str, kind: str, rounds: int, peer_port: int, requests: int,
              connections: int) -> float:
    """Ir per request of the server process over `requests` after a warm-up."""
    import profile_callgrind as pc
    from benchkit import contenders as ck

    port = ck.free_port()
    out = pc.OUT / "raw" / f"round-trips-{kind}-r{rounds}-c{connections}.callgrind"
    out.parent.mkdir(parents=True, exist_ok=True)
    for old in out.parent.glob(f"{out.name}*"):
        old.unlink()
    env = dict(os.environ, **(pc.symbolized_env() if kind == "ours" else {}))
    proc = subprocess.Popen(["valgrind", "--tool=callgrind", "--instr-atstart=no",
                             f"--callgrind-out-file={out}"]
                            + _server_argv(python, kind, port, rounds, peer_port),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        pc.wait_port(port, proc, 300)
        pc.client(port, max(connections, requests // 10), connections)
        subprocess.run(["callgrind_control", "--instr=on", str(proc.pid)], check=True,
                       capture_output=True)
        pc.client(port, requests, connections)
        subprocess.run(["callgrind_control", "--dump", str(proc.pid)], check=True,
                       capture_output=True)
    finally:
        pc.stop(proc)
    dump = sorted(p for p in out.parent.glob(f"{out.name}.*"))[0]
    m = re.search(r"^(?:summary|totals):\s+(\d+)", dump.read_text(errors="replace"), re.M)
    return int(m.group(1)) / requests if m else float("nan")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wrk(python: str, kind: str, rounds: int, peer_port: int, seconds: int,
        connections: int) -> tuple[float, float]:
    """req/s and the server's CPU (cores) over one wrk run, server pinned to CPU 0."""
    import profile_callgrind as pc
    from benchkit import contenders as ck

    port = ck.free_port()
    proc = subprocess.Popen(["taskset", "-c", "0"]
                            + _server_argv(python, kind, port, rounds, peer_port),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        pc.wait_port(port, proc, 60)
        argv = ["taskset", "-c", "1", "wrk", "-t1", f"-c{connections}"]
        url = f"http://127.0.0.1:{port}/"
        subprocess.run(argv + ["-d2s", url], capture_output=True, check=True)
        cpu, started = _cpu_seconds(proc.pid), time.monotonic()
        text = subprocess.run(argv + [f"-d{seconds}s", url], capture_output=True, text=True,
                              check=True).stdout
        cpu = (_cpu_seconds(proc.pid) - cpu) / (time.monotonic() - started)
    finally:
        pc.stop(proc)
    m = re.search(r"Requests/sec:\s+([\d.]+)", text)
    return (float(m.group(1)) if m else 0.0), cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--serve", choices=["ours", "uvicorn"], help=argparse.SUPPRESS)
    ap.add_argument("--echo-peer", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--peer-port", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=20, help="round trips per request")
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--requests", type=int, default=4000, help="under callgrind")
    ap.add_argument("--uvicorn-python", help="a Python with uvicorn[standard] installed")
    ap.add_argument("--wrk-seconds", type=int, default=0, help="0: no wall-clock runs")
    ap.add_argument("--wrk-rounds", type=int, default=3)
    args = ap.parse_args()
    if args.echo_peer:
        import uvloop

        uvloop.run(_echo_peer(args.port))
        return 0
    if args.serve:
        serve(args.serve, args.port, args.rounds, args.peer_port)
        return 0
    from benchkit import contenders as ck

    servers = {"ours": sys.executable}
    if args.uvicorn_python:
        servers["uvicorn"] = args.uvicorn_python
    peer_port = ck.free_port()
    peer = subprocess.Popen(["taskset", "-c", "1", sys.executable, str(HERE), "--echo-peer",
                             "--port", str(peer_port)])
    try:
        for kind, python in servers.items():
            ir = callgrind(python, kind, args.rounds, peer_port, args.requests,
                           args.connections)
            print(f"{kind}: {ir:,.0f} Ir per request ({args.rounds} round trips, "
                  f"{args.connections} connections)", flush=True)
        for n in range(args.wrk_rounds if args.wrk_seconds else 0):
            for kind, python in servers.items():
                rps, cpu = wrk(python, kind, args.rounds, peer_port, args.wrk_seconds,
                               args.connections)
                print(f"round {n} {kind}: {rps:,.0f} req/s, server CPU {cpu:.2f}, "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        peer.terminate()
        peer.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
