"""Idle keep-alive connections wait off the loop's list (vendor/mongoose/build_fixes.py
PARKING), so thousands of them cost no work per iteration; whatever concerns one of them
still reaches it: its next request, its keep-alive timeout, a close, a send or a wakeup from
the app, the Manager's own close."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from support.backend import needs_epoll
from support.poll_thread import ServerThread
from support.waiting import wait_for

from cymongoose import MG_EV_HTTP_MSG, MG_EV_WAKEUP, Connection, handles

pytestmark = [pytest.mark.timeout(60), needs_epoll(
    "the PARKING fix parks idle connections in the epoll iotest only; poll() is given every "
    "socket on each wait, so nothing is parked")]

REQUEST = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n"


@handles(MG_EV_HTTP_MSG, MG_EV_WAKEUP)
def hello(conn: Connection, ev: int, data: Any) -> None:
    if ev == MG_EV_HTTP_MSG:
        conn.reply(200, b"ok")
    else:
        conn.send(b"woken:" + data)


def ask(sock: socket.socket) -> bytes:
    """One request on a kept-alive socket; the whole answer (it ends with its 2-byte body)."""
    sock.sendall(REQUEST)
    got = b""
    while not got.endswith(b"\r\n\r\nok"):
        chunk = sock.recv(4096)
        assert chunk, f"closed after {got!r}"
        got += chunk
    return got


def read_until_closed(sock: socket.socket, timeout: float) -> bytes:
    sock.settimeout(timeout)
    got = b""
    while chunk := sock.recv(4096):
        got += chunk
    return got


@pytest.fixture
def served(server_thread: Any) -> Iterator[tuple[ServerThread, int]]:
    st = server_thread(hello, enable_wakeup=True)
    port = st.listen("http://127.0.0.1:0", keepalive_timeout_ms=30_000)
    st.start()
    yield st, port


def idle_clients(port: int, count: int) -> list[socket.socket]:
    socks = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        assert b" 200 " in ask(sock)
        socks.append(sock)
    return socks


def parked(st: ServerThread) -> int:
    return int(st.call(st.manager._parked))


def server_side(st: ServerThread) -> list[Connection]:
    return [c for c in st.call(lambda: st.manager.connections) if not c.is_listening]


def test_idle_connections_are_parked_and_each_answers_its_next_request(
        served: tuple[ServerThread, int]) -> None:
    st, port = served
    socks = idle_clients(port, 200)
    try:
        wait_for(lambda: parked(st) == 200, 10, "parked(st) == 200")
        # Manager.connections still lists them, in creation order.
        conns = server_side(st)
        assert len(conns) == 200
        assert [c.id for c in conns] == sorted(c.id for c in conns)
        for sock in socks:
            assert b" 200 " in ask(sock)
        wait_for(lambda: parked(st) == 200, 10, "parked(st) == 200")  # and back to waiting
    finally:
        for sock in socks:
            sock.close()
    wait_for(lambda: parked(st) == 0 and not server_side(st), 10,
             "parked(st) == 0 and not server_side(st)")


def test_a_handler_that_takes_every_poll_is_never_parked(server_thread: Any) -> None:
    polls: list[int] = []

    def every_event(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            conn.reply(200, b"ok")
        polls.append(ev)

    st = server_thread(every_event)
    port = st.listen("http://127.0.0.1:0")
    st.start()
    socks = idle_clients(port, 5)
    try:
        seen = len(polls)
        wait_for(lambda: len(polls) > seen + 50, 10,
                 "len(polls) > seen + 50")  # MG_EV_POLL keeps coming
        assert parked(st) == 0
    finally:
        for sock in socks:
            sock.close()


def test_keepalive_timeout_closes_a_parked_connection(server_thread: Any) -> None:
    st = server_thread(hello)
    port = st.listen("http://127.0.0.1:0", keepalive_timeout_ms=400)
    st.start()
    sock = idle_clients(port, 1)[0]
    answered = time.monotonic()
    try:
        wait_for(lambda: parked(st) == 1, 5, "parked(st) == 1")
        assert read_until_closed(sock, 10) == b""
        waited = time.monotonic() - answered
        assert 0.3 <= waited < 5, waited  # at its deadline, not before, and not forgotten
        wait_for(lambda: parked(st) == 0 and not server_side(st), 5,
                 "parked(st) == 0 and not server_side(st)")
    finally:
        sock.close()


def test_close_send_and_wakeup_reach_parked_connections(
        served: tuple[ServerThread, int]) -> None:
    st, port = served
    socks = idle_clients(port, 3)
    try:
        wait_for(lambda: parked(st) == 3, 10, "parked(st) == 3")
        first, second, third = server_side(st)
        st.call(first.close)
        assert read_until_closed(socks[0], 5) == b""
        st.call(lambda: second.send(b"pushed"))
        socks[1].settimeout(5)
        assert socks[1].recv(100) == b"pushed"
        assert st.manager.wakeup(third.id, b"hi")
        socks[2].settimeout(5)
        assert socks[2].recv(100) == b"woken:hi"
        # Still served, and parked again once idle.
        assert b" 200 " in ask(socks[1])
        wait_for(lambda: parked(st) == 2, 10, "parked(st) == 2")
    finally:
        for sock in socks:
            sock.close()


def test_manager_close_closes_parked_connections(served: tuple[ServerThread, int]) -> None:
    st, port = served
    socks = idle_clients(port, 50)
    try:
        wait_for(lambda: parked(st) == 50, 10, "parked(st) == 50")
        st.stop()  # Manager.close(): every parked connection is closed too
        for sock in socks:
            assert read_until_closed(sock, 5) == b""
    finally:
        for sock in socks:
            sock.close()
