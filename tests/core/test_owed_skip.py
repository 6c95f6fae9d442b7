"""A connection whose request its handler holds (the response still owed, as while an ASGI
app awaits its database) is left out of the loop's MG_EV_POLL walk while nothing is buffered
either way (http_guard.pxi _maybe_skip_owed); whatever concerns it still reaches it: the
response written later, the client's next bytes, the client leaving, a close from the app."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from support.poll_thread import ServerThread
from support.waiting import wait_for

from cymongoose import MG_EV_CLOSE, MG_EV_HTTP_MSG, Connection, handles

pytestmark = pytest.mark.timeout(60)

REQUEST = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n"


class Holder:
    """A server whose handler answers nothing itself: the test answers from the poll
    thread (ServerThread.call), after the event has returned."""

    def __init__(self, server_thread: Any) -> None:
        self.owed: list[Connection] = []
        self.closed: list[int] = []

        @handles(MG_EV_HTTP_MSG, MG_EV_CLOSE)
        def hold(conn: Connection, ev: int, data: Any) -> None:
            if ev == MG_EV_HTTP_MSG:
                self.owed.append(conn)
            else:
                self.closed.append(conn.id)

        self.st: ServerThread = server_thread(hold)
        self.port = self.st.listen("http://127.0.0.1:0")
        self.st.start()

    def skipped(self) -> int:
        return int(self.st.call(self.st.manager._skipped))

    def answer(self, body: bytes) -> None:
        """Answer the oldest request held."""
        def respond() -> None:
            self.owed.pop(0).http_respond(200, [(b"Content-Type", b"text/plain")], body)
        self.st.call(respond)

    def client(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)


def read_answer(sock: socket.socket, body: bytes) -> bytes:
    got = b""
    while not got.endswith(b"\r\n\r\n" + body):
        chunk = sock.recv(4096)
        assert chunk, f"closed after {got!r}"
        got += chunk
    return got


def test_owed_responses_are_skipped_then_written_and_the_connections_serve_on(
        server_thread: Any) -> None:
    h = Holder(server_thread)
    socks = [h.client() for _ in range(8)]
    try:
        for sock in socks:
            sock.sendall(REQUEST)
        wait_for(lambda: h.skipped() == 8, 10, "h.skipped() == 8")
        for round_ in (b"one", b"two"):
            for _ in socks:  # in the order held, which need not be the clients' order
                h.answer(round_)
            for sock in socks:
                assert b" 200 " in read_answer(sock, round_)
            # Answered: none is skipped as owed any more. The next request is held again.
            assert len(h.owed) == 0
            for sock in socks:
                sock.sendall(REQUEST)
            wait_for(lambda: h.skipped() == 8, 10, "h.skipped() == 8")
    finally:
        for sock in socks:
            sock.close()


def test_a_request_arriving_behind_a_skipped_one_is_answered_after_it(
        server_thread: Any) -> None:
    h = Holder(server_thread)
    with h.client() as sock:
        sock.sendall(REQUEST)
        wait_for(lambda: h.skipped() == 1, 10, "h.skipped() == 1")
        sock.sendall(REQUEST)  # pipelined: read although the connection was skipped
        wait_for(lambda: h.st.call(lambda: h.owed[0].recv_len) > 0, 10,
                 "the second request buffered")
        h.answer(b"first")
        wait_for(lambda: len(h.owed) == 1, 10, "len(h.owed) == 1")  # the second, delivered
        h.answer(b"second")
        got = read_answer(sock, b"second")
        assert got.index(b"first") < got.index(b"second")


def test_a_client_leaving_and_a_close_from_the_app_reach_skipped_connections(
        server_thread: Any) -> None:
    h = Holder(server_thread)
    leaving, closed_by_app = h.client(), h.client()
    try:
        leaving.sendall(REQUEST)
        wait_for(lambda: len(h.owed) == 1, 10, "len(h.owed) == 1")
        closed_by_app.sendall(REQUEST)
        wait_for(lambda: h.skipped() == 2, 10, "h.skipped() == 2")
        leaving_id = h.owed[0].id
        leaving.close()
        # Half-closed peers are kept until what they are owed is written: answer it.
        wait_for(lambda: h.skipped() == 1, 10, "h.skipped() == 1")
        h.answer(b"late")
        wait_for(lambda: leaving_id in h.closed, 10, "leaving_id in h.closed")
        app_side = h.owed[0]
        h.st.call(app_side.close)
        closed_by_app.settimeout(10)
        assert closed_by_app.recv(4096) == b""
        wait_for(lambda: len(h.closed) == 2, 10, "len(h.closed) == 2")
    finally:
        leaving.close()
        closed_by_app.close()
