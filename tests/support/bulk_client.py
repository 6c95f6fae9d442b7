"""Bulk HTTP clients meant to run in their own process (`python -m support.bulk_client`), so
that the RSS of the process serving them is measured alone: a big streamed upload and a slow
reader of a big streamed response. Each prints one JSON line with what it saw."""

from __future__ import annotations

import argparse
import hashlib
import json
import socket
import time
from typing import Any

import h11

from .patterns import pattern_chunks


def _connect(port: int, timeout: float) -> tuple[socket.socket, h11.Connection]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return sock, h11.Connection(h11.CLIENT)


def _receive(sock: socket.socket, conn: h11.Connection, on_data: Any = None) -> dict[str, Any]:
    status = 0
    body = b""
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(sock.recv(1 << 20))
        elif isinstance(event, h11.Response):
            status = event.status_code
        elif isinstance(event, h11.Data):
            if on_data is None:
                body += bytes(event.data)
            else:
                on_data(bytes(event.data))
        elif isinstance(event, h11.EndOfMessage):
            return {"status": status, "body": body.decode("latin-1")}


def upload(port: int, target: str, size: int, chunked: bool, timeout: float) -> dict[str, Any]:
    """POST `size` pattern bytes, produced by a generator, 256 KiB per send."""
    sock, conn = _connect(port, timeout)
    with sock:
        headers = [("Host", f"127.0.0.1:{port}"), ("Content-Type", "application/octet-stream")]
        headers.append(("Transfer-Encoding", "chunked") if chunked
                       else ("Content-Length", str(size)))
        sock.sendall(conn.send(h11.Request(method="POST", target=target, headers=headers)))
        h = hashlib.sha256()
        start = time.monotonic()
        for piece in pattern_chunks(size, 256 * 1024):
            h.update(piece)
            sock.sendall(conn.send(h11.Data(data=piece)))
        sock.sendall(conn.send(h11.EndOfMessage()))
        result = _receive(sock, conn)
        result.update(sent_sha256=h.hexdigest(), seconds=time.monotonic() - start)
        return result


def slow_read(port: int, target: str, pause: float, recv_size: int,
              timeout: float) -> dict[str, Any]:
    """GET `target`, read the first MiB, stop reading for `pause` seconds (the server must
    hold back rather than buffer), then read the rest; report length and sha256."""
    sock, conn = _connect(port, timeout)
    with sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.sendall(conn.send(h11.Request(method="GET", target=target,
                                           headers=[("Host", f"127.0.0.1:{port}")])))
        sock.sendall(conn.send(h11.EndOfMessage()))
        h = hashlib.sha256()
        got = 0
        paused = False

        def on_data(data: bytes) -> None:
            nonlocal got, paused
            h.update(data)
            got += len(data)
            if not paused and got >= 1 << 20:
                paused = True
                print(json.dumps({"paused_at": got}), flush=True)
                time.sleep(pause)

        start = time.monotonic()
        result = _receive(sock, conn, on_data)
        result.update(length=got, sha256=h.hexdigest(), seconds=time.monotonic() - start)
        return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["upload", "slow_read"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--size", type=int, default=0)
    parser.add_argument("--chunked", action="store_true")
    parser.add_argument("--pause", type=float, default=2.0)
    parser.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args()
    if args.mode == "upload":
        result = upload(args.port, args.target, args.size, args.chunked, args.timeout)
    else:
        result = slow_read(args.port, args.target, args.pause, 1 << 20, args.timeout)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
