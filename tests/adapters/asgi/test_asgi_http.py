"""The http scope and its messages on the raw app: every case runs on our ASGIServer and on
uvicorn, and every response is read by h11, so a malformed one fails."""

from __future__ import annotations

import json
import socket
import time
import uuid

import pytest
from support.app_state import wait_state
from support.asgi_apps import FILE_BODY
from support.asgi_fixtures import ServeASGI
from support.http_client import HttpConnection, get, raw_request
from support.patterns import pattern_chunks
from support.served import Served

pytestmark = pytest.mark.timeout(60)


def scope_of(served: Served, target: str, headers: list[tuple[str, str]] | None = None
             ) -> dict:
    with HttpConnection(served.port) as c:
        c.send_raw(raw_request("GET", target, headers or []))
        resp = c.read_response("GET", "1.1")
    assert resp.status == 200, resp
    return json.loads(resp.body)  # type: ignore[no-any-return]


def test_scope_path_query_and_ports(asgi_served: Served) -> None:
    s = scope_of(asgi_served, "/scope/caf%C3%A9%20x%2Fy?a=1&b=%20")
    assert s["type"] == "http" and s["method"] == "GET" and s["scheme"] == "http"
    assert s["http_version"] == "1.1"
    assert s["path"] == "/scope/café x/y"
    assert s["raw_path"] == "/scope/caf%C3%A9%20x%2Fy"
    assert s["query_string"] == "a=1&b=%20"
    assert s["root_path"] == ""
    assert s["client"][0] == "127.0.0.1" and s["server"] == ["127.0.0.1", asgi_served.port]
    assert s["port_types"] == ["int", "int"]
    assert s["asgi"]["version"] == "3.0"


def test_headers_are_lowercased_raw_bytes_in_order_with_duplicates(asgi_served: Served) -> None:
    s = scope_of(asgi_served, "/scope", [("X-B", "2"), ("x-a", "1"), ("X-B", "3"),
                                         ("X-Latin", "\xe9t\xe9")])
    sent = [h for h in s["headers"] if h[0].startswith("x-")]
    assert sent == [["x-b", "2"], ["x-a", "1"], ["x-b", "3"], ["x-latin", "\xe9t\xe9"]]
    assert any(h[0] == "host" for h in s["headers"])


def test_lifespan_state_is_copied_into_each_request(asgi_served: Served) -> None:
    assert scope_of(asgi_served, "/scope")["state"] == {"greeting": "hello from lifespan"}


def test_body_with_content_length_and_chunked(asgi_served: Served) -> None:
    body = b"".join(pattern_chunks(300_000))
    with HttpConnection(asgi_served.port) as c:
        resp = c.request("POST", "/echo", body=body)
        assert resp.status == 200 and resp.body == body
        resp = c.request("POST", "/echo", body=iter([b"ab", b"", b"cd" * 1000]))
        assert resp.status == 200 and resp.body == b"ab" + b"cd" * 1000
        resp = c.request("POST", "/echo", body=b"")
        assert resp.status == 200 and resp.body == b""


def test_streamed_request_arrives_in_several_messages(asgi_served: Served) -> None:
    # 4 MiB sent in pieces with pauses: the app sees more_body=True messages before the end.
    sock = socket.create_connection(("127.0.0.1", asgi_served.port), timeout=10)
    with sock:
        size = 4 << 20
        sock.sendall(raw_request("POST", "/echo", [("Content-Length", str(size))]))
        for piece in pattern_chunks(size, 1 << 20):
            sock.sendall(piece)
            time.sleep(0.05)
        got = b""
        while b"\r\n\r\n" not in got or len(got.partition(b"\r\n\r\n")[2]) < size:
            data = sock.recv(1 << 20)
            assert data, "connection closed early"
            got += data
    head = got.partition(b"\r\n\r\n")[0].decode("latin-1").lower()
    messages = int(head.split("x-messages: ")[1].split("\r\n")[0])
    assert messages > 1


def test_response_headers_kept_with_date_and_server(asgi_served: Served) -> None:
    resp = get(asgi_served.port, "/headers-out")
    assert resp.status == 200
    assert resp.header_list("set-cookie") == ["a=1", "b=2"]
    assert resp.header("x-custom") == "\xe9t\xe9"
    assert resp.header("date") and resp.header("server")


def test_small_response_is_one_write_with_content_length(our_asgi: ServeASGI) -> None:
    # Held start + one body message: Content-Length framing, not chunked (uvicorn chunks).
    resp = get(our_asgi().port, "/scope")
    assert resp.header("content-length") == str(len(resp.body))
    assert resp.header("transfer-encoding") is None


def test_streamed_response_is_chunked(asgi_served: Served) -> None:
    with HttpConnection(asgi_served.port) as c:
        resp = c.request("GET", "/stream?size=200000&chunk=10000")
        assert resp.status == 200
        assert resp.header("transfer-encoding") == "chunked"
        assert resp.body == b"".join(pattern_chunks(200000, 10000))
        assert c.request("GET", "/scope").status == 200  # keep-alive goes on


def test_head_gets_no_body(asgi_served: Served) -> None:
    with HttpConnection(asgi_served.port) as c:
        resp = c.request("HEAD", "/scope")
        assert resp.status == 200 and resp.body == b""
        assert c.request("GET", "/_ctl/ping").body == b"pong"


def test_thousand_requests_on_one_keep_alive_connection(asgi_served: Served) -> None:
    with HttpConnection(asgi_served.port) as c:
        for i in range(1000):
            body = b"%d" % i  # each request in one write (no Nagle/delayed-ACK stalls)
            c.send_raw(raw_request("POST", "/echo", [("Content-Length", str(len(body)))],
                                   body))
            resp = c.read_response("POST", "1.1")
            assert resp.status == 200 and resp.body == body


def test_pipelined_requests_are_answered_in_order(asgi_served: Served) -> None:
    with HttpConnection(asgi_served.port) as c:
        reqs = b"".join(raw_request("POST", "/echo", [("Content-Length", str(len(b)))], b)
                        for b in (b"one", b"two!", b"three"))
        reqs += raw_request("GET", "/_ctl/ping")
        c.send_raw(reqs)
        bodies = [c.read_response("POST", "1.1").body for _ in range(3)]
        assert bodies == [b"one", b"two!", b"three"]
        assert c.read_response("GET", "1.1").body == b"pong"


def test_connection_close_and_http10(asgi_served: Served) -> None:
    with HttpConnection(asgi_served.port) as c:
        resp = c.request("GET", "/_ctl/ping", [("Connection", "close")])
        assert resp.body == b"pong"
        assert c.server_closed()
    with HttpConnection(asgi_served.port) as c:
        c.send_raw(raw_request("GET", "/scope", version="1.0"))
        resp = c.read_response("GET", "1.0")
        assert json.loads(resp.body)["http_version"] == "1.0"
        assert resp.header("transfer-encoding") is None
        assert c.server_closed()


def test_pathsend_file(asgi_served: Served) -> None:
    with HttpConnection(asgi_served.port) as c:
        resp = c.request("GET", "/file")
        assert resp.status == 200 and resp.body == FILE_BODY
        assert c.request("GET", "/_ctl/ping").body == b"pong"


def test_receive_after_the_response_is_disconnect(asgi_served: Served) -> None:
    token = uuid.uuid4().hex
    assert get(asgi_served.port, f"/after-response?token={token}").body == b"done"
    state = wait_state(asgi_served.port, token, lambda st: True)
    assert state == {"received": "http.disconnect"}


def test_send_after_a_disconnect_returns_quietly(our_asgi: ServeASGI) -> None:
    # Spec 2.3, as uvicorn and granian: send() after the client left drops its message. An
    # OSError there (2.4) makes Django's ASGI handler skip request_finished and leak the
    # request's database connection (tests/realworld has that case with Django itself).
    asgi_served = our_asgi()
    token = uuid.uuid4().hex
    with socket.create_connection(("127.0.0.1", asgi_served.port)) as sock:
        sock.sendall(raw_request("GET", f"/wait-disconnect?token={token}"))
        wait_state(asgi_served.port, token, lambda st: True)  # the app has the request
    state = wait_state(asgi_served.port, token, lambda st: "send" in st)
    assert state["received"] == "http.disconnect"
    assert state["send"] == "returned", state


def test_broken_chunked_framing_mid_body_is_a_disconnect(our_asgi: ServeASGI) -> None:
    # The core closes a connection whose chunked framing breaks after the app has the
    # request; the app's receive() then says the client is gone, as for any disconnect.
    asgi_served = our_asgi()
    token = uuid.uuid4().hex
    with HttpConnection(asgi_served.port) as c:
        c.send_raw(raw_request("POST", f"/receive-log?token={token}",
                               [("Transfer-Encoding", "chunked")]))
        c.send_raw(b"5\r\nhello\r\n")
        # The app has the request (so the head is out) before the framing breaks.
        assert wait_state(asgi_served.port, token, lambda st: bool(st["types"]))
        c.send_raw(b"zz\r\n")  # not a chunk size
        assert c.server_closed()
    state = wait_state(asgi_served.port, token,
                       lambda st: st["types"][-1] != "http.request")
    assert state["types"][-1] == "http.disconnect", state
    assert get(asgi_served.port, "/_ctl/ping").body == b"pong"
