"""A raw TCP echo server: every byte received is sent back once.

    python examples/tcp_echo.py --port 9000
    printf 'hello\\n' | nc -q1 127.0.0.1 9000

`recv_data(consume=True)` takes the bytes out of the receive buffer as it copies them, so
each chunk is echoed exactly once. Stops on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import cymongoose as cm


def handler(conn: cm.Connection, ev: int, data: Any) -> None:
    if ev == cm.MG_EV_ACCEPT:
        print(f"accepted {conn.remote_addr}", flush=True)
    elif ev == cm.MG_EV_READ:
        conn.send(conn.recv_data(consume=True))
    elif ev == cm.MG_EV_CLOSE and not conn.is_listening:
        print(f"closed connection {conn.id}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=9000, help="TCP port (0 = any free)")
    args = parser.parse_args(argv)
    mgr = cm.Manager(handler)
    try:
        listener = mgr.listen(f"tcp://{args.host}:{args.port}")
    except RuntimeError as exc:
        mgr.close()
        print(exc, file=sys.stderr)
        return 1
    port = listener.local_addr[1] if listener.local_addr else args.port
    print(f"echo server listening on tcp://{args.host}:{port}", flush=True)
    mgr.run()  # until SIGINT/SIGTERM; closes the manager
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
