"""The response head renderer with arbitrary fields from an app: status, reason phrase,
header names and values (bytes or latin-1 str), a HeaderBlock, and the body, through
http_respond(), http_begin()/http_write()/http_end() and reply(). Either the call raises
ValueError, TypeError or UnicodeError, and the server answers 500 instead, or a strict
client (h11) reads exactly the status and fields the app gave, and the body, with nothing
injected: the rule the WSGI and ASGI servers rely on, since both render through it."""

from __future__ import annotations

from typing import Any

import cymongoose._mongoose as cm

from ..reference import parse_replies
from ..wire import LoopbackServer

# Byte 0: the call (bits 0-1), str fields (bit 2), a raw status (bit 3); byte 1: the
# status; then NUL-separated: the reason, name, value, name, value, ..., the body.
SEEDS = [
    b"\x00\x32OK\x00X-A\x00b\x00Set-Cookie\x00c=d; Path=/\x00body",
    b"\x01\x94\x00Content-Type\x00text/html\x00Connection\x00close\x00<p>",
    b"\x02\x04Weird Reason\x00X-Tab\x00a\tb\x00X-Obs\x00\xe9\xff\x00x",
    b"\x03\x32\x00X-Bad\x00a\r\nInjected: 1\x00",
    b"\x06\x32\x00Content-Length\x005\x00hello",
    b"\x00\x32\x00Bad Name\x00v\x00",
    b"\x08\x00\x00X\x00v\x00",
]
_answer: list[Any] = []  # what the app gave: (status, reason, fields) once it was accepted
_server: LoopbackServer | None = None


def _app(conn: cm.Connection, ev: int, msg: Any) -> None:
    if ev != cm.MG_EV_HTTP_MSG:
        return
    mode, status, reason, pairs, body, as_str = _answer.pop()
    try:
        if mode == 0:
            conn.http_respond(status, pairs, body, reason=reason)
        elif mode == 1:
            block = cm.HeaderBlock(pairs[1:])
            conn.http_respond(status, pairs[:1], body, more_headers=block)
        elif mode == 2:
            conn.http_begin(status, pairs, reason=reason)
            try:
                conn.http_write(body)
            except ValueError:  # past its Content-Length: refused, nothing of it sent
                body = b""
            if not conn.http_end():  # shorter than its Content-Length: closed, by design
                _answer.append("cut short")
                return
        else:
            conn.reply(status, body, dict(pairs))
    except (ValueError, TypeError, UnicodeError):
        assert not conn.response_started
        _answer.append(None)
        conn.reply(500, b"refused")
        return
    _answer.append((status, pairs if mode != 3 else list(dict(pairs).items()), body,
                    "utf-8" if mode == 3 else "latin-1"))


def _server_once() -> LoopbackServer:
    global _server
    if _server is None:
        _server = LoopbackServer(_app)
    return _server


def _b(item: bytes | str, encoding: str) -> bytes:
    # reply() sends str as UTF-8, as 0.2.x did; http_begin() and http_respond() as latin-1,
    # the octets a WSGI app's native strings stand for (PEP 3333).
    return item.encode(encoding) if isinstance(item, str) else item


def one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    mode, as_str = data[0] & 3, bool(data[0] & 4)
    status = 100 + data[1] * 2 if data[0] & 8 == 0 else data[1]  # 100..610, or nonsense
    reason_raw, *rest = data[2:].split(b"\0", 64)
    body = rest.pop() if rest else b""
    pairs: list[tuple[Any, Any]] = [(rest[i], rest[i + 1]) for i in range(0, len(rest) - 1, 2)]
    if as_str or mode == 3:  # reply() takes a dict of str
        pairs = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in pairs]
    reason = reason_raw.decode("latin-1") or None
    server = _server_once()
    _answer[:] = [(mode, status, reason, pairs, body, as_str)]
    reply = server.exchange([b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"])
    assert not server.errors, f"the app raised: {server.errors!r}"
    given = _answer[0]
    if given == "cut short":  # the close tells the client the body is incomplete
        assert reply.closed and reply.raw.startswith(b"HTTP/1.1 "), reply
        return
    responses = parse_replies(reply.raw, [b"GET"], reply.closed)
    assert responses, reply.raw[:300]
    got = responses[-1]
    if given is None:
        assert got.status == 500 and got.body == b"refused"
        return
    status, pairs, body, encoding = given
    if 100 <= status < 200:
        return  # informational: the app's own fields are not the final response's
    assert got.status == status, (got.status, status)
    names = [n.lower() for n, _ in got.headers]
    wanted = [(_b(n, encoding).lower(), _b(v, encoding).strip(b" \t")) for n, v in pairs]
    rendered = [(n.lower(), v) for n, v in got.headers]
    it = iter(rendered)
    for field in wanted:  # in order, each exactly once where the app put it
        if field[0] == b"content-length" and (status in (204, 304) or encoding == "utf-8"):
            continue  # reply() computes its own from the body
        assert field in it, (field, rendered)
    assert names.count(b"content-length") + names.count(b"transfer-encoding") <= 1
    if status not in (204, 304):
        assert got.body == body, (got.body[:100], body[:100])
