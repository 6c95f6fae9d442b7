"""Routes for core HTTP tests: a handler dispatching by URI to small route functions, on
buffered (MG_EV_HTTP_MSG) or streamed (MG_EV_HTTP_HDRS) listeners, and raw-socket helpers
that check responses byte for byte."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest

from cymongoose import MG_EV_HTTP_HDRS, MG_EV_HTTP_MSG, Connection, Manager

from .ports import HOST

Route = Callable[[Connection, Any], None]

# Both listener kinds answer the same way: buffered ones from MG_EV_HTTP_MSG, streamed ones
# from MG_EV_HTTP_HDRS.
LISTENERS = pytest.mark.parametrize("stream", [False, True], ids=["buffered", "stream"])


class Routes:
    """Handler calling routes[path](conn, msg) on each request; an exception a route raises
    is recorded (by type name) and the request is answered 599 so the test can go on."""

    def __init__(self, stream: bool, routes: dict[str, Route]) -> None:
        self.event = MG_EV_HTTP_HDRS if stream else MG_EV_HTTP_MSG
        self.routes = routes
        self.errors: list[str] = []
        self.manager: Manager | None = None  # the serving Manager, once started

    def __call__(self, conn: Connection, ev: int, msg: Any) -> None:
        if ev != self.event:
            return
        try:
            self.routes[msg.uri](conn, msg)
        except Exception as exc:
            self.errors.append(type(exc).__name__)
            if not conn.response_started:
                conn.http_begin(599, [("Content-Length", "0")])
            conn.http_end()


def request(path: str, method: str = "GET", version: str = "1.1",
            headers: bytes = b"") -> bytes:
    host = b"Host: t\r\n" if version == "1.1" else b""
    return b"%s %s HTTP/%s\r\n%s%s\r\n" % (method.encode(), path.encode(), version.encode(),
                                           host, headers)


def read_exactly(sock: socket.socket, n: int) -> bytes:
    got = b""
    while len(got) < n:
        chunk = sock.recv(n - len(got))
        if not chunk:
            break
        got += chunk
    return got


def read_to_eof(sock: socket.socket) -> bytes:
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except ConnectionResetError:
        pass
    return got


def exchange(port: int, *requests: bytes, responses: list[bytes]) -> socket.socket:
    """Send each request on one connection and check its response byte for byte; returns
    the (still open) socket."""
    s = socket.create_connection((HOST, port), timeout=5)
    for req, want in zip(requests, responses, strict=True):
        s.sendall(req)
        assert read_exactly(s, len(want)) == want
    return s
