"""Driving a Manager from another loop: `Manager.fileno()` (Mongoose's epoll descriptor) and
`Manager.next_poll_ms()`, and `Connection.ws_accept()`, the WebSocket handshake answered
after its MG_EV_HTTP_HDRS event is over (what an ASGI app's websocket.accept needs)."""

from __future__ import annotations

import select
import socket
import time
from typing import Any

import pytest
from support.backend import needs_epoll
from support.poll_thread import ServerThread
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from cymongoose import (
    MG_EV_CLOSE,
    MG_EV_HTTP_HDRS,
    MG_EV_WS_MSG,
    MG_EV_WS_OPEN,
    WEBSOCKET_OP_TEXT,
    Connection,
    Manager,
)

pytestmark = pytest.mark.timeout(30)


@needs_epoll("fileno() is -1 without an epoll set (LoopDriver then watches each socket, "
             "tests/core/test_socket_watches.py)")
def test_fileno_becomes_readable_when_a_client_connects(manager: Manager) -> None:
    fd = manager.fileno()
    assert fd >= 0
    port = manager.listen("http://127.0.0.1:0").local_addr[1]
    assert select.select([fd], [], [], 0)[0] == []
    with socket.create_connection(("127.0.0.1", port)):
        assert select.select([fd], [], [], 2)[0] == [fd]
        manager.poll(0)  # accepted: the listener is no longer ready
        assert len(manager.connections) == 2


def test_fileno_is_minus_one_once_closed() -> None:
    mgr = Manager()
    mgr.close()
    assert mgr.fileno() == -1
    assert mgr.next_poll_ms(50) == 50


def test_next_poll_ms_follows_timers_and_closing_connections(manager: Manager) -> None:
    assert manager.next_poll_ms(100) == 100
    manager.timer_add(30, lambda: None)
    assert 0 <= manager.next_poll_ms(100) <= 30
    conn = manager.listen("tcp://127.0.0.1:0")
    conn.close()
    assert manager.next_poll_ms(100) == 0  # the close waits for the next poll
    manager.poll(0)
    with pytest.raises(ValueError):
        manager.next_poll_ms(-1)


def _deferred_server(decide: Any) -> tuple[ServerThread, int, list[Connection]]:
    """A stream_body listener that keeps each WebSocket request and lets `decide(conn, key)`
    answer it from a timer, after MG_EV_HTTP_HDRS has returned."""
    pending: list[tuple[Connection, bytes]] = []
    messages: list[Connection] = []

    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_HTTP_HDRS:
            key = data.header("Sec-WebSocket-Key")
            pending.append((conn, key.encode()))
        elif ev == MG_EV_WS_MSG:
            conn.ws_send(data.data, WEBSOCKET_OP_TEXT)
        elif ev in (MG_EV_WS_OPEN, MG_EV_CLOSE):
            messages.append(conn)

    def later() -> None:
        while pending:
            conn, key = pending.pop()
            decide(conn, key)

    st = ServerThread()
    st.manager.timer_add(20, later, repeat=True)
    port = st.listen("http://127.0.0.1:0", handler, stream_body=True)
    st.start()
    return st, port, messages


def test_ws_accept_after_the_event_with_subprotocol_and_headers() -> None:
    def accept(conn: Connection, key: bytes) -> None:
        time.sleep(0.05)  # well after MG_EV_HTTP_HDRS
        conn.ws_accept(key, [(b"Sec-WebSocket-Protocol", b"v2"), ("X-Extra", "yes")])

    st, port, _ = _deferred_server(accept)
    try:
        with connect(f"ws://127.0.0.1:{port}/", subprotocols=["v1", "v2"],
                     open_timeout=5) as ws:
            assert ws.subprotocol == "v2"
            assert ws.response.headers["X-Extra"] == "yes"
            ws.send("echo me")
            assert ws.recv(5) == "echo me"
    finally:
        st.stop()


def test_ws_accept_refuses_bad_headers_and_can_answer_http_instead() -> None:
    errors: list[BaseException] = []

    def refuse(conn: Connection, key: bytes) -> None:
        for bad in ([(b"X-Evil", b"a\r\nb")], [(b"Connection", b"close")]):
            try:
                conn.ws_accept(key, bad)
            except ValueError as exc:
                errors.append(exc)
        conn.http_respond(403, [(b"Content-Type", b"text/plain")], b"no")
        try:
            conn.ws_accept(key)  # the request is answered: nothing left to accept
        except RuntimeError as exc:
            errors.append(exc)

    st, port, _ = _deferred_server(refuse)
    try:
        with pytest.raises(InvalidStatus) as info:
            connect(f"ws://127.0.0.1:{port}/", open_timeout=5)
        assert info.value.response.status_code == 403
    finally:
        st.stop()
    assert [type(e) for e in errors] == [ValueError, ValueError, RuntimeError]


def test_ws_accept_without_a_pending_request(manager: Manager) -> None:
    conn = manager.listen("tcp://127.0.0.1:0")
    with pytest.raises(RuntimeError, match="no request"):
        conn.ws_accept(b"dGhlIHNhbXBsZSBub25jZQ==")
