"""The raw views app servers build requests from: HttpMessage.headers_bytes(), uri_bytes,
query_bytes, and wsgi_environ() (PEP 3333), on buffered and streamed listeners alike; and
that each is refused once its event is over."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest
from support.waiting import recv_polling, wait_for

from cymongoose import MG_EV_HTTP_HDRS, MG_EV_HTTP_MSG, Connection, HttpMessage, Manager

pytestmark = pytest.mark.timeout(30)

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

# Both kinds of listener deliver the request head the same way: buffered ones through
# Mongoose's parser (MG_EV_HTTP_MSG), streamed ones through the guard's own (MG_EV_HTTP_HDRS).
LISTENERS = pytest.mark.parametrize("stream", [False, True], ids=["buffered", "stream"])


def port_of(listener: Connection) -> int:
    addr = listener.local_addr
    assert addr is not None
    return addr[1]


class Captured:
    def __init__(self) -> None:
        self.value: Any = None
        self.msg: HttpMessage | None = None
        self.conn: Connection | None = None
        self.client_port = 0


def capture(mgr: Manager, request: bytes, stream: bool,
            fn: Callable[[Connection, HttpMessage], Any], response: bytes = OK) -> Captured:
    """Send `request` on a fresh connection; return fn(conn, msg) as computed inside the
    request's event, plus the message and connection themselves (kept past the event)."""
    out = Captured()
    event = MG_EV_HTTP_HDRS if stream else MG_EV_HTTP_MSG

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == event:
            out.value = fn(conn, msg)
            out.msg = msg
            out.conn = conn
            conn.http_begin(200, [("Content-Length", "2")])
            conn.http_write(b"ok")
            conn.http_end()

    port = port_of(mgr.listen("http://127.0.0.1:0", handler, stream_body=stream))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.setblocking(False)
        out.client_port = int(s.getsockname()[1])
        s.sendall(request)
        wait_for(lambda: out.msg is not None, 5, "the request", manager=mgr)
        assert recv_polling(mgr, s, response) == response
    return out


def environ_of(base: dict[str, Any] | None = None,
               root_path: str = "") -> Callable[[Connection, HttpMessage], Any]:
    return lambda conn, msg: msg.wsgi_environ({} if base is None else base, conn, root_path)


@LISTENERS
def test_headers_bytes_keep_wire_order_case_and_duplicates(
        manager: Manager, stream: bool) -> None:
    got = capture(manager, b"GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nx-b:  two  \r\n"
                  b"X-A: 3\r\nX-Empty:\r\nAccept: */*\r\n\r\n", stream,
                  lambda conn, msg: msg.headers_bytes())
    # Names as sent (case kept), values without the optional whitespace around them.
    assert got.value == [(b"Host", b"h"), (b"X-A", b"1"), (b"x-b", b"two"), (b"X-A", b"3"),
                         (b"X-Empty", b""), (b"Accept", b"*/*")]


@LISTENERS
def test_headers_bytes_carry_obs_text_octets(manager: Manager, stream: bool) -> None:
    got = capture(manager, b"GET / HTTP/1.1\r\nHost: h\r\nX-L: caf\xe9\r\n"
                  b"X-Bin: \x80\xfe\xff\r\n\r\n", stream, lambda conn, msg: msg.headers_bytes())
    assert got.value == [(b"Host", b"h"), (b"X-L", b"caf\xe9"), (b"X-Bin", b"\x80\xfe\xff")]


@LISTENERS
@pytest.mark.parametrize("target,uri,query", [
    (b"/a%20b/caf%C3%A9?x=%41&y=1+2&z=%zz", b"/a%20b/caf%C3%A9", b"x=%41&y=1+2&z=%zz"),
    (b"/plain", b"/plain", b""),
    (b"/empty?", b"/empty", b""),
    (b"/q?a=1?b=2", b"/q", b"a=1?b=2"),
    (b"/p%2Fq%3F?k", b"/p%2Fq%3F", b"k"),
    (b"*", b"*", b""),
], ids=["escapes", "plain", "empty-query", "second-qmark", "escaped-slash", "asterisk"])
def test_uri_and_query_bytes_are_the_target_as_sent(
        manager: Manager, stream: bool, target: bytes, uri: bytes, query: bytes) -> None:
    method = b"OPTIONS" if target == b"*" else b"GET"
    got = capture(manager, method + b" " + target + b" HTTP/1.1\r\nHost: h\r\n\r\n", stream,
                  lambda conn, msg: (msg.uri_bytes, msg.query_bytes))
    assert got.value == (uri, query)


@LISTENERS
def test_wsgi_environ_cgi_variables(manager: Manager, stream: bool) -> None:
    got = capture(manager, b"POST /x/y?a=%41&b HTTP/1.1\r\nHost: example.test:8080\r\n"
                  b"Content-Type: text/plain\r\nContent-Length: 0\r\nX-Custom-Header: v\r\n"
                  b"user-agent: t/1\r\n\r\n", stream, environ_of())
    env = got.value
    assert env == {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/x/y",
        "QUERY_STRING": "a=%41&b",
        "RAW_URI": "/x/y?a=%41&b",  # the target as sent, as gunicorn sets it (for logs)
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "REMOTE_PORT": str(got.client_port),
        "HTTP_HOST": "example.test:8080",
        "CONTENT_TYPE": "text/plain",  # no HTTP_ prefix for these two (PEP 3333)
        "CONTENT_LENGTH": "0",
        "HTTP_X_CUSTOM_HEADER": "v",
        "HTTP_USER_AGENT": "t/1",
    }
    assert all(type(v) is str for v in env.values())


@LISTENERS
def test_wsgi_environ_http10_and_other_methods(manager: Manager, stream: bool) -> None:
    got = capture(manager, b"DELETE /d HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", stream,
                  environ_of(), OK.replace(b"\r\n\r\n", b"\r\nConnection: keep-alive\r\n\r\n"))
    assert got.value["SERVER_PROTOCOL"] == "HTTP/1.0"
    assert got.value["REQUEST_METHOD"] == "DELETE"
    assert got.value["QUERY_STRING"] == ""
    got = capture(manager, b"PROPFIND /d HTTP/1.1\r\nHost: h\r\n\r\n", stream, environ_of())
    assert got.value["REQUEST_METHOD"] == "PROPFIND"


@LISTENERS
def test_wsgi_environ_header_values_are_latin1_str(manager: Manager, stream: bool) -> None:
    got = capture(manager, b"GET / HTTP/1.1\r\nHost: h\r\nX-Name: caf\xe9\r\n"
                  b"X-Bin: \x80\xff\r\n\r\n", stream, environ_of())
    assert got.value["HTTP_X_NAME"] == "caf\xe9"
    assert got.value["HTTP_X_BIN"] == "\x80\xff"
    # PEP 3333: the str holds exactly the octets; encoding it back gives the wire bytes.
    assert got.value["HTTP_X_NAME"].encode("latin-1") == b"caf\xe9"


@LISTENERS
def test_wsgi_environ_joins_repeated_fields(manager: Manager, stream: bool) -> None:
    got = capture(manager, b"GET / HTTP/1.1\r\nHost: h\r\nAccept: a/b\r\nX-Trace: 1\r\n"
                  b"accept: c/d\r\nACCEPT: e/f\r\nContent-Type: x/y\r\ncontent-type: z/w\r\n"
                  b"\r\n", stream, environ_of())
    assert got.value["HTTP_ACCEPT"] == "a/b, c/d, e/f"
    assert got.value["CONTENT_TYPE"] == "x/y, z/w"
    assert got.value["HTTP_X_TRACE"] == "1"


def test_wsgi_environ_joins_cookies_with_semicolons(manager: Manager) -> None:
    # Only streamed listeners accept repeated Cookie fields (an HTTP/2 proxy sends them).
    got = capture(manager, b"GET / HTTP/1.1\r\nHost: h\r\nCookie: a=1\r\nCookie: b=2; c=3\r\n"
                  b"\r\n", True, environ_of())
    assert got.value["HTTP_COOKIE"] == "a=1; b=2; c=3"


@LISTENERS
def test_wsgi_environ_drops_header_names_with_underscores(
        manager: Manager, stream: bool) -> None:
    # "X_Forwarded_For" would otherwise pass for a proxy's X-Forwarded-For.
    got = capture(manager, b"GET / HTTP/1.1\r\nHost: h\r\nX_Forwarded_For: 6.6.6.6\r\n"
                  b"X-Forwarded-For: 10.0.0.1\r\nContent_Length: 5\r\n\r\n", stream,
                  environ_of())
    assert got.value["HTTP_X_FORWARDED_FOR"] == "10.0.0.1"
    assert "CONTENT_LENGTH" not in got.value
    assert not any("_FORWARDED_" in k and got.value[k] == "6.6.6.6" for k in got.value)


@LISTENERS
@pytest.mark.parametrize("target,path", [
    (b"/caf%C3%A9", "/caf\xc3\xa9"),  # UTF-8 octets, one code point each
    (b"/%E9t%E9", "/\xe9t\xe9"),
    (b"/a%20b%2Fc", "/a b/c"),
    (b"/bad%zz%4", "/bad%zz%4"),  # invalid escapes stay as they are
    (b"/end%41", "/endA"),
    (b"/lower%c3%a9", "/lower\xc3\xa9"),
    (b"/%2541", "/%41"),  # decoded once, not twice
], ids=["utf8", "latin1", "space-slash", "invalid", "at-end", "lower-hex", "once"])
def test_wsgi_environ_path_info_is_percent_decoded_latin1(
        manager: Manager, stream: bool, target: bytes, path: str) -> None:
    got = capture(manager, b"GET " + target + b"?q=%41 HTTP/1.1\r\nHost: h\r\n\r\n", stream,
                  environ_of())
    assert got.value["PATH_INFO"] == path
    assert got.value["QUERY_STRING"] == "q=%41"  # the query is never decoded


@LISTENERS
@pytest.mark.parametrize("target,script_name,path_info", [
    (b"/app/x/y", "/app", "/x/y"),
    (b"/app", "/app", ""),
    (b"/app/", "/app", "/"),
    (b"/app%2Fz", "/app", "/z"),
    (b"/application", "", "/application"),  # a prefix of the name is no match
    (b"/other", "", "/other"),
], ids=["below", "exact", "slash", "escaped", "prefix-of-name", "outside"])
def test_wsgi_environ_splits_root_path(manager: Manager, stream: bool, target: bytes,
                                       script_name: str, path_info: str) -> None:
    base = {"SCRIPT_NAME": "/app"}  # servers put their root path in the base, as WSGIServer
    got = capture(manager, b"GET " + target + b" HTTP/1.1\r\nHost: h\r\n\r\n", stream,
                  environ_of(base, "/app"))
    assert (got.value["SCRIPT_NAME"], got.value["PATH_INFO"]) == (script_name, path_info)
    assert base == {"SCRIPT_NAME": "/app"}


@LISTENERS
def test_wsgi_environ_copies_base_and_leaves_it_alone(manager: Manager, stream: bool) -> None:
    marker = object()
    base: dict[str, Any] = {"wsgi.version": (1, 0), "SERVER_NAME": "s", "SERVER_PORT": "1",
                            "custom": marker}
    snapshot = dict(base)

    def twice(conn: Connection, msg: HttpMessage) -> tuple[Any, Any]:
        return msg.wsgi_environ(base, conn), msg.wsgi_environ(base, conn)

    got = capture(manager, b"GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n\r\n", stream, twice)
    first, second = got.value
    assert base == snapshot
    assert first is not base and second is not first
    assert first["custom"] is marker and first["wsgi.version"] == (1, 0)
    assert first == second
    first["HTTP_X_A"] = "changed"
    assert second["HTTP_X_A"] == "1"


@LISTENERS
def test_wsgi_environ_argument_types(manager: Manager, stream: bool) -> None:
    def misuse(conn: Connection, msg: HttpMessage) -> list[str]:
        errors = []
        bad_args: list[tuple[Any, ...]] = [([], conn), ({}, None), ({}, "conn"), ({}, conn, 3)]
        for args in bad_args:
            try:
                msg.wsgi_environ(*args)
            except TypeError:
                errors.append("TypeError")
        return errors

    got = capture(manager, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n", stream, misuse)
    assert got.value == ["TypeError"] * 4


@LISTENERS
def test_every_view_is_refused_after_its_event(manager: Manager, stream: bool) -> None:
    got = capture(manager, b"GET /p?q HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n\r\n", stream,
                  lambda conn, msg: msg.uri_bytes)
    assert got.value == b"/p"
    msg, conn = got.msg, got.conn
    assert msg is not None and conn is not None
    assert not msg
    calls: list[Callable[[], object]] = [
        lambda: msg.uri_bytes,
        lambda: msg.query_bytes,
        lambda: msg.headers_bytes(),
        lambda: msg.wsgi_environ({}, conn),
        lambda: msg.headers(),
        lambda: msg.header("X-A"),
    ]
    for call in calls:
        with pytest.raises(RuntimeError):
            call()


def test_a_kept_view_stays_dead_while_later_requests_are_served(manager: Manager) -> None:
    """The per-Manager view object is reused for the next request only when nobody holds
    it: a view kept by the app must never start showing another request's head."""
    kept: list[HttpMessage] = []
    seen_during_next: list[bool] = []

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_HDRS:
            if kept:
                seen_during_next.append(bool(kept[0]))
                assert msg is not kept[0]
            kept.append(msg)
            conn.http_begin(200, [("Content-Length", "2")])
            conn.http_write(b"ok")
            conn.http_end()

    port = port_of(manager.listen("http://127.0.0.1:0", handler, stream_body=True))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.setblocking(False)
        s.sendall(b"GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\n\r\n")
        assert recv_polling(manager, s, OK + OK) == OK + OK
    assert seen_during_next == [False]
    with pytest.raises(RuntimeError):
        kept[0].headers_bytes()
