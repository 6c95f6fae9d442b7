"""The request parser and guard, whole requests in arbitrary reads, judged against h11.

Whatever our server delivers to the app, h11 must read from the same bytes as the same
request (method, target, headers, body); every request delivered gets its answer, and the
reply is valid HTTP/1.1 for a strict client. The app also builds the WSGI environ and the
ASGI scope of each request, which must hold the types PEP 3333 and the ASGI spec require."""

from __future__ import annotations

from typing import Any

import cymongoose._mongoose as cm

from ..reference import Request, judge, normal_headers
from ..wire import LoopbackServer, split_pieces

H = b"Host: x\r\n"
SEEDS = [
    b"\x00GET / HTTP/1.1\r\n" + H + b"\r\n",
    b"\x83GET /a?b=c HTTP/1.1\r\n" + H + b"Connection: keep-alive\r\n\r\nGET /d HTTP/1.0\r\n\r\n",
    b"\x00POST /p HTTP/1.1\r\n" + H + b"Content-Length: 5\r\n\r\nhelloGET / HTTP/1.1\r\n" + H
    + b"\r\n",
    b"\x81POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n"
    b"5;x=y\r\nhello\r\n0\r\nT: v\r\n\r\n",
    b"\x00OPTIONS * HTTP/1.1\r\n" + H + b"Expect: 100-continue\r\nContent-Length: 1\r\n\r\nx",
    b"\x00GET http://example.com:80/p?q HTTP/1.1\r\n" + H + b"Connection: a, close\r\n\r\n",
    b"\x00CONNECT example.com:443 HTTP/1.1\r\n" + H + b"\r\n",
    b"\x00GET /%41%zz HTTP/1.1\r\n" + H + b"X: \x80\xff\r\nConnection: close\r\n\r\n",
]

_seen: list[Request] = []
_server: LoopbackServer | None = None


def _check_environ(environ: dict[str, Any], method: bytes) -> None:
    assert environ["REQUEST_METHOD"] == method.decode("latin-1")
    for key, value in environ.items():
        assert isinstance(key, str)
        if key.isupper() and not key.startswith("wsgi."):
            assert isinstance(value, str), (key, value)
            value.encode("latin-1")  # PEP 3333: native strings hold bytes as latin-1


def _check_scope(scope: dict[str, Any], method: bytes) -> None:
    assert scope["method"] == method.decode("ascii").upper() or scope["method"] == \
        method.decode("ascii")
    assert isinstance(scope["path"], str) and isinstance(scope["raw_path"], bytes)
    assert isinstance(scope["query_string"], bytes)
    for name, value in scope["headers"]:
        assert isinstance(name, bytes) and isinstance(value, bytes)
        assert name == name.lower(), name


def _app(conn: cm.Connection, ev: int, msg: Any) -> None:
    if ev != cm.MG_EV_HTTP_MSG:
        return
    method = msg.method.encode("latin-1")
    query = msg.query_bytes
    target = msg.uri_bytes + (b"?" + query if query else b"")
    _seen.append(Request(method, target, normal_headers(msg.headers_bytes()), msg.body_bytes))
    _check_environ(msg.wsgi_environ({}, conn), method)
    _check_scope(msg.asgi_scope({"type": "http"}, conn, {}), method)
    conn.reply(200, b"seen")


def _server_once() -> LoopbackServer:
    global _server
    if _server is None:
        _server = LoopbackServer(_app, max_body_size=65536)
    return _server


def one_input(data: bytes) -> None:
    server = _server_once()
    pieces = split_pieces(data)
    _seen.clear()
    reply = server.exchange(pieces)
    assert not server.errors, f"the app raised: {server.errors!r}"
    judge(b"".join(pieces), list(_seen), reply.raw, reply.closed)
