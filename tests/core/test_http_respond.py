"""Connection.http_respond(): a whole response in one call. Content-Length added when the
headers have none, `more_headers` after `headers`, and a refusal (bad header, body that
disagrees with its Content-Length) leaves nothing written, so the request can still be
answered."""

from __future__ import annotations

from typing import Any

import pytest
from support.routes import LISTENERS, exchange, request
from test_http_response_stream import BAD_BEGINS

from cymongoose import Connection

pytestmark = pytest.mark.timeout(30)

OK_HEAD = b"HTTP/1.1 200 OK\r\n"


@LISTENERS
def test_whole_response_with_added_content_length(serve: Any, stream: bool) -> None:
    def route(conn: Connection, msg: Any) -> None:
        assert conn.http_respond(200, [("Content-Type", "text/plain")], b"hello",
                                 more_headers=[(b"Server", b"t")]) is True
        assert not conn.response_started

    port, h = serve({"/": route}, stream)
    want = OK_HEAD + b"Content-Type: text/plain\r\nServer: t\r\nContent-Length: 5\r\n\r\nhello"
    with exchange(port, request("/"), request("/"), responses=[want, want]):
        pass
    assert h.errors == []


def test_given_content_length_is_kept_and_bytes_like_bodies_work(serve: Any) -> None:
    def route(conn: Connection, msg: Any) -> None:
        conn.http_respond(201, [("Content-Length", "3")], memoryview(b"abc"))

    port, h = serve({"/": route})
    with exchange(port, request("/"), responses=[
            b"HTTP/1.1 201 Created\r\nContent-Length: 3\r\n\r\nabc"]):
        pass
    assert h.errors == []


def test_head_gets_no_body_and_empty_body_gets_length_zero(serve: Any) -> None:
    def route(conn: Connection, msg: Any) -> None:
        conn.http_respond(200, [("Content-Length", "5")], b"hello")

    def empty(conn: Connection, msg: Any) -> None:
        conn.http_respond(200, None)

    port, h = serve({"/": route, "/empty": empty})
    with exchange(port, request("/", method="HEAD"), request("/empty"), responses=[
            OK_HEAD + b"Content-Length: 5\r\n\r\n",
            OK_HEAD + b"Content-Length: 0\r\n\r\n"]):
        pass
    assert h.errors == []


def test_http10_client_gets_a_length_not_a_close_delimited_body(serve: Any) -> None:
    def route(conn: Connection, msg: Any) -> None:
        conn.http_respond(200, [], b"hi")

    port, h = serve({"/": route})
    with exchange(port, request("/", version="1.0"), responses=[
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi"]) as s:
        assert s.recv(10) == b""  # HTTP/1.0 without keep-alive: closed after the answer
    assert h.errors == []


@pytest.mark.parametrize("length,body", [("4", b"abc"), ("2", b"abc")], ids=["short", "long"])
def test_body_disagreeing_with_content_length_is_refused_with_nothing_sent(
        serve: Any, length: str, body: bytes) -> None:
    raised: list[BaseException] = []

    def route(conn: Connection, msg: Any) -> None:
        try:
            conn.http_respond(200, [("Content-Length", length), ("X-A", "1")], body)
        except ValueError as exc:
            raised.append(exc)
        assert not conn.response_started
        conn.http_respond(500, [], b"e")

    port, h = serve({"/": route})
    with exchange(port, request("/"), responses=[
            b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 1\r\n\r\ne"]):
        pass
    assert len(raised) == 1 and "Content-Length" in str(raised[0])
    assert h.errors == []


@pytest.mark.parametrize("kwargs,exc", [(k, e) for _, k, e in BAD_BEGINS],
                         ids=[name for name, _, _ in BAD_BEGINS])
def test_bad_headers_or_status_are_refused_before_anything_is_written(
        serve: Any, kwargs: dict[str, Any], exc: type[Exception]) -> None:
    raised: list[BaseException] = []

    def route(conn: Connection, msg: Any) -> None:
        args: dict[str, Any] = {"status_code": 200, "headers": [("X-Ok", "1")]}
        args.update(kwargs)
        status = args.pop("status_code")
        # The bad field as a more_headers entry must be refused the same way.
        for where in ("headers", "more_headers"):
            call = dict(args)
            if where == "more_headers" and "headers" in kwargs:
                call = {"headers": [("X-Ok", "1")], "more_headers": kwargs["headers"]}
            try:
                conn.http_respond(status, body=b"x", **call)
            except Exception as e:
                raised.append(e)
            assert not conn.response_started
        conn.http_respond(200, [], b"fine")

    port, h = serve({"/": route})
    with exchange(port, request("/"), responses=[OK_HEAD + b"Content-Length: 4\r\n\r\nfine"]):
        pass
    assert len(raised) == 2 and all(isinstance(e, exc) for e in raised), raised
    assert h.errors == []


@pytest.mark.parametrize("body", ["text", 5, None], ids=["str", "int", "none"])
def test_body_must_be_bytes_like(serve: Any, body: Any) -> None:
    raised: list[BaseException] = []

    def route(conn: Connection, msg: Any) -> None:
        try:
            conn.http_respond(200, [], body)
        except TypeError as exc:
            raised.append(exc)
        conn.http_respond(200, [], b"ok")

    port, h = serve({"/": route})
    with exchange(port, request("/"), responses=[OK_HEAD + b"Content-Length: 2\r\n\r\nok"]):
        pass
    assert len(raised) == 1
