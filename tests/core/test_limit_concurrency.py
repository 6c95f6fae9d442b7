"""Manager.limit_concurrency: at the limit, the guard answers the next complete request with
503 + Retry-After before any Python code runs; idle keep-alive connections do not count;
the 503 is reported to refusal_handler and counted as refused."""

from __future__ import annotations

import http.client
import socket
from typing import Any

import pytest
from support.poll_thread import ServerThread
from support.routes import read_to_eof
from support.waiting import wait_for

from cymongoose import MG_EV_HTTP_MSG, Connection, Manager

pytestmark = pytest.mark.timeout(30)


class Deferring:
    """A raw handler that answers /fast at once and holds /slow until release()."""

    def __init__(self) -> None:
        self.held: list[Connection] = []
        self.calls = 0

    def __call__(self, conn: Connection, ev: int, data: Any) -> None:
        if ev != MG_EV_HTTP_MSG:
            return
        self.calls += 1
        if data.uri == "/slow":
            self.held.append(conn)
        else:
            conn.reply(200, b"fast")

    def release(self) -> None:
        for conn in self.held:
            conn.reply(200, b"slow")
        self.held.clear()


@pytest.fixture
def limited(server_thread: Any) -> tuple[ServerThread, int, Deferring, list[int]]:
    handler = Deferring()
    refused: list[int] = []
    st = server_thread(handler)
    st.manager.limit_concurrency = 2
    st.manager.refusal_handler = lambda conn, status, *rest: refused.append(status)
    port = st.listen()
    st.start()
    return st, port, handler, refused


def test_over_the_limit_gets_503(limited: tuple[ServerThread, int, Deferring, list[int]]
                                 ) -> None:
    st, port, handler, refused = limited
    idle = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    idle.request("GET", "/fast")
    assert idle.getresponse().read() == b"fast"  # then idle, kept alive
    slow = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(2)]
    for s in slow:
        s.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
    wait_for(lambda: st.call(lambda: st.manager.metrics()["in_flight"]) == 2, 5.0,
             'st.call(lambda: st.manager.metrics()["in_flight"]) == 2')
    calls = handler.calls
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = read_to_eof(s)
    head = answer.split(b"\r\n\r\n")[0].split(b"\r\n")
    assert head[0] == b"HTTP/1.1 503 Service Unavailable"
    assert b"Retry-After: 1" in head and b"Connection: close" in head
    assert handler.calls == calls  # no handler saw it
    assert refused == [503]
    st.call(handler.release)
    for s in slow:
        assert read_to_eof_after(s, b"slow")
        s.close()
    # The idle keep-alive connection never counted: it is served again.
    idle.request("GET", "/fast")
    assert idle.getresponse().read() == b"fast"
    idle.close()
    wait_for(lambda: st.call(lambda: st.manager.metrics()["in_flight"]) == 0, 5.0,
             'st.call(lambda: st.manager.metrics()["in_flight"]) == 0')
    m = st.call(st.manager.metrics)
    assert m["requests"] == {200: 4, 503: 1}
    assert m["refused"] == {503: 1}


def read_to_eof_after(s: socket.socket, tail: bytes) -> bool:
    """Read one keep-alive response whose body ends with `tail`."""
    got = b""
    while not got.endswith(tail):
        chunk = s.recv(4096)
        if not chunk:
            break
        got += chunk
    return got.endswith(tail)


def test_zero_is_no_limit_and_negative_is_refused() -> None:
    with Manager() as mgr:
        assert mgr.limit_concurrency == 0
        mgr.limit_concurrency = 5
        assert mgr.limit_concurrency == 5
        with pytest.raises(ValueError):
            mgr.limit_concurrency = -1
        with pytest.raises(TypeError):
            mgr.limit_concurrency = True
        mgr.limit_concurrency = 0
