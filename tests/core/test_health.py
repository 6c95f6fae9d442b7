"""Manager.health_path and Manager.ready: the guard answers a GET or HEAD of the health path
itself (200 "ok" when ready, 503 "starting" / "draining" otherwise, Cache-Control: no-store,
keep-alive), never calling the handler, even at limit_concurrency."""

from __future__ import annotations

import http.client
import socket
from typing import Any

import pytest
from support.poll_thread import ServerThread
from support.waiting import wait_for

from cymongoose import MG_EV_HTTP_MSG, Connection, Manager

pytestmark = pytest.mark.timeout(30)


class Handler:
    def __init__(self) -> None:
        self.uris: list[str] = []
        self.held: list[Connection] = []

    def __call__(self, conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            self.uris.append(data.uri)
            if data.uri == "/slow":
                self.held.append(conn)
            else:
                conn.reply(200, b"app")


@pytest.fixture
def probed(server_thread: Any) -> tuple[ServerThread, int, Handler, list[tuple[int, str]]]:
    handler = Handler()
    reported: list[tuple[int, str]] = []
    st = server_thread(handler)
    st.manager.health_path = "/healthz"
    st.manager.refusal_handler = lambda conn, status, reason, line, size: reported.append(
        (status, line))
    port = st.listen()
    st.start()
    return st, port, handler, reported


def _ask(conn: http.client.HTTPConnection, method: str, path: str
         ) -> tuple[int, bytes, http.client.HTTPResponse]:
    conn.request(method, path)
    r = conn.getresponse()
    return r.status, r.read(), r


def test_states_methods_and_query(probed: tuple[ServerThread, int, Handler,
                                                list[tuple[int, str]]]) -> None:
    st, port, handler, reported = probed
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    status, body, r = _ask(conn, "GET", "/healthz")
    assert (status, body) == (503, b"starting\n")
    assert r.getheader("Cache-Control") == "no-store"
    st.call(lambda: setattr(st.manager, "ready", True))
    assert _ask(conn, "GET", "/healthz")[:2] == (200, b"ok\n")
    assert _ask(conn, "GET", "/healthz?probe=1")[:2] == (200, b"ok\n")
    status, body, r = _ask(conn, "HEAD", "/healthz")
    assert (status, body, r.getheader("Content-Length")) == (200, b"", "3")
    # Anything else is the app's: another path, a longer one, another method.
    assert _ask(conn, "GET", "/healthz/x")[:2] == (200, b"app")
    assert _ask(conn, "POST", "/healthz")[:2] == (200, b"app")
    st.call(lambda: setattr(st.manager, "ready", False))
    assert _ask(conn, "GET", "/healthz")[:2] == (503, b"draining\n")
    conn.close()  # every answer above came on this one keep-alive connection
    assert handler.uris == ["/healthz/x", "/healthz"]
    assert [s for s, _ in reported] == [503, 200, 200, 200, 503]
    assert reported[2] == (200, "GET /healthz?probe=1 HTTP/1.1")
    wait_for(lambda: st.call(st.manager.metrics)["connections_open"] == 0, 5.0,
             'st.call(st.manager.metrics)["connections_open"] == 0')
    m = st.call(st.manager.metrics)
    assert m["requests"] == {200: 5, 503: 2}
    assert m["refused"] == {}  # a probe's 503 is its answer, not a refusal
    assert sum(m["duration_buckets"]) == 2  # only the app's requests


def test_answered_at_the_limit(probed: tuple[ServerThread, int, Handler,
                                             list[tuple[int, str]]]) -> None:
    st, port, handler, _ = probed
    st.call(lambda: setattr(st.manager, "limit_concurrency", 1))
    st.call(lambda: setattr(st.manager, "ready", True))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as slow:
        slow.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        wait_for(lambda: st.call(st.manager.metrics)["in_flight"] == 1, 5.0,
                 'st.call(st.manager.metrics)["in_flight"] == 1')
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        assert _ask(conn, "GET", "/healthz")[:2] == (200, b"ok\n")
        assert _ask(conn, "GET", "/healthz")[:2] == (200, b"ok\n")
        assert _ask(conn, "GET", "/other")[0] == 503  # the limit holds for the rest
        conn.close()
    assert handler.uris == ["/slow"]


def test_setting_validation() -> None:
    with Manager() as mgr:
        assert (mgr.health_path, mgr.ready) == (None, False)
        mgr.health_path = "/ready"
        assert mgr.health_path == "/ready"
        for bad in ("ready", "/a b", "/a?b", ""):
            with pytest.raises(ValueError):
                mgr.health_path = bad
        with pytest.raises(TypeError):
            mgr.health_path = b"/x"  # type: ignore[assignment]
        mgr.health_path = None
        mgr.ready = True
        assert mgr.ready
