"""HTTP/2 frames after the client's preface, in arbitrary reads, to a listener whose handler
answers every request (a reply echoing part of the body, or a chunked answer with trailers):
nghttp2's parser, the request heads and bodies the engine writes for the guard, the stream
connections and the translation of their answers, under ASan and UBSan in make fuzz.

A defect: a sanitizer report, a handler error, a reply that is not HTTP/2 frames opened by
the server's SETTINGS, a frame on a stream the client never opened, a server push, or a
server that stops serving (after each input a well-formed request on a new connection must
be answered)."""

from __future__ import annotations

from typing import Any

import hpack

from cymongoose import MG_EV_HTTP_MSG

from ..wire import LoopbackServer, split_pieces

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY = 0, 1, 2, 3, 4, 5, 6, 7
WINDOW_UPDATE, CONTINUATION = 8, 9
END_STREAM, END_HEADERS = 1, 4


def frame(kind: int, flags: int, sid: int, payload: bytes = b"") -> bytes:
    return (len(payload).to_bytes(3, "big") + bytes((kind, flags))
            + (sid & 0x7FFFFFFF).to_bytes(4, "big") + payload)


def _head(method: str, path: str, *more: tuple[str, str]) -> bytes:
    enc = hpack.Encoder()
    return bytes(enc.encode([(":method", method), (":path", path), (":scheme", "http"),
                             (":authority", "x"), *more]))


_GET = _head("GET", "/")
_POST = _head("POST", "/p", ("content-length", "5"))
_STREAM = _head("GET", "/stream", ("te", "trailers"), ("cookie", "a=1"), ("cookie", "b=2"))
SEEDS = [
    b"\x00" + frame(SETTINGS, 0, 0) + frame(HEADERS, END_STREAM | END_HEADERS, 1, _GET),
    b"\x00" + frame(SETTINGS, 0, 0) + frame(HEADERS, END_HEADERS, 1, _POST)
    + frame(DATA, END_STREAM, 1, b"hello"),
    b"\x85" + frame(SETTINGS, 0, 0, (4).to_bytes(2, "big") + (100).to_bytes(4, "big"))
    + frame(HEADERS, END_STREAM, 3, _STREAM[:5]) + frame(CONTINUATION, END_HEADERS, 3,
                                                         _STREAM[5:]),
    b"\x00" + frame(SETTINGS, 0, 0) + frame(HEADERS, END_HEADERS, 1, _head("PUT", "/u"))
    + frame(DATA, 0, 1, b"ab") + frame(RST_STREAM, 0, 1, (8).to_bytes(4, "big"))
    + frame(PING, 0, 0, b"12345678") + frame(WINDOW_UPDATE, 0, 0, (1000).to_bytes(4, "big"))
    + frame(PRIORITY, 0, 5, bytes(5)) + frame(GOAWAY, 0, 0, bytes(8)),
]


def _handler(conn: Any, ev: int, msg: Any) -> None:
    if ev != MG_EV_HTTP_MSG:
        return
    if msg.uri.startswith("/stream"):
        conn.http_begin(200, [("Content-Type", "text/plain")])
        conn.http_write(b"streamed")
        conn.http_end(trailers=[("x-done", "1")])
    else:
        conn.reply(200, msg.body_bytes[:1000])


_server: LoopbackServer | None = None


def _server_once() -> LoopbackServer:
    global _server
    if _server is None:
        _server = LoopbackServer(_handler, max_body_size=65536)
    return _server


def frames_of(data: bytes) -> list[tuple[int, int, int, int]]:
    """(type, flags, stream, length) of each whole frame in `data`, in order."""
    out = []
    i = 0
    while i + 9 <= len(data):
        n = int.from_bytes(data[i:i + 3], "big")
        if i + 9 + n > len(data):
            break
        out.append((data[i + 3], data[i + 4], int.from_bytes(data[i + 5:i + 9], "big")
                    & 0x7FFFFFFF, n))
        i += 9 + n
    return out


def judge(sent: bytes, reply: bytes) -> None:
    frames = frames_of(reply)
    assert frames and frames[0][0] == SETTINGS and frames[0][2] == 0, \
        f"the reply does not open with the server's SETTINGS: {reply[:64]!r}"
    opened = {sid for kind, _, sid, _ in frames_of(sent) if kind == HEADERS}
    for kind, _, sid, length in frames:
        assert kind != PUSH_PROMISE, "the server pushed"
        assert length <= 16384, f"a frame of {length} bytes past the default maximum"
        if kind in (HEADERS, DATA):
            assert sid in opened, f"a frame on stream {sid}, which the client never opened"


def one_input(data: bytes) -> None:
    server = _server_once()
    pieces = split_pieces(data)
    if not pieces:
        return
    pieces[0] = PREFACE + pieces[0]
    reply = server.exchange(pieces)
    assert not server.errors, f"the handler raised: {server.errors!r}"
    judge(b"".join(pieces)[len(PREFACE):], reply.raw)
    # Still serving: a request on a new connection is answered.
    check = server.exchange([PREFACE + frame(SETTINGS, 0, 0)
                             + frame(HEADERS, END_STREAM | END_HEADERS, 1, _GET)])
    assert any(kind == HEADERS and sid == 1 for kind, _, sid, _ in frames_of(check.raw)), \
        f"no answer on a new connection after the input: {check.raw[:200]!r}"
