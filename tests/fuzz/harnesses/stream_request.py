"""Whole requests, in arbitrary reads, to a listener that streams bodies (`stream_body=True`:
MG_EV_HTTP_HDRS, then body_read() as the body arrives): the streamed path with every
framing a client can choose (Content-Length, chunked, none, pipelined, Expect), judged
against h11 as http_request judges the buffered path."""

from __future__ import annotations

from ..reference import judge
from ..wire import LoopbackServer, split_pieces
from . import chunked_body

H = b"Host: x\r\n"
SEEDS = [
    b"\x00POST /p HTTP/1.1\r\n" + H + b"Content-Length: 5\r\n\r\nhelloGET / HTTP/1.1\r\n" + H
    + b"\r\n",
    b"\x82POST /c HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n"
    b"5;x=y\r\nhello\r\n0\r\nT: v\r\n\r\n",
    b"\x00PUT /e HTTP/1.1\r\n" + H + b"Expect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
    b"\x80GET /a?b HTTP/1.0\r\n\r\n",
    b"\x00POST /big HTTP/1.1\r\n" + H + b"Content-Length: 70000\r\n\r\n" + b"x" * 100,
]

_server: LoopbackServer | None = None


def _server_once() -> LoopbackServer:
    global _server
    if _server is None:
        _server = LoopbackServer(chunked_body.streamed_app, stream_body=True,
                                 max_body_size=65536)
    return _server


def one_input(data: bytes) -> None:
    server = _server_once()
    pieces = split_pieces(data)
    chunked_body.seen.clear()
    reply = server.exchange(pieces)
    assert not server.errors, f"the app raised: {server.errors!r}"
    judge(b"".join(pieces), list(chunked_body.seen), reply.raw, reply.closed)
