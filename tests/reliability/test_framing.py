"""Response framing: HEAD never carries a body on any path, pipelined requests are answered
in order (also when answered later), Connection: close and HTTP/1.0 are honoured."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from .support import Server, cm, exchange, parse_responses


def test_head_reply_has_no_body_but_get_length() -> None:
    def app(conn: Any, ev: int, msg: Any) -> None:
        if ev == cm.MG_EV_HTTP_MSG:
            conn.reply(200, b"x" * 1234)

    with Server(app, keepalive_timeout_ms=300) as server:
        res = exchange(server.port, b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n"
                                    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        parsed = parse_responses(res.raw, ["HEAD", "GET"], res.closed)
        assert parsed.error is None and parsed.leftover == b""
        head, get = parsed.responses
        assert head.body == b"" and head.headers["content-length"] == "1234"
        assert get.body == b"x" * 1234


@pytest.fixture
def www(tmp_path: Path) -> Path:
    (tmp_path / "file.txt").write_bytes(b"file body\n" * 100)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_bytes(b"a")
    (tmp_path / "big.bin").write_bytes(os.urandom(1 << 20))
    return tmp_path


@pytest.mark.parametrize("path", ["/file.txt", "/missing.txt", "/sub/"])
def test_head_from_serve_dir_has_no_body(www: Path, path: str) -> None:
    # Mongoose's own 404 page and directory listing write a body even for HEAD; the guard
    # removes it (the pipelined GET after it shows the framing stayed intact).
    def app(conn: Any, ev: int, msg: Any) -> None:
        if ev == cm.MG_EV_HTTP_MSG:
            conn.serve_dir(msg, str(www), directory_listing=True)

    with Server(app, keepalive_timeout_ms=300) as server:
        data = (f"HEAD {path} HTTP/1.1\r\nHost: x\r\n\r\n"
                f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").encode()
        res = exchange(server.port, data)
        parsed = parse_responses(res.raw, ["HEAD", "GET"], res.closed)
        assert parsed.error is None and parsed.leftover == b"", res.raw[:400]
        head, get = parsed.responses
        assert head.status == get.status
        assert head.body == b""
        assert get.body != b""


def test_head_with_chunked_response_has_no_body() -> None:
    def app(conn: Any, ev: int, msg: Any) -> None:
        if ev == cm.MG_EV_HTTP_MSG:
            conn.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            conn.http_chunk(b"hello")
            conn.http_chunk(b"")

    with Server(app, keepalive_timeout_ms=300) as server:
        res = exchange(server.port, b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n"
                                    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        parsed = parse_responses(res.raw, ["HEAD", "GET"], res.closed)
        assert parsed.error is None and parsed.leftover == b""
        assert [r.body for r in parsed.responses] == [b"", b"hello"]


def test_serve_file_pipelined_and_connection_close(www: Path) -> None:
    # A file bigger than the socket buffers is sent by Mongoose's file sender over several
    # polls; the requests pipelined behind it wait and are answered in order, and a
    # Connection: close request closes only after its file is complete.
    big = (www / "big.bin").read_bytes()

    def app(conn: Any, ev: int, msg: Any) -> None:
        if ev == cm.MG_EV_HTTP_MSG:
            conn.serve_dir(msg, str(www))

    with Server(app) as server:
        data = (b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n"
                b"GET /file.txt HTTP/1.1\r\nHost: x\r\n\r\n"
                b"GET /big.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                b"GET /never HTTP/1.1\r\nHost: x\r\n\r\n")
        res = exchange(server.port, data, timeout=10)
        assert res.closed
        parsed = parse_responses(res.raw, ["GET"] * 4, res.closed)
        assert parsed.error is None and parsed.leftover == b""
        bodies = [r.body for r in parsed.responses]
        assert bodies == [big, b"file body\n" * 100, big]
        assert parsed.responses[2].headers["connection"] == "close"


def test_pipelined_async_answers_stay_in_order() -> None:
    # /slow is answered from a timer 100 ms later; the requests behind it wait for it.
    def app(conn: Any, ev: int, msg: Any) -> None:
        if ev != cm.MG_EV_HTTP_MSG:
            return
        uri = msg.uri
        if uri.startswith("/slow"):
            server.mgr.timer_add(100, lambda: conn.reply(200, uri))
        else:
            conn.reply(200, uri)

    server = Server(app, keepalive_timeout_ms=500)
    with server:
        paths = ["/slow1", "/fast1", "/slow2", "/fast2", "/fast3", "/slow3"]
        data = b"".join(f"GET {p} HTTP/1.1\r\nHost: x\r\n\r\n".encode() for p in paths)
        res = exchange(server.port, data, until=lambda raw: raw.count(b"HTTP/1.1 200") == 6)
        parsed = parse_responses(res.raw, ["GET"] * 6, res.closed)
        assert parsed.error is None
        assert [r.body.decode() for r in parsed.responses] == paths


def test_connection_close_with_async_answer() -> None:
    def app(conn: Any, ev: int, msg: Any) -> None:
        if ev == cm.MG_EV_HTTP_MSG:
            server.mgr.timer_add(50, lambda: conn.reply(200, b"late"))

    server = Server(app, keepalive_timeout_ms=5000)
    with server:
        res = exchange(server.port, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                       timeout=3)
        assert res.closed and res.elapsed < 1.0
        parsed = parse_responses(res.raw, ["GET"], res.closed)
        assert [r.body for r in parsed.responses] == [b"late"]
        assert parsed.responses[0].headers["connection"] == "close"


def test_http10_closes_unless_keep_alive() -> None:
    with Server(keepalive_timeout_ms=5000) as server:
        res = exchange(server.port, b"GET /a HTTP/1.0\r\n\r\n", timeout=3)
        assert res.closed and res.elapsed < 1.0
        parsed = parse_responses(res.raw, ["GET"], res.closed)
        assert parsed.responses[0].headers["connection"] == "close"

        sock = socket.create_connection(("127.0.0.1", server.port), timeout=3)
        with sock:
            for path in (b"/1", b"/2"):
                sock.sendall(b"GET " + path + b" HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
                raw = b""
                while not raw.endswith(b"GET " + path + b" 0"):
                    chunk = sock.recv(4096)
                    assert chunk, "closed a keep-alive HTTP/1.0 connection"
                    raw += chunk
                assert b"\r\nConnection: keep-alive\r\n" in raw


def test_handler_connection_close_header_closes() -> None:
    def app(conn: Any, ev: int, msg: Any) -> None:
        if ev == cm.MG_EV_HTTP_MSG:
            conn.reply(200, b"bye", headers={"Connection": "close"})

    with Server(app, keepalive_timeout_ms=5000) as server:
        res = exchange(server.port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
                                    b"GET /2 HTTP/1.1\r\nHost: x\r\n\r\n", timeout=3)
        assert res.closed and res.elapsed < 1.0
        parsed = parse_responses(res.raw, ["GET", "GET"], res.closed)
        assert [r.body for r in parsed.responses] == [b"bye"]
        assert res.raw.count(b"Connection") == 1


def test_large_response_outlives_keepalive_timeout() -> None:
    # The keep-alive clock starts once the response is written out, so a slow reader of a
    # big response is not cut off by it.
    body = os.urandom(8 << 20)

    def app(conn: Any, ev: int, msg: Any) -> None:
        if ev == cm.MG_EV_HTTP_MSG:
            conn.reply(200, body)

    with Server(app, keepalive_timeout_ms=300) as server:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        with sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            raw = b""
            started = time.monotonic()
            while b"\r\n\r\n" not in raw or len(raw.partition(b"\r\n\r\n")[2]) < len(body):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                raw += chunk
                if time.monotonic() - started < 1.0:
                    time.sleep(0.01)  # read slowly for longer than the keep-alive timeout
            assert time.monotonic() - started > 0.6
        assert raw.partition(b"\r\n\r\n")[2] == body


def test_handler_exception_gets_500_through_the_guard() -> None:
    def app(conn: Any, ev: int, msg: Any) -> None:
        if ev == cm.MG_EV_HTTP_MSG:
            raise RuntimeError("boom")

    with Server(app) as server:
        res = exchange(server.port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", timeout=3)
        assert res.raw.startswith(b"HTTP/1.1 500 ") and res.closed
        assert len(server.errors) == 1


def test_websocket_upgrade_leaves_http() -> None:
    def app(conn: Any, ev: int, msg: Any) -> None:
        if ev == cm.MG_EV_HTTP_MSG:
            conn.ws_upgrade(msg)
        elif ev == cm.MG_EV_WS_MSG:
            conn.ws_send(msg.data, cm.WEBSOCKET_OP_BINARY)

    with Server(app, keepalive_timeout_ms=300) as server:
        key = b"dGhlIHNhbXBsZSBub25jZQ=="
        res = exchange(server.port, b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                       b"Connection: Upgrade\r\nSec-WebSocket-Key: " + key +
                       b"\r\nSec-WebSocket-Version: 13\r\n\r\n"
                       # a masked binary frame "hi", pipelined behind the upgrade
                       b"\x82\x82\x00\x00\x00\x00hi",
                       timeout=1.5, until=lambda raw: raw.endswith(b"hi"))
        assert not server.errors
        assert res.raw.startswith(b"HTTP/1.1 101 ")
        # No keep-alive timeout once the connection is a WebSocket.
        assert not res.closed
        assert res.raw.endswith(b"\x82\x02hi")
