"""1 MiB WebSocket echo: `WsMessage.data_view` (zero-copy) against `WsMessage.data` (a copy).

A cymongoose echo server runs in a subprocess pinned to one CPU, once per mode; a websockets
client (on the other CPU) sends `--messages` binary messages of `--size` bytes one at a time
and checks each echo. Reported per mode: the server's CPU time per echo (the number the copy
changes; on-CPU time from /proc/PID/schedstat) and the round-trip rate, in interleaved rounds.

    python tests/benchmarks/ws_view_echo.py [--messages 200] [--rounds 3] [--size 1048576]

The server side (run with `--serve MODE PORT`) answers each message with
`conn.ws_send(msg.data_view)` or `conn.ws_send(msg.data)`: the view is copied once, into
the send buffer; `data` is copied into a bytes object first.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path


def serve(mode: str, port: int) -> None:
    from cymongoose import MG_EV_HTTP_MSG, MG_EV_WS_MSG, WEBSOCKET_OP_BINARY, Manager, handles

    @handles(MG_EV_HTTP_MSG, MG_EV_WS_MSG)
    def handler(conn, ev, data):
        if ev == MG_EV_HTTP_MSG:
            conn.ws_upgrade(data)
        elif mode == "view":
            conn.ws_send(data.data_view, WEBSOCKET_OP_BINARY)
        else:
            conn.ws_send(data.data, WEBSOCKET_OP_BINARY)

    with Manager(handler) as mgr:
        mgr.listen(f"http://127.0.0.1:{port}")
        print("ready", flush=True)
        mgr.run()


def cpu_seconds(pid: int) -> float:
    # schedstat's first field: nanoseconds on CPU (utime/stime in /proc/pid/stat count in
    # 10 ms ticks, too coarse for a per-echo figure).
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9


def measure(mode: str, args: argparse.Namespace, payload: bytes) -> tuple[float, float]:
    from websockets.sync.client import connect

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, __file__, "--serve", mode, str(port)]
    if args.server_cpu is not None:
        cmd = ["taskset", "-c", str(args.server_cpu), *cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        with connect(f"ws://127.0.0.1:{port}/", max_size=None, compression=None) as ws:
            ws.send(payload)  # warm-up: buffers grow to the message size once
            assert ws.recv(timeout=10) == payload
            cpu0, t0 = cpu_seconds(proc.pid), time.perf_counter()
            for _ in range(args.messages):
                ws.send(payload)
                if ws.recv(timeout=10) != payload:
                    raise SystemExit(f"{mode}: wrong echo")
            wall, cpu = time.perf_counter() - t0, cpu_seconds(proc.pid) - cpu0
        return cpu / args.messages * 1e6, args.messages / wall
    finally:
        proc.terminate()
        proc.wait(10)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--serve", nargs=2, metavar=("MODE", "PORT"), help=argparse.SUPPRESS)
    p.add_argument("--messages", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--size", type=int, default=1 << 20)
    p.add_argument("--server-cpu", type=int, default=0)
    p.add_argument("--client-cpu", type=int, default=1)
    args = p.parse_args(argv)
    if args.serve:
        serve(args.serve[0], int(args.serve[1]))
        return 0
    if (os.cpu_count() or 1) < 2:
        args.server_cpu = args.client_cpu = None
    if args.client_cpu is not None:
        os.sched_setaffinity(0, {args.client_cpu})
    payload = os.urandom(args.size)
    results: dict[str, list[tuple[float, float]]] = {"copy": [], "view": []}
    for rnd in range(1, args.rounds + 1):
        for mode in ("copy", "view"):
            cpu_us, rate = measure(mode, args, payload)
            results[mode].append((cpu_us, rate))
            print(f"round {rnd} {mode:4}: server CPU {cpu_us:7.0f} us/echo, "
                  f"{rate:6.1f} echoes/s", flush=True)
    med = {m: sorted(v)[len(v) // 2] for m, v in results.items()}
    print(f"median over {args.rounds} rounds of {args.messages} x {args.size} B: "
          f"copy {med['copy'][0]:.0f} us/echo, view {med['view'][0]:.0f} us/echo "
          f"(views: {med['view'][0] / med['copy'][0] - 1:+.0%} server CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
