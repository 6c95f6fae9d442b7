"""Connections: keep-alive, pipelining, HTTP/1.0 and Connection: close, a blocked app not
stalling others, streaming before the app finishes, close() and wsgi.input on disconnects."""

from __future__ import annotations

import logging
import socket
import time
import uuid
from typing import Any

import pytest
from support.app_state import app_state, release, wait_app_state
from support.http_client import HttpConnection, raw_request
from support.served import Served


@pytest.mark.timeout(60)
def test_thousand_requests_on_one_connection(served: Served) -> None:
    with HttpConnection(served.port) as c:
        local = c.sock.getsockname()
        for i in range(1000):
            resp = c.request("GET", f"/hello?i={i}")
            assert resp.status == 200 and resp.body == b"hello"
        assert c.sock.getsockname() == local and c.keep_alive


def test_pipelining_ten_requests_in_one_write(served: Served) -> None:
    targets = [f"/environ?n={i}" if i % 3 else "/hello" for i in range(9)] + ["/nocl"]
    with HttpConnection(served.port) as c:
        c.send_raw(b"".join(raw_request("GET", t) for t in targets))
        for i, target in enumerate(targets):
            resp = c.read_response("GET", "1.1")
            assert resp.status == 200
            if target.startswith("/environ"):
                assert f'"QUERY_STRING": "n={i}"'.encode() in resp.body
            elif target == "/hello":
                assert resp.body == b"hello"
            else:
                assert resp.body == b"no content-length"


def test_pipelined_posts_keep_their_bodies(served: Served) -> None:
    bodies = [bytes([65 + i]) * (i * 1000 + 1) for i in range(5)]
    with HttpConnection(served.port) as c:
        c.send_raw(b"".join(raw_request("POST", "/hash", [("Content-Length", str(len(b)))], b)
                            for b in bodies))
        import hashlib
        import json
        for b in bodies:
            got = json.loads(c.read_response("POST", "1.1").body)
            assert got == {"length": len(b), "sha256": hashlib.sha256(b).hexdigest()}


def test_http10_closes_by_default(served: Served) -> None:
    with HttpConnection(served.port) as c:
        c.send_raw(raw_request("GET", "/hello", version="1.0"))
        resp = c.read_response("GET", "1.0")
        assert resp.body == b"hello"
        assert resp.http_version in ("1.0", "1.1")
        assert c.server_closed()


def test_http10_keep_alive(served: Served) -> None:
    ka = [("Connection", "keep-alive")]
    with HttpConnection(served.port) as c:
        for _ in range(3):
            c.send_raw(raw_request("GET", "/hello", ka, version="1.0"))
            resp = c.read_response("GET", "1.0", ka)
            assert resp.body == b"hello"
            assert (resp.header("connection") or "").lower() == "keep-alive"


def test_connection_close_from_client(served: Served) -> None:
    with HttpConnection(served.port) as c:
        resp = c.request("GET", "/hello", [("Connection", "close")])
        assert resp.body == b"hello"
        assert (resp.header("connection") or "").lower() == "close"
        assert c.server_closed()


def test_blocked_app_does_not_stall_other_connections(serve_app: Any) -> None:
    served = serve_app(threads=2)
    with HttpConnection(served.port) as slow, HttpConnection(served.port) as fast:
        token = uuid.uuid4().hex
        slow.send_request("GET", f"/sleep?s=2&token={token}")
        wait_app_state(served.port, token, "sleeping")  # the slow request is in the app
        start = time.monotonic()
        assert fast.request("GET", "/hello").body == b"hello"
        assert time.monotonic() - start < 1.0
        assert slow.read_response().body == b"slept"


def test_generator_streams_before_app_finishes(served: Served) -> None:
    token = uuid.uuid4().hex
    with HttpConnection(served.port) as c:
        c.send_request("GET", f"/gated?token={token}")
        resp = c.read_head()
        assert resp.status == 200
        c.read_body(resp, limit=len(b"first\n"))
        assert resp.body == b"first\n"
        assert wait_app_state(served.port, token, "waiting").get("waiting") is True
        assert app_state(served.port, token).get("closed") is False
        release(served.port, token)
        c.read_body(resp)
        assert resp.body == b"first\nsecond\n"
    st = wait_app_state(served.port, token, "closed", True)
    assert st["released"] is True and st["closed"] is True


def test_close_called_when_client_leaves_mid_response(served: Served) -> None:
    token = uuid.uuid4().hex
    size = 256 << 20
    with HttpConnection(served.port) as c:
        c.send_request("GET", f"/stream?size={size}&token={token}")
        resp = c.read_head()
        c.read_body(resp, limit=1 << 20)
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    st = wait_app_state(served.port, token, "closed", True, timeout=10)
    assert st["closed"] is True
    assert st["produced"] < size


def test_close_called_when_client_leaves_while_app_waits(served: Served) -> None:
    token = uuid.uuid4().hex
    with HttpConnection(served.port) as c:
        c.send_request("GET", f"/gated?token={token}")
        resp = c.read_head()
        c.read_body(resp, limit=6)
        assert wait_app_state(served.port, token, "waiting").get("waiting") is True
    release(served.port, token)
    assert wait_app_state(served.port, token, "closed", True)["closed"] is True


def test_client_leaving_mid_upload_makes_read_raise_oserror(served: Served) -> None:
    if not served.ours:
        pytest.skip("gunicorn's wsgi.input returns a short body without an error when the "
                    "client leaves mid-upload")
    token = uuid.uuid4().hex
    with HttpConnection(served.port) as c:
        c.send_raw(raw_request("POST", f"/read_until_error?token={token}",
                               [("Content-Length", str(10 << 20))]))
        c.send_raw(b"x" * (1 << 20))
        wait_app_state(served.port, token, "done")  # the app is reading when the client goes
    st = wait_app_state(served.port, token, "done", True)
    assert st["done"] is True, st
    assert st.get("oserror") is True, st


def test_broken_chunked_framing_mid_upload_makes_read_raise_oserror(
        served: Served, caplog: pytest.LogCaptureFixture) -> None:
    if not served.ours:
        pytest.skip("gunicorn's wsgi.input raises its own parser error (not an OSError) on "
                    "a broken chunk")
    caplog.set_level(logging.ERROR)
    token = uuid.uuid4().hex
    with HttpConnection(served.port) as c:
        c.send_raw(raw_request("POST", f"/read_until_error?token={token}",
                               [("Transfer-Encoding", "chunked")]))
        c.send_raw(b"5\r\nhello\r\n")
        assert wait_app_state(served.port, token, "done").get("done") is False
        c.send_raw(b"zz\r\n")  # not a chunk size: the core closes the connection
        assert c.server_closed()
    st = wait_app_state(served.port, token, "done", True)
    assert st["done"] is True, st
    assert st.get("oserror") is True, st
    # The loop side knew it first (it feeds wsgi.input): no failure of its own is logged.
    assert "Unhandled exception" not in caplog.text, caplog.text
