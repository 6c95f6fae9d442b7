"""The chunked decoder on both paths: the buffered one (the whole body in MG_EV_HTTP_MSG)
and the streamed one (`stream_body=True`, the body taken with body_read() as it arrives).
The fuzzer writes what follows a chunked POST's head, in arbitrary reads; the first byte
also picks the path. Judged against h11 as in http_request: a body we deliver is the body
h11 decodes, and what follows it is framed the same."""

from __future__ import annotations

from typing import Any

import cymongoose._mongoose as cm

from ..reference import Request, judge, normal_headers
from ..wire import LoopbackServer, split_pieces

HEAD = b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
SEEDS = [
    b"\x00\x005\r\nhello\r\n0\r\n\r\n",
    b"\x01\x005\r\nhello\r\n0\r\n\r\n",
    b"\x01\x800005;a=b;c=\"d\\\"e\"\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-T: y\r\n\r\n"
    b"GET /n HTTP/1.1\r\nHost: x\r\n\r\n",
    b"\x00\x82f\r\n0123456789abcde\r\n0\r\n\r\n",
    b"\x01\x000\r\n\r\nPOST /d HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab",
]

seen: list[Request] = []  # what the apps were given, for this input
_servers: dict[bool, LoopbackServer] = {}


def _record(msg: Any, body: bytes) -> None:
    query = msg.query_bytes
    seen.append(Request(msg.method.encode("latin-1"),
                         msg.uri_bytes + (b"?" + query if query else b""),
                         normal_headers(msg.headers_bytes()), body))


def buffered_app(conn: cm.Connection, ev: int, msg: Any) -> None:
    if ev == cm.MG_EV_HTTP_MSG:
        _record(msg, msg.body_bytes)
        conn.reply(200, b"seen")


def streamed_app(conn: cm.Connection, ev: int, msg: Any) -> None:
    if ev == cm.MG_EV_HTTP_HDRS:
        query = msg.query_bytes
        conn.userdata = [Request(msg.method.encode("latin-1"),
                                 msg.uri_bytes + (b"?" + query if query else b""),
                                 normal_headers(msg.headers_bytes()), b"")]
    if conn.userdata and ev in (cm.MG_EV_HTTP_HDRS, cm.MG_EV_READ, cm.MG_EV_POLL):
        try:
            conn.userdata.append(conn.body_read())
        except ConnectionResetError:
            conn.userdata = None  # a 413 or broken framing: the guard answers and closes
            return
        if conn.body_complete and conn.body_pending == 0:
            head, *parts = conn.userdata
            conn.userdata = None
            seen.append(Request(head.method, head.target, head.headers, b"".join(parts)))
            conn.http_begin(200, [("Content-Length", "4")])
            conn.http_write(b"seen")
            conn.http_end()


def _server(streamed: bool) -> LoopbackServer:
    if streamed not in _servers:
        _servers[streamed] = LoopbackServer(streamed_app if streamed else buffered_app,
                                            stream_body=streamed, max_body_size=65536)
    return _servers[streamed]


def one_input(data: bytes) -> None:
    if not data:
        return
    server = _server(bool(data[0] & 1))
    pieces = [HEAD, *split_pieces(data[1:])]
    seen.clear()
    reply = server.exchange(pieces)
    assert not server.errors, f"the app raised: {server.errors!r}"
    judge(b"".join(pieces), list(seen), reply.raw, reply.closed)
