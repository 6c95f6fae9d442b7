"""Protocol switches through the reverse proxy: only a WebSocket handshake is passed on, and
its 101 becomes a tunnel only with the Sec-WebSocket-Accept its key asks for. h2c is the
known smuggling route (a tunnel speaking HTTP/2 to the backend carries requests the proxy
never routed): shown against hypercorn, a real h2c-capable backend."""

from __future__ import annotations

import base64
import hashlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from support.h2c_client import h2c_upgrade
from support.http_client import raw_request, recv_head
from support.hypercorn_server import HypercornServer
from support.ports import HOST
from support.waiting import wait_for
from support.ws_echo import assert_echoes
from websockets.sync.server import ServerConnection, serve

pytestmark = pytest.mark.timeout(60)

KEY = "dGhlIHNhbXBsZSBub25jZQ=="  # RFC 6455 §1.3's example
ACCEPT = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
HANDSHAKE = [("Connection", "Upgrade"), ("Upgrade", "websocket"),
             ("Sec-WebSocket-Key", KEY), ("Sec-WebSocket-Version", "13")]


def ask(port: int, request: bytes, timeout: float = 10.0) -> bytes:
    """The head of the answer to `request` on a fresh connection."""
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        sock.sendall(request)
        head = recv_head(sock)
    assert head is not None, "closed without an answer"
    return head.partition(b"\r\n\r\n")[0]


@pytest.fixture
def hypercorn() -> Iterator[HypercornServer]:
    with HypercornServer() as server:
        yield server


def test_accept_of_the_rfc_example() -> None:
    # The values every test below relies on, as RFC 6455 §1.3 computes them.
    digest = hashlib.sha1((KEY + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()
    assert base64.b64encode(digest).decode() == ACCEPT


def test_h2c_through_the_proxy_never_reaches_what_the_route_does_not(
        hypercorn: HypercornServer, proxy: Any) -> None:
    # The backend speaks h2c: straight to it, an upgrade of /public serves /admin too.
    direct = h2c_upgrade(hypercorn.port, "/public", then=("/admin",))
    assert b" 101 " in direct.status_line, direct.head
    assert direct.answers["/admin"] == (200, b"/admin over HTTP/2\n")
    before = len(hypercorn.seen())
    # Through a proxy that routes only /public, the upgrade is dropped: /public is served
    # over HTTP/1.1, and the HTTP/2 the client sends after that never reaches the backend.
    p = proxy({"/public": hypercorn.url})
    via_proxy = h2c_upgrade(p.port, "/public", then=("/admin", "/internal/secret"),
                            insist=True)
    assert via_proxy.status_line.startswith(b"HTTP/1.1 200 "), via_proxy.head
    # The preface ("PRI * HTTP/2.0") is refused as HTTP/1.1 by the proxy itself.
    assert via_proxy.after.startswith(b"/public over HTTP/1.1\nHTTP/1.1 505 "), via_proxy.after
    assert b"/admin" not in via_proxy.after and b"/internal" not in via_proxy.after
    assert hypercorn.seen()[before:] == [
        {"path": "/public", "http_version": "1.1", "x-forwarded-for": "127.0.0.1"}]


@pytest.mark.parametrize("request_bytes", [
    raw_request("GET", "/x", [("Connection", "Upgrade, HTTP2-Settings"), ("Upgrade", "h2c"),
                              ("HTTP2-Settings", "AAMAAABkAARAAAAAAAIAAAAA")]),
    raw_request("GET", "/x", [("Connection", "upgrade"), ("Upgrade", "foo/1")]),
    # RFC 9110 §7.8: an Upgrade in HTTP/1.0 is ignored.
    raw_request("GET", "/x", HANDSHAKE, version="1.0"),
    # Upgrade without the connection option: not an upgrade request.
    raw_request("GET", "/x", HANDSHAKE[1:]),
], ids=["h2c", "another token", "websocket in HTTP/1.0", "no Connection: upgrade"])
def test_a_101_to_a_request_not_passed_on_as_an_upgrade_is_refused(
        raw_upstream: Any, proxy: Any, request_bytes: bytes) -> None:
    up = raw_upstream(lambda head: b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\n"
                      b"Upgrade: h2c\r\nSec-WebSocket-Accept: " + ACCEPT.encode() + b"\r\n\r\n")
    p = proxy({"/": up.url})
    head = ask(p.port, request_bytes)
    assert head.startswith(b"HTTP/1.1 502 "), head
    sent = up.requests[0].partition(b"\r\n\r\n")[0].lower()
    assert b"\r\nupgrade:" not in sent and b"http2-settings" not in sent, sent
    assert b"\r\nconnection: upgrade" not in sent and b"sec-websocket-key" not in sent, sent
    wait_for(lambda: p.stats()[0]["open"] == 0, 10,
             'p.stats()[0]["open"] == 0')  # closed, not pooled


@pytest.mark.parametrize("headers", [
    HANDSHAKE[:2] + HANDSHAKE[3:],
    HANDSHAKE[:2] + [("Sec-WebSocket-Key", "dGhlIHNhbXBsZQ=="), HANDSHAKE[3]],
    HANDSHAKE[:2] + [("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ!="), HANDSHAKE[3]],
    HANDSHAKE + [("Sec-WebSocket-Key", "AAAAAAAAAAAAAAAAAAAAAA==")],
    HANDSHAKE[:3],
    HANDSHAKE[:3] + [("Sec-WebSocket-Version", "8")],
], ids=["no key", "key of 10 bytes", "key not base64", "two keys", "no version",
        "version 8"])
def test_malformed_websocket_handshakes_are_refused(raw_upstream: Any, proxy: Any,
                                                    headers: list[tuple[str, str]]) -> None:
    up = raw_upstream(lambda head: b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade"
                      b"\r\nUpgrade: websocket\r\n\r\n")
    p = proxy({"/": up.url})
    head = ask(p.port, raw_request("GET", "/ws", headers))
    assert head.startswith(b"HTTP/1.1 400 "), head
    assert up.accepted == 0


@pytest.mark.parametrize(("method", "body"), [("POST", b""), ("GET", b"hello")])
def test_a_websocket_handshake_is_a_get_without_a_body(raw_upstream: Any, proxy: Any,
                                                       method: str, body: bytes) -> None:
    up = raw_upstream(lambda head: b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade"
                      b"\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: " + ACCEPT.encode()
                      + b"\r\n\r\n")
    p = proxy({"/": up.url})
    request = raw_request(method, "/ws", [*HANDSHAKE, ("Content-Length", str(len(body)))],
                          body=body)
    assert ask(p.port, request).startswith(b"HTTP/1.1 400 ")
    assert up.accepted == 0


@pytest.mark.parametrize("answer", [
    b"Connection: upgrade\r\nUpgrade: websocket\r\n",
    b"Connection: upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: "
    b"AAAAAAAAAAAAAAAAAAAAAAAAAAA=\r\n",
    b"Connection: upgrade\r\nUpgrade: h2c\r\nSec-WebSocket-Accept: " + ACCEPT.encode() + b"\r\n",
    b"Connection: upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: " + ACCEPT.encode()
    + b"\r\nSec-WebSocket-Accept: " + ACCEPT.encode() + b"\r\n",
], ids=["no Accept", "another Accept", "not websocket", "two Accepts"])
def test_a_101_without_the_matching_accept_is_refused(raw_upstream: Any, proxy: Any,
                                                      answer: bytes) -> None:
    up = raw_upstream(lambda head: b"HTTP/1.1 101 Switching Protocols\r\n" + answer + b"\r\n",
                      close_after=False)
    p = proxy({"/": up.url})
    head = ask(p.port, raw_request("GET", "/ws", HANDSHAKE))
    assert head.startswith(b"HTTP/1.1 502 "), head
    sent = up.requests[0].partition(b"\r\n\r\n")[0]
    assert f"\r\nSec-WebSocket-Key: {KEY}\r\n".encode() in sent
    assert b"\r\nSec-WebSocket-Version: 13\r\n" in sent
    wait_for(lambda: p.stats()[0]["open"] == 0, 10,
             'p.stats()[0]["open"] == 0')  # closed, not pooled


def test_a_101_with_the_matching_accept_becomes_a_tunnel(raw_upstream: Any,
                                                         proxy: Any) -> None:
    up = raw_upstream(lambda head: b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade"
                      b"\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: " + ACCEPT.encode()
                      + b"\r\n\r\nfrom the upstream", close_after=False)
    p = proxy({"/": up.url})
    with socket.create_connection((HOST, p.port), timeout=10) as sock:
        sock.sendall(raw_request("GET", "/ws", [*HANDSHAKE, ("Upgrade", "h2c")]))
        got = recv_head(sock) or b""
        while not got.endswith(b"from the upstream"):
            chunk = sock.recv(4096)
            assert chunk, got
            got += chunk
    assert got.startswith(b"HTTP/1.1 101 "), got
    assert f"\r\nSec-WebSocket-Accept: {ACCEPT}\r\n".encode() in got


def test_a_websocket_through_the_proxy_to_hypercorn(hypercorn: HypercornServer,
                                                    proxy: Any) -> None:
    p = proxy({"/public": hypercorn.url})
    assert_echoes(f"ws://{HOST}:{p.port}/public/ws")


def test_a_websocket_through_the_proxy_to_the_websockets_library(proxy: Any) -> None:
    def echo(ws: ServerConnection) -> None:
        for message in ws:
            ws.send(message)

    with serve(echo, HOST, 0) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            p = proxy({"/": f"http://{HOST}:{server.socket.getsockname()[1]}"})
            assert_echoes(f"ws://{HOST}:{p.port}/chat")
        finally:
            server.shutdown()
            thread.join(10)
