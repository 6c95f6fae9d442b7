"""Runtime limits: the settings API, 413/414/431 at the configured sizes (never a reset),
large bodies within the limit received whole, 100-continue."""

from __future__ import annotations

import hashlib
import logging
import os
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from .support import Server, cm, exchange, parse_responses

DEFAULTS = {
    "max_header_count": 100, "max_header_size": 16384, "max_uri_size": 8192,
    "max_body_size": 16 * 1024 * 1024, "header_timeout_ms": 30000, "body_timeout_ms": 60000,
    "keepalive_timeout_ms": 5000, "tls_handshake_timeout_ms": 10000, "send_timeout_ms": 60000,
    "linger_timeout_ms": 5000, "linger_time_ms": 30000, "http2": True,
}


def test_defaults_are_documented_values() -> None:
    with cm.Manager() as mgr:
        assert mgr.http_limits == DEFAULTS


def test_set_http_limits_validates_all_or_nothing() -> None:
    with cm.Manager() as mgr:
        mgr.set_http_limits(max_body_size=1000, keepalive_timeout_ms=0)
        assert mgr.http_limits["max_body_size"] == 1000
        assert mgr.http_limits["keepalive_timeout_ms"] == 0
        with pytest.raises(TypeError, match="unknown HTTP limit 'max_bodysize'"):
            mgr.set_http_limits(max_bodysize=1)
        with pytest.raises(TypeError, match="max_body_size must be an int, not float"):
            mgr.set_http_limits(max_body_size=1.5)
        with pytest.raises(TypeError, match="must be an int, not bool"):
            mgr.set_http_limits(header_timeout_ms=True)
        with pytest.raises(ValueError, match="max_header_count must be between 1 and 128"):
            mgr.set_http_limits(max_header_count=129)
        with pytest.raises(ValueError, match="max_body_size"):
            mgr.set_http_limits(max_body_size=-1)
        with pytest.raises(ValueError, match="header_timeout_ms"):
            mgr.set_http_limits(header_timeout_ms=-5)
        with pytest.raises(ValueError, match="max_header_size"):
            mgr.set_http_limits(max_uri_size=10, max_header_size=10)
        # A rejected call changes nothing, not even its valid parts.
        assert mgr.http_limits == dict(DEFAULTS, max_body_size=1000, keepalive_timeout_ms=0)
    with pytest.raises(RuntimeError):
        mgr.set_http_limits(max_body_size=1)


def test_listen_limits_are_checked_before_the_socket_opens() -> None:
    with cm.Manager() as mgr:
        with pytest.raises(ValueError, match="HTTP listeners only"):
            mgr.listen("tcp://127.0.0.1:0", max_body_size=10)
        with pytest.raises(ValueError):
            mgr.listen("http://127.0.0.1:0", max_uri_size=0)
        with pytest.raises(TypeError):
            mgr.listen("http://127.0.0.1:0", max_uri=10)
        assert mgr.connections == ()
        mgr.listen("tcp://127.0.0.1:0", http=True, max_body_size=10)


def test_manager_limits_reach_later_listeners() -> None:
    with Server() as server:
        server.call(lambda: server.mgr.set_http_limits(max_uri_size=20))
        late = server.call(lambda: server.mgr.listen("http://127.0.0.1:0", server.app))
        late_port = server.call(lambda: late.local_addr[1])
        uri = b"/" + b"a" * 30
        assert _status(server.port, uri) == 200  # opened before: keeps its limits
        assert _status(late_port, uri) == 414


def _status(port: int, uri: bytes, *headers: bytes) -> int:
    data = (b"GET " + uri + b" HTTP/1.1\r\nHost: x\r\n" + b"".join(h + b"\r\n" for h in headers)
            + b"Connection: close\r\n\r\n")
    res = exchange(port, data, timeout=3)
    parsed = parse_responses(res.raw, ["GET"], res.closed)
    assert parsed.error is None and parsed.responses, res.raw[:200]
    return parsed.responses[0].status


def test_configured_head_limits() -> None:
    with Server(max_header_count=5, max_header_size=1024, max_uri_size=64) as server:
        assert _status(server.port, b"/" + b"u" * 63) == 200
        assert _status(server.port, b"/" + b"u" * 64) == 414
        four = [b"X-%d: v" % i for i in range(3)]  # + Host + Connection = 5
        assert _status(server.port, b"/", *four) == 200
        assert _status(server.port, b"/", *four, b"X-Extra: v") == 431
        assert _status(server.port, b"/", b"X-Big: " + b"v" * 900) == 200
        assert _status(server.port, b"/", b"X-Big: " + b"v" * 1000) == 431


class Recorder(Server):
    """Answers with the size and SHA-256 of each body it receives."""

    def app(self, conn: Any, ev: int, msg: Any) -> None:
        if ev == cm.MG_EV_HTTP_MSG:
            body = msg.body_bytes
            conn.reply(200, f"{len(body)} {hashlib.sha256(body).hexdigest()}")


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=20) as c:
        yield c


def test_large_bodies_within_the_limit_arrive_whole(client: httpx.Client) -> None:
    # 0.2.5 reset the connection at 3 MiB; 4 and 15 MiB are within the default 16 MiB.
    with Recorder() as server:
        url = f"http://127.0.0.1:{server.port}/upload"
        for size in (4 << 20, 15 << 20):
            body = os.urandom(size)
            r = client.post(url, content=body)
            assert r.status_code == 200
            assert r.text == f"{size} {hashlib.sha256(body).hexdigest()}"

        def pieces() -> Iterator[bytes]:
            for _ in range(64):
                yield b"c" * 65536

        r = client.post(url, content=pieces())  # no length: httpx sends it chunked
        assert r.request.headers["transfer-encoding"] == "chunked"
        assert r.text == f"{64 * 65536} {hashlib.sha256(b'c' * 64 * 65536).hexdigest()}"


def test_body_over_the_limit_is_413_not_a_reset(client: httpx.Client) -> None:
    # The client sends the whole 4 MiB before reading: the server keeps reading (and
    # discarding) after its 413 so the client sees the answer, not ECONNRESET.
    with Recorder(max_body_size=1 << 20) as server:
        url = f"http://127.0.0.1:{server.port}/upload"
        for _ in range(3):
            r = client.post(url, content=os.urandom(4 << 20))
            assert r.status_code == 413
            assert r.headers["connection"] == "close"

        def pieces() -> Iterator[bytes]:
            for _ in range(64):
                yield os.urandom(65536)

        r = client.post(url, content=pieces())
        assert r.status_code == 413
        r = client.post(url, content=b"y" * (1 << 20))  # exactly the limit
        assert r.status_code == 200


def test_expect_100_continue() -> None:
    with Recorder(max_body_size=1000) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=3) as sock:
            sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                         b"Expect: 100-continue\r\n\r\n")
            assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
            sock.sendall(b"hello")
            assert sock.recv(4096).startswith(b"HTTP/1.1 200 OK\r\n")
        # Too large: the answer is 413 at once, before any body and without a 100.
        res = exchange(server.port, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n"
                                    b"Expect: 100-continue\r\n\r\n", timeout=3)
        assert res.raw.startswith(b"HTTP/1.1 413 ") and res.closed


def test_each_refusal_is_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="cymongoose")
    with Server() as server:
        res = exchange(server.port, b"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", timeout=3)
        assert res.raw.startswith(b"HTTP/1.1 400 ")
        server.call(lambda: None)
    records = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(records) == 1
    assert records[0].name == "cymongoose" and records[0].levelno == logging.DEBUG
    assert f"127.0.0.1:{res.local_port}" in records[0].getMessage()
    assert "duplicate Host" in records[0].getMessage()
