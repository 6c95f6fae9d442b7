"""Slow and silent clients are closed within their timeout (± 1 s) while everyone else keeps
being served: header dribble (slowloris), stalled bodies, idle keep-alive, silent sockets,
stalled TLS handshakes."""

from __future__ import annotations

import itertools
import selectors
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from .support import Server, cm, get

TIMEOUT = 1.0
LIMITS = {"header_timeout_ms": 1000, "body_timeout_ms": 1000, "keepalive_timeout_ms": 1000}


@dataclass
class SlowResult:
    raw: bytes
    closed_after: float | None  # seconds from connect to the server's close
    reset: bool


def slow_client(port: int, first: bytes, pieces: Iterable[bytes], interval: float,
                limit: float = 6.0) -> SlowResult:
    """Send `first`, then one piece every `interval` s, until the server closes or `limit`
    passes; everything the server sends is collected."""
    sock = socket.create_connection(("127.0.0.1", port))
    start = time.monotonic()
    raw = b""
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    rest: Iterator[bytes] = iter(pieces)
    try:
        if first:
            sock.sendall(first)
        next_send = start + interval
        while time.monotonic() - start < limit:
            wait = max(0.0, min(next_send, start + limit) - time.monotonic())
            if sel.select(wait):
                try:
                    chunk = sock.recv(65536)
                except ConnectionResetError:
                    return SlowResult(raw, time.monotonic() - start, True)
                if not chunk:
                    return SlowResult(raw, time.monotonic() - start, False)
                raw += chunk
                continue
            if time.monotonic() >= next_send:
                piece = next(rest, None)
                if piece is not None:
                    try:
                        sock.sendall(piece)
                    except (BrokenPipeError, ConnectionResetError):
                        return SlowResult(raw, time.monotonic() - start, True)
                next_send += interval
        return SlowResult(raw, None, False)
    finally:
        sel.close()
        sock.close()


def forever(piece: bytes) -> Iterator[bytes]:
    i = 0
    while True:
        yield piece.replace(b"%d", str(i).encode())
        i += 1


def assert_on_time(result: SlowResult, timeout: float = TIMEOUT) -> None:
    assert result.closed_after is not None, "the server never closed the slow client"
    assert timeout - 0.1 <= result.closed_after <= timeout + 1.0, result.closed_after


def served_meanwhile(port: int, during: float) -> list[float]:
    """Latencies of fresh GETs made every 100 ms for `during` s (runs in a thread)."""
    latencies: list[float] = []
    end = time.monotonic() + during
    while time.monotonic() < end:
        t = time.monotonic()
        assert get(port, "/fresh", timeout=2.0)[0] == 200
        latencies.append(time.monotonic() - t)
        time.sleep(0.1)
    return latencies


def in_thread(fn: Any, *args: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn(*args)), daemon=True)
    t.start()
    return t, out


@pytest.fixture
def server() -> Iterator[Server]:
    with Server(**LIMITS) as s:
        yield s


def test_header_dribble_gets_408_on_time(server: Server) -> None:
    fresh, results = in_thread(served_meanwhile, server.port, 1.5)
    result = slow_client(server.port, b"GET / HTTP/1.1\r\nHost: x\r\n",
                         forever(b"X-%d: v\r\n"), 0.2)
    fresh.join(10)
    assert result.raw.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert_on_time(result)
    assert results and results[0] and max(results[0]) < 1.0


def test_first_request_clock_starts_at_accept(server: Server) -> None:
    # Silent for 0.6 s, then dribbling: still cut at header_timeout after connecting.
    pieces = itertools.chain([b"", b"GET / HTTP/1.1\r\n"], forever(b"X-%d: v\r\n"))
    result = slow_client(server.port, b"", pieces, 0.3)
    assert_on_time(result)


def test_silent_connection_is_closed_quietly(server: Server) -> None:
    result = slow_client(server.port, b"", [], 10)
    assert result.raw == b""
    assert_on_time(result)


def test_stalled_body_gets_408(server: Server) -> None:
    result = slow_client(server.port, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
                                      b"\r\n0123456789", [], 10)
    assert result.raw.startswith(b"HTTP/1.1 408 ")
    assert_on_time(result)


def test_slow_but_steady_body_is_served(server: Server) -> None:
    # 1 KiB per window of body_timeout is progress: 3 s in total is fine.
    result = slow_client(server.port, b"POST /s HTTP/1.1\r\nHost: x\r\n"
                                      b"Content-Length: 5120\r\n\r\n",
                         [b"a" * 1024] * 5, 0.6, limit=5.0)
    assert result.raw.startswith(b"HTTP/1.1 200 OK\r\n")
    assert result.raw.endswith(b"POST /s 5120")


def test_trickled_body_gets_408(server: Server) -> None:
    # A few bytes now and then (R-U-Dead-Yet) is not progress.
    result = slow_client(server.port, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n"
                                      b"\r\n", forever(b"a=%d&"), 0.2)
    assert result.raw.startswith(b"HTTP/1.1 408 ")
    assert_on_time(result)


def test_small_body_must_arrive_within_one_window(server: Server) -> None:
    result = slow_client(server.port, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\n",
                         [b"a"] * 6, 0.4)
    assert result.raw.startswith(b"HTTP/1.1 408 ")
    assert_on_time(result)


def test_idle_keepalive_is_closed_after_its_timeout(server: Server) -> None:
    result = slow_client(server.port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", [], 10)
    assert result.raw.startswith(b"HTTP/1.1 200 OK\r\n")
    assert_on_time(result)


def test_requests_keep_a_connection_alive(server: Server) -> None:
    req = b"GET /k HTTP/1.1\r\nHost: x\r\n\r\n"
    result = slow_client(server.port, req, [req] * 3, 0.6, limit=2.2)
    assert result.raw.count(b"HTTP/1.1 200 OK") == 4
    assert result.closed_after is None


def test_many_slow_clients_do_not_starve_others(server: Server) -> None:
    n = 100
    socks = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(n)]
    try:
        for s in socks:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        fresh, results = in_thread(served_meanwhile, server.port, 1.5)
        closed: dict[int, float] = {}
        start = time.monotonic()
        for s in socks:
            s.setblocking(False)
        while len(closed) < n and time.monotonic() - start < 4:
            for i, s in enumerate(socks):
                if i in closed:
                    continue
                try:
                    data = s.recv(4096)
                except BlockingIOError:
                    try:
                        s.send(b"X-A: b\r\n")
                    except OSError:
                        closed[i] = time.monotonic() - start
                    continue
                except OSError:
                    data = b""
                if not data or data.startswith(b"HTTP/1.1 408"):
                    closed[i] = time.monotonic() - start
            time.sleep(0.1)
        fresh.join(10)
        assert len(closed) == n
        assert max(closed.values()) <= TIMEOUT + 1.0
        assert results and results[0] and max(results[0]) < 1.0
    finally:
        for s in socks:
            s.close()


def test_timeouts_can_be_disabled() -> None:
    with Server(header_timeout_ms=0, keepalive_timeout_ms=0) as server:
        result = slow_client(server.port, b"", [], 10, limit=1.5)
        assert result.closed_after is None
        result = slow_client(server.port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", [], 10,
                             limit=1.5)
        assert result.raw.startswith(b"HTTP/1.1 200") and result.closed_after is None


def test_tls_handshake_timeout(tmp_path: Any) -> None:
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    opts = cm.TlsOpts(cert=cert.cert_chain_pems[0].bytes(),
                      key=cert.private_key_pem.bytes())

    def app(conn: Any, ev: int, msg: Any) -> None:
        if ev == cm.MG_EV_ACCEPT:
            conn.tls_init(opts)
        elif ev == cm.MG_EV_HTTP_MSG:
            conn.reply(200, b"tls")

    with Server(app, url="https://127.0.0.1:0", tls_handshake_timeout_ms=1000,
                header_timeout_ms=5000) as server:
        result = slow_client(server.port, b"", [], 10)
        assert not server.errors
        assert result.raw == b""
        assert_on_time(result)
        # A partial ClientHello is no better.
        result = slow_client(server.port, b"\x16\x03\x01\x02\x00\x01", [], 10)
        assert_on_time(result)
