"""`HttpMessage.asgi_scope()`: the ASGI http scope of a request in one pass (raw header bytes
with lower-cased names in order, percent-decoded UTF-8 path, raw path and query)."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from support.http_client import raw_request
from support.poll_thread import ServerThread

from cymongoose import MG_EV_HTTP_HDRS, Connection

pytestmark = pytest.mark.timeout(30)


def test_scope_of_a_request() -> None:
    scopes: list[dict[str, Any]] = []
    base = {"type": "http", "root_path": ""}
    state = {"db": "x"}

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_HDRS:
            scopes.append(msg.asgi_scope(base, conn, state))
            conn.http_respond(200, [], b"ok")

    st = ServerThread()
    port = st.listen("http://127.0.0.1:0", handler, stream_body=True)
    st.start()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(raw_request("GET", "/caf%C3%A9/%FF%zz?q=%20&r", [
                ("X-Dup", "1"), ("Content-TYPE", "text/plain"), ("X-Dup", "\xe92")]))
            assert sock.recv(4096).startswith(b"HTTP/1.1 200")
    finally:
        st.stop()
    (scope,) = scopes
    assert scope["type"] == "http" and scope["method"] == "GET"
    assert scope["path"] == "/café/\ufffd%zz"
    assert scope["raw_path"] == b"/caf%C3%A9/%FF%zz"
    assert scope["query_string"] == b"q=%20&r"
    assert scope["http_version"] == "1.1"
    assert scope["client"][0] == "127.0.0.1" and type(scope["client"][1]) is int
    assert scope["headers"][1:] == [(b"x-dup", b"1"), (b"content-type", b"text/plain"),
                                    (b"x-dup", b"\xe92")]
    assert scope["state"] == state and scope["state"] is not state
    assert "method" not in base  # the base is copied, never changed


def test_asgi_scope_after_its_event_raises() -> None:
    kept: list[tuple[Any, Connection]] = []

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_HDRS:
            kept.append((msg, conn))
            conn.http_respond(200, [], b"ok")

    st = ServerThread()
    port = st.listen("http://127.0.0.1:0", handler, stream_body=True)
    st.start()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(raw_request("GET", "/"))
            assert sock.recv(4096).startswith(b"HTTP/1.1 200")
    finally:
        st.stop()
    msg, conn = kept[0]
    with pytest.raises(RuntimeError):
        msg.asgi_scope({}, conn, {})


def test_header_names_that_change_between_requests() -> None:
    """Names are matched against the one seen last at the same position: a request whose
    names differ there (other name, other case, other length) must still get its own. A
    base that already holds every key (the ASGI server's) is filled in, never changed."""
    scopes: list[dict[str, Any]] = []
    base = {"type": "http", "method": "GET", "path": "/", "headers": [], "state": None}

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_HDRS:
            scopes.append(msg.asgi_scope(base, conn, {}))
            conn.http_respond(200, [], b"ok")

    sequences = [[("X-Alpha", "1"), ("Accept", "a")],
                 [("X-ALPHA", "2"), ("Accept", "b")],
                 [("X-Beta", "3"), ("X-Alphb", "4")],
                 [("X-Alpha", "5")],
                 [("X-Alpha", "6"), ("Accept", "c")]]
    st = ServerThread()
    port = st.listen("http://127.0.0.1:0", handler, stream_body=True)
    st.start()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            for headers in sequences:
                sock.sendall(raw_request("POST", "/p", headers))
                assert sock.recv(4096).startswith(b"HTTP/1.1 200")
    finally:
        st.stop()
    for scope, sent in zip(scopes, sequences, strict=True):
        assert scope["headers"][1:] == [(n.lower().encode(), v.encode()) for n, v in sent]
        assert scope["method"] == "POST" and scope["path"] == "/p"
    assert base == {"type": "http", "method": "GET", "path": "/", "headers": [], "state": None}
