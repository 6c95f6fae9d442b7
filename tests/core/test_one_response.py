"""One response per request (issue 33, item 16): a second response start for the same
request raises RuntimeError instead of putting a second response on the wire (which the
client reads as the answer to its next request), and nothing starts after close(). The
client is a raw socket reading everything the server sent, pipelined requests included."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest
from support.ports import HOST
from support.routes import read_to_eof
from support.waiting import wait_for

from cymongoose import MG_EV_HTTP_HDRS, MG_EV_HTTP_MSG, Connection

pytestmark = pytest.mark.timeout(30)

Start = Callable[[Connection, Any], None]


def _file(tmp: Any) -> str:
    path = tmp / "f.txt"
    path.write_bytes(b"file")
    return str(path)


def starts(tmp: Any) -> dict[str, Start]:
    f = _file(tmp)
    return {
        "reply": lambda conn, msg: conn.reply(200, b"one"),
        "reply_json": lambda conn, msg: conn.reply_json({"n": 1}),
        "http_respond": lambda conn, msg: conn.http_respond(200, None, b"one"),
        "http_begin": lambda conn, msg: (conn.http_begin(200, [("Content-Length", "3")]),
                                         conn.http_write(b"one"), conn.http_end()),
        "serve_file": lambda conn, msg: conn.serve_file(msg, f),
        "serve_dir": lambda conn, msg: conn.serve_dir(msg, str(tmp)),
    }


def _serve(server_thread: Any, handler: Any, stream: bool = False) -> int:
    st = server_thread(handler)
    port = st.listen(stream_body=stream)
    st.start()
    return int(port)


def _talk(port: int, payload: bytes) -> bytes:
    with socket.create_connection((HOST, port), timeout=10) as s:
        s.sendall(payload)
        return read_to_eof(s)


PIPELINED = (b"GET /f.txt HTTP/1.1\r\nHost: t\r\n\r\n"
             b"GET /f.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")


@pytest.mark.parametrize("second", ["reply", "reply_json", "http_respond", "http_begin",
                                    "serve_file", "serve_dir"])
@pytest.mark.parametrize("first", ["reply", "http_respond", "http_begin", "serve_file"])
def test_a_second_response_for_one_request_raises_and_sends_nothing(
        server_thread: Any, tmp_path: Any, first: str, second: str) -> None:
    ways = starts(tmp_path)
    raised: list[str] = []

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            ways[first](conn, msg)
            try:
                ways[second](conn, msg)
            except RuntimeError as exc:
                raised.append(str(exc))

    port = _serve(server_thread, handler)
    wire = _talk(port, PIPELINED)
    # Two pipelined requests, two responses: 0.2.x sent four (three for reply() twice).
    assert wire.count(b"HTTP/1.1 ") == 2, wire
    assert len(raised) == 2
    assert all("already answered" in m or "http_begin()" in m for m in raised), raised


def test_streamed_listener_refuses_a_second_reply_too(server_thread: Any) -> None:
    raised: list[str] = []

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_HDRS:
            conn.reply(200, b"one")
            try:
                conn.reply(200, b"two")
            except RuntimeError as exc:
                raised.append(str(exc))

    port = _serve(server_thread, handler, stream=True)
    wire = _talk(port, PIPELINED)
    assert wire.count(b"HTTP/1.1 200") == 2 and b"two" not in wire
    assert len(raised) == 2 and "reply(): this request was already answered" in raised[0]


def test_reply_after_close_raises(server_thread: Any) -> None:
    raised: list[str] = []

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            conn.close()
            for call in (lambda: conn.reply(200, b"late"), lambda: conn.reply_json({}),
                         lambda: conn.http_begin(200)):
                try:
                    call()
                except RuntimeError as exc:
                    raised.append(str(exc))

    port = _serve(server_thread, handler)
    assert _talk(port, b"GET / HTTP/1.1\r\nHost: t\r\n\r\n") == b""
    assert len(raised) == 3 and all("close() was already called" in m for m in raised)


def test_each_pipelined_request_still_gets_its_own_reply_later(server_thread: Any) -> None:
    # Keep-alive and pipelining are untouched: one reply per request, even from a timer
    # after the handler returned.
    st = server_thread()

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            uri = msg.uri
            st.manager.timer_add(1, lambda: conn.reply(200, uri.encode()))

    port = st.listen(handler=handler)
    st.start()
    wire = _talk(port, b"GET /a HTTP/1.1\r\nHost: t\r\n\r\n" + PIPELINED.replace(
        b"/f.txt", b"/b"))
    assert wire.count(b"HTTP/1.1 200") == 3
    assert wire.index(b"\r\n\r\n/a") < wire.index(b"\r\n\r\n/b")


def test_a_reply_once_the_request_is_answered_raises_from_a_timer(
        server_thread: Any) -> None:
    st = server_thread()
    raised: list[str] = []

    def late(conn: Connection) -> None:
        try:
            conn.reply(200, b"late")
        except RuntimeError as exc:
            raised.append(str(exc))

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            conn.reply(200, b"on time")
            st.manager.timer_add(1, lambda: late(conn))

    port = st.listen(handler=handler)
    st.start()
    with socket.create_connection((HOST, port), timeout=10) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        got = b""
        while b"on time" not in got:
            got += s.recv(4096)
        # The timer's reply is refused: the client, asking again, gets its own answer.
        wait_for(lambda: raised, 10, "the timer's late reply to be refused")
        s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        got += read_to_eof(s)
    assert got.count(b"HTTP/1.1 200") == 2 and b"late" not in got
    assert raised and "no request is waiting" in raised[0]


def test_a_wrong_status_type_names_the_argument(server_thread: Any) -> None:
    messages: list[str] = []

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            for call in (lambda: conn.reply("200", b"x"),  # type: ignore[arg-type]
                         lambda: conn.reply_json({}, "200"),  # type: ignore[arg-type]
                         lambda: conn.http_begin(2.5),  # type: ignore[arg-type]
                         lambda: conn.http_respond(None)):  # type: ignore[arg-type]
                try:
                    call()
                except TypeError as exc:
                    messages.append(str(exc))
            conn.reply(200, b"fine")

    port = _serve(server_thread, handler)
    wire = _talk(port, b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    assert wire.startswith(b"HTTP/1.1 200") and wire.endswith(b"fine")
    assert messages == ["status_code must be an int, not str"] * 2 + [
        "status_code must be an int, not float", "status_code must be an int, not NoneType"]


def test_other_integer_arguments_name_themselves_too(server_thread: Any, tmp_path: Any) -> None:
    st = server_thread()
    messages: list[str] = []
    with pytest.raises(TypeError, match=r"^milliseconds must be an int, not str$"):
        st.manager.timer_add("10", lambda: None)  # type: ignore[arg-type]
    path = tmp_path / "f.bin"
    path.write_bytes(b"abc")

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            conn.http_begin(200, [("Content-Length", "3")])
            with open(path, "rb") as f:
                for kwargs in ({"offset": "0"}, {"count": 1.5}):
                    try:
                        conn.http_sendfile(f.fileno(), **kwargs)  # type: ignore[arg-type]
                    except TypeError as exc:
                        messages.append(str(exc))
                try:
                    conn.http_sendfile(str(f.fileno()))  # type: ignore[arg-type]
                except TypeError as exc:
                    messages.append(str(exc))
                conn.http_sendfile(f.fileno())
            conn.http_end()

    port = st.listen(handler=handler)
    st.start()
    wire = _talk(port, b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    assert wire.startswith(b"HTTP/1.1 200") and wire.endswith(b"abc"), wire
    assert messages == ["offset must be an int, not str", "count must be an int, not float",
                        "fd must be an int, not str"]
