"""Manager.refusal_handler: told of every request the HTTP guard answered itself (what an
access log needs for them), with the connection, status, reason, raw request line and body
size; its exceptions follow the handlers' rules and serving goes on."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from support.poll_thread import ServerThread
from support.routes import read_to_eof
from support.waiting import wait_for

from cymongoose import MG_EV_HTTP_MSG, Connection, Manager

pytestmark = pytest.mark.timeout(30)

Refusal = tuple[str, int, str, str, int]


def _answer(conn: Connection, ev: int, data: Any) -> None:
    if ev == MG_EV_HTTP_MSG:
        conn.reply(200, b"ok")


def _exchange(port: int, payload: bytes) -> bytes:
    """Send raw bytes, read until the server closes (refusals close)."""
    with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
        s.sendall(payload)
        return read_to_eof(s)


@pytest.fixture
def refusals(server_thread: Any) -> tuple[ServerThread, int, list[Refusal]]:
    seen: list[Refusal] = []

    def on_refusal(conn: Connection, status: int, reason: str, line: str, size: int) -> None:
        addr = conn.remote_addr
        seen.append((addr[0] if addr else "?", status, reason, line, size))

    st = server_thread(_answer)
    st.manager.refusal_handler = on_refusal
    port = st.listen(max_uri_size=64, max_header_count=4, header_timeout_ms=300)
    st.start()
    return st, port, seen


@pytest.mark.parametrize(("payload", "status", "line", "size"), [
    (b"GET /a HTTP/1.1\r\nHost: a b\r\n\r\n", 400, "GET /a HTTP/1.1", 12),
    (b"HEAD /a HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400, "HEAD /a HTTP/1.1", 0),
    (b"GET /" + b"u" * 100 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414,
     "GET /" + "u" * 100 + " HTTP/1.1", 13),
    (b"GET /h HTTP/1.1\r\nHost: x\r\n" + b"X-A: 1\r\n" * 6 + b"\r\n", 431,
     "GET /h HTTP/1.1", 32),
    (b"\x01\xe9junk\r\n\r\n", 400, "\x01\xe9junk", 12),
    (b"GET /slow HTTP/1.1\r\nHost: x\r\n", 408, "GET /slow HTTP/1.1", 16),
], ids=["bad-host", "head-no-body", "uri-too-long", "too-many-headers", "junk", "timeout"])
def test_each_refusal_is_reported(refusals: tuple[ServerThread, int, list[Refusal]],
                                  payload: bytes, status: int, line: str, size: int) -> None:
    st, port, seen = refusals
    answer = _exchange(port, payload)
    assert answer.startswith(b"HTTP/1.1 %d " % status), answer
    wait_for(lambda: len(seen) == 1, 5.0, "len(seen) == 1")
    client, got_status, reason, got_line, got_size = seen[0]
    assert (client, got_status, got_line, got_size) == ("127.0.0.1", status, line, size)
    assert reason  # the guard's own words, e.g. "duplicate Host"
    assert len(answer) - answer.index(b"\r\n\r\n") - 4 == size  # what was sent


def test_answered_requests_are_not_reported(
        refusals: tuple[ServerThread, int, list[Refusal]]) -> None:
    st, port, seen = refusals
    assert _exchange(port, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                     ).endswith(b"ok")
    assert seen == []


def test_a_failing_refusal_handler_goes_to_the_error_handler(server_thread: Any) -> None:
    errors: list[BaseException] = []
    st = server_thread(_answer, error_handler=errors.append)

    def broken(*args: Any) -> None:
        raise ValueError("broken refusal handler")

    st.manager.refusal_handler = broken
    port = st.listen()
    st.start()
    assert _exchange(port, b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n").startswith(
        b"HTTP/1.1 400 ")
    wait_for(lambda: len(errors) == 1, 5.0, "len(errors) == 1")
    assert str(errors[0]) == "broken refusal handler"
    # The loop goes on: the next client is served.
    assert _exchange(port, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                     ).endswith(b"ok")


def test_refusal_handler_must_be_callable_or_none() -> None:
    with Manager() as mgr:
        assert mgr.refusal_handler is None
        with pytest.raises(TypeError, match="refusal_handler must be a callable"):
            mgr.refusal_handler = "log"  # type: ignore[assignment]
        mgr.refusal_handler = print
        assert mgr.refusal_handler is print
        mgr.refusal_handler = None
        assert mgr.refusal_handler is None
