"""Responses written piecewise: Connection.http_begin()/http_write()/http_sendfile()/
http_end(). Framing exactly as the request and headers require, misuse refused before a byte
is written, keep-alive and pipelining kept, and responses finished later from other threads."""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from support.http_client import HttpConnection
from support.routes import LISTENERS, Route, exchange, read_to_eof, request
from support.waiting import wait_for

from cymongoose import Connection, Manager

pytestmark = pytest.mark.timeout(30)

def write_parts(*parts: Any, length: int | None = None) -> Route:
    def route(conn: Connection, msg: Any) -> None:
        headers = [("X-Kind", "parts")]
        if length is not None:
            headers.insert(0, ("Content-Length", str(length)))
        conn.http_begin(200, headers)
        for part in parts:
            conn.http_write(part)
        assert conn.http_end() is True
    return route


HELLO = write_parts(b"hello", bytearray(b" "), memoryview(b"world"), b"", length=11)
CHUNKED = write_parts(b"hello", b"", bytearray(b" "), memoryview(b"world!!"))
HELLO_RESP = b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\nX-Kind: parts\r\n\r\nhello world"
CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nX-Kind: parts\r\nTransfer-Encoding: chunked\r\n"
CHUNKED_BODY = b"5\r\nhello\r\n1\r\n \r\n7\r\nworld!!\r\n0\r\n\r\n"


@LISTENERS
def test_content_length_framing_is_exact_and_keep_alive_goes_on(
        serve: Any, stream: bool) -> None:
    port, h = serve({"/": HELLO}, stream)
    with exchange(port, request("/"), request("/"), responses=[HELLO_RESP, HELLO_RESP]):
        pass
    assert h.errors == []


@LISTENERS
def test_without_content_length_http11_is_chunked(serve: Any, stream: bool) -> None:
    port, h = serve({"/": CHUNKED}, stream)
    # Empty writes send nothing: an empty chunk would end the body early.
    want = CHUNKED_HEAD + b"\r\n" + CHUNKED_BODY
    with exchange(port, request("/"), request("/"), responses=[want, want]):
        pass
    assert h.errors == []


@LISTENERS
@pytest.mark.parametrize("conn_header", [b"", b"Connection: keep-alive\r\n"],
                         ids=["plain", "keep-alive-asked"])
def test_without_content_length_http10_is_close_delimited(
        serve: Any, stream: bool, conn_header: bytes) -> None:
    port, h = serve({"/": CHUNKED}, stream)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(request("/", version="1.0", headers=conn_header))
        # Only the close can end this body, whatever the client asked.
        assert read_to_eof(s) == (b"HTTP/1.1 200 OK\r\nX-Kind: parts\r\nConnection: close"
                                  b"\r\n\r\nhello world!!")
    assert h.errors == []


@LISTENERS
def test_http10_keep_alive_with_content_length_stays_open(serve: Any, stream: bool) -> None:
    port, _ = serve({"/": HELLO}, stream)
    req = request("/", version="1.0", headers=b"Connection: keep-alive\r\n")
    want = HELLO_RESP.replace(b"\r\n\r\n", b"\r\nConnection: keep-alive\r\n\r\n")
    with exchange(port, req, req, responses=[want, want]):
        pass


@LISTENERS
def test_client_connection_close_is_honoured(serve: Any, stream: bool) -> None:
    port, _ = serve({"/cl": HELLO, "/chunked": CHUNKED}, stream)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(request("/cl", headers=b"Connection: close\r\n"))
        assert read_to_eof(s) == HELLO_RESP.replace(b"\r\n\r\n",
                                                    b"\r\nConnection: close\r\n\r\n")
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(request("/chunked", headers=b"Connection: close\r\n"))
        assert read_to_eof(s) == CHUNKED_HEAD + b"Connection: close\r\n\r\n" + CHUNKED_BODY


@LISTENERS
def test_connection_close_from_the_handler_closes_after_the_response(
        serve: Any, stream: bool) -> None:
    def route(conn: Connection, msg: Any) -> None:
        conn.http_begin(200, [("Content-Length", "2"), ("connection", "Close")])
        conn.http_write(b"ok")
        conn.http_end()

    port, _ = serve({"/": route}, stream)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(request("/") + request("/"))  # the second is never answered
        assert read_to_eof(s) == (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                                  b"connection: Close\r\n\r\nok")


@LISTENERS
def test_head_response_carries_no_body(serve: Any, stream: bool) -> None:
    def nocl(conn: Connection, msg: Any) -> None:
        conn.http_begin(200, [("X-Kind", "nocl")])
        conn.http_write(b"dropped")
        assert conn.http_end() is True

    port, h = serve({"/": HELLO, "/nocl": nocl}, stream)
    head = HELLO_RESP[:-len(b"hello world")]
    # Content-Length says what GET would send; the written bytes are dropped, so the
    # next response on the connection starts right after the head.
    with exchange(port, request("/", "HEAD"), request("/nocl", "HEAD"), request("/"),
                  responses=[head, b"HTTP/1.1 200 OK\r\nX-Kind: nocl\r\n\r\n", HELLO_RESP]):
        pass
    assert h.errors == []


@LISTENERS
@pytest.mark.parametrize("status,want", [
    (204, b"HTTP/1.1 204 No Content\r\nX-S: 1\r\n\r\n"),  # Content-Length dropped on a 204
    (304, b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\nX-S: 1\r\n\r\n"),
])
def test_204_and_304_carry_no_body(serve: Any, stream: bool, status: int, want: bytes) -> None:
    fd, path = tempfile.mkstemp()
    os.write(fd, b"file!")

    def route(conn: Connection, msg: Any) -> None:
        conn.http_begin(status, [("Content-Length", "5"), ("X-S", "1")])
        conn.http_write(b"hello")  # accepted and dropped
        conn.http_sendfile(fd, 0, 5)
        assert conn.http_end() is True

    try:
        port, h = serve({"/": route, "/next": HELLO}, stream)
        with exchange(port, request("/"), request("/next"), responses=[want, HELLO_RESP]):
            pass
    finally:
        os.close(fd)
        os.unlink(path)
    assert h.errors == []


def test_custom_reason_and_status_without_a_known_reason(serve: Any) -> None:
    def fine(conn: Connection, msg: Any) -> None:
        conn.http_begin(299, [("Content-Length", "0")], reason="Fine Thanks")
        conn.http_end()

    def bytes_reason(conn: Connection, msg: Any) -> None:
        conn.http_begin(200, [("Content-Length", "0")], reason=b"Tr\xe8s bien")
        conn.http_end()

    def unknown(conn: Connection, msg: Any) -> None:
        conn.http_begin(599, [("Content-Length", "0")])
        conn.http_end()

    port, h = serve({"/fine": fine, "/bytes": bytes_reason, "/unknown": unknown})
    with exchange(port, request("/fine"), request("/bytes"), request("/unknown"), responses=[
            b"HTTP/1.1 299 Fine Thanks\r\nContent-Length: 0\r\n\r\n",
            b"HTTP/1.1 200 Tr\xe8s bien\r\nContent-Length: 0\r\n\r\n",
            b"HTTP/1.1 599 \r\nContent-Length: 0\r\n\r\n"]):
        pass
    assert h.errors == []


BAD_BEGINS: list[tuple[str, dict[str, Any], type[Exception]]] = [
    ("te", {"headers": [("Transfer-Encoding", "chunked")]}, ValueError),
    ("te-case", {"headers": [(b"TRANSFER-encoding", b"identity")]}, ValueError),
    ("cr-value", {"headers": [("X-A", "a\rb")]}, ValueError),
    ("lf-value", {"headers": [("X-A", "a\nSet-Cookie: x=1")]}, ValueError),
    ("nul-value", {"headers": [(b"X-A", b"a\x00b")]}, ValueError),
    ("crlf-name", {"headers": [("X-A\r\nX-B", "v")]}, ValueError),
    ("space-name", {"headers": [("X A", "v")]}, ValueError),
    ("colon-name", {"headers": [("X:A", "v")]}, ValueError),
    ("empty-name", {"headers": [("", "v")]}, ValueError),
    ("non-latin1", {"headers": [("X-A", "\u20ac")]}, ValueError),
    ("int-value", {"headers": [("X-A", 5)]}, TypeError),
    ("none-name", {"headers": [(None, "v")]}, TypeError),
    ("cl-letters", {"headers": [("Content-Length", "12a")]}, ValueError),
    ("cl-negative", {"headers": [("Content-Length", "-1")]}, ValueError),
    ("cl-empty", {"headers": [("Content-Length", "")]}, ValueError),
    ("cl-twice", {"headers": [("Content-Length", "1"), ("content-length", "1")]}, ValueError),
    ("reason-crlf", {"reason": "OK\r\nX-Evil: 1"}, ValueError),
    ("reason-control", {"reason": "\x0c\x0c"}, ValueError),  # found by fuzzing
    ("value-control", {"headers": [("X-A", "a\x1fb")]}, ValueError),
    ("reason-type", {"reason": 7}, TypeError),
    ("status-1xx", {"status_code": 100}, ValueError),
    ("status-low", {"status_code": 99}, ValueError),
    ("status-high", {"status_code": 1000}, ValueError),
]


@LISTENERS
@pytest.mark.parametrize("kwargs,exc", [(k, e) for _, k, e in BAD_BEGINS],
                         ids=[name for name, _, _ in BAD_BEGINS])
def test_bad_http_begin_is_refused_before_anything_is_written(
        serve: Any, stream: bool, kwargs: dict[str, Any], exc: type[Exception]) -> None:
    raised: list[BaseException] = []

    def route(conn: Connection, msg: Any) -> None:
        args: dict[str, Any] = {"status_code": 200, "headers": [("X-Ok", "1")]}
        args.update(kwargs)
        try:
            conn.http_begin(args.pop("status_code"), **args)
        except Exception as e:
            raised.append(e)
        assert not conn.response_started
        HELLO(conn, msg)  # a refusal leaves the connection as it was

    port, h = serve({"/": route}, stream)
    with exchange(port, request("/"), request("/"), responses=[HELLO_RESP, HELLO_RESP]):
        pass
    assert len(raised) == 2 and all(isinstance(e, exc) for e in raised), raised
    assert h.errors == []


@pytest.mark.parametrize("data", ["text", 5, None, [b"a"]], ids=["str", "int", "none", "list"])
def test_http_write_takes_bytes_like_objects_only(serve: Any, data: Any) -> None:
    raised: list[BaseException] = []

    def route(conn: Connection, msg: Any) -> None:
        conn.http_begin(200, [("Content-Length", "11"), ("X-Kind", "parts")])
        try:
            conn.http_write(data)
        except TypeError as e:
            raised.append(e)
        conn.http_write(b"hello world")
        conn.http_end()

    port, _ = serve({"/": route})
    with exchange(port, request("/"), responses=[HELLO_RESP]):
        pass
    assert len(raised) == 1


def test_writing_past_content_length_is_refused_and_the_body_stays_valid(serve: Any) -> None:
    raised: list[BaseException] = []

    def route(conn: Connection, msg: Any) -> None:
        conn.http_begin(200, [("Content-Length", "11"), ("X-Kind", "parts")])
        conn.http_write(b"hello")
        for too_much in (b" world!", b"x" * 100):
            try:
                conn.http_write(too_much)
            except ValueError as e:
                raised.append(e)
        conn.http_write(b" world")
        try:
            conn.http_write(b"!")  # exactly full now: one byte more is too much
        except ValueError as e:
            raised.append(e)
        assert conn.http_end() is True

    port, _ = serve({"/": route})
    with exchange(port, request("/"), request("/"), responses=[HELLO_RESP, HELLO_RESP]):
        pass
    assert len(raised) == 6


@LISTENERS
def test_http_end_short_of_content_length_returns_false_and_closes(
        serve: Any, stream: bool) -> None:
    ended: list[bool] = []

    def route(conn: Connection, msg: Any) -> None:
        conn.http_begin(200, [("Content-Length", "10")])
        conn.http_write(b"hello")
        ended.append(conn.http_end())

    port, _ = serve({"/": route}, stream)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(request("/") + request("/"))
        # The close tells the client the response is incomplete; nothing follows it.
        assert read_to_eof(s) == b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello"
    assert ended == [False]


@LISTENERS
def test_out_of_order_calls_are_runtime_errors(serve: Any, stream: bool) -> None:
    raised: list[str] = []

    def expect_runtime_error(call: Callable[[], object], what: str) -> None:
        try:
            call()
        except RuntimeError:
            raised.append(what)

    def route(conn: Connection, msg: Any) -> None:
        expect_runtime_error(lambda: conn.http_write(b"x"), "write before begin")
        expect_runtime_error(conn.http_end, "end before begin")
        assert not conn.response_started
        conn.http_begin(200, [("Content-Length", "11"), ("X-Kind", "parts")])
        assert conn.response_started
        expect_runtime_error(lambda: conn.http_begin(200), "second begin")
        expect_runtime_error(lambda: conn.reply(200, b"x"), "reply while begun")
        expect_runtime_error(lambda: conn.reply_json({}), "reply_json while begun")
        conn.http_write(b"hello world")
        assert conn.response_started
        assert conn.http_end() is True
        assert not conn.response_started
        expect_runtime_error(lambda: conn.http_write(b"x"), "write after end")
        expect_runtime_error(conn.http_end, "end after end")
        expect_runtime_error(lambda: conn.http_begin(200), "begin after end")

    port, h = serve({"/": route}, stream)
    with exchange(port, request("/"), request("/"), responses=[HELLO_RESP, HELLO_RESP]):
        pass
    assert raised == ["write before begin", "end before begin", "second begin",
                      "reply while begun", "reply_json while begun", "write after end",
                      "end after end", "begin after end"] * 2
    assert h.errors == []


def test_http_begin_outside_a_served_request_is_refused(manager: Manager) -> None:
    listener = manager.listen("http://127.0.0.1:0")
    addr = listener.local_addr
    assert addr is not None
    client = manager.connect(f"http://127.0.0.1:{addr[1]}")
    for conn in (listener, client):
        with pytest.raises(RuntimeError):
            conn.http_begin(200)
        assert not conn.response_started
    client.close()
    wait_for(lambda: client.id not in [c.id for c in manager.connections], 5, "close",
             manager=manager)
    with pytest.raises(RuntimeError):
        client.http_begin(200)
    assert not client.response_started


@LISTENERS
def test_response_finished_later_from_other_threads_keeps_pipelined_order(
        serve: Any, stream: bool) -> None:
    """Each request is begun in its event and finished by a worker thread through
    call_soon_threadsafe(); later requests finish faster, yet answers stay in order."""
    box: dict[str, Manager] = {}
    states: list[tuple[str, bool]] = []
    delays = {"/1": 0.15, "/2": 0.05, "/3": 0.0}

    def finish(conn: Connection, path: str) -> None:
        states.append((path, conn.response_started))
        conn.http_write(b"late " + path.encode())
        assert conn.http_end() is True
        states.append((path, conn.response_started))

    def route(conn: Connection, msg: Any) -> None:
        path = msg.uri
        conn.http_begin(200, [("X-Path", path)])  # chunked: length unknown yet

        def work() -> None:
            time.sleep(delays[path])
            box["mgr"].call_soon_threadsafe(finish, conn, path)

        threading.Thread(target=work, daemon=True).start()

    def begin_late(conn: Connection, msg: Any) -> None:
        # Nothing written in the event at all: the request waits for its answer.
        def work() -> None:
            time.sleep(0.05)
            box["mgr"].call_soon_threadsafe(late_whole, conn)

        threading.Thread(target=work, daemon=True).start()

    def late_whole(conn: Connection) -> None:
        conn.http_begin(201, [("Content-Length", "4")])
        conn.http_write(b"late")
        conn.http_end()

    routes = {p: route for p in delays}
    routes["/late"] = begin_late
    port, h = serve(routes, stream, enable_wakeup=True)
    assert h.manager is not None
    box["mgr"] = h.manager
    with HttpConnection(port) as c:
        c.send_raw(b"".join(request(p) for p in ("/1", "/2", "/late", "/3")))
        got = [c.read_response("GET", "1.1") for _ in range(4)]
    assert [(r.status, r.header("x-path"), r.body) for r in got] == [
        (200, "/1", b"late /1"), (200, "/2", b"late /2"), (201, None, b"late"),
        (200, "/3", b"late /3")]
    assert states == [(p, s) for p in ("/1", "/2", "/3") for s in (True, False)]
    assert h.errors == []
