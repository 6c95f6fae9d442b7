"""WebSocket on the raw app with the `websockets` library as the peer (raw sockets where
framing matters): the handshake waits for the app's accept; text, bytes and close codes
both ways; the app's HTTP answer instead of a handshake. Ours and uvicorn alike."""

from __future__ import annotations

import base64
import json
import os
import socket
import uuid

import pytest
from support.app_state import wait_state
from support.http_client import HttpConnection, raw_request
from support.served import Served
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

pytestmark = pytest.mark.timeout(60)


def url(served: Served, path: str) -> str:
    return f"ws://127.0.0.1:{served.port}{path}"


def state(served: Served, token: str) -> dict:
    got = wait_state(served.port, token, lambda st: True)
    assert got, f"nothing recorded for {token}"
    return got


def test_echo_text_and_bytes(asgi_served: Served) -> None:
    with connect(url(asgi_served, "/ws/echo"), open_timeout=5, max_size=None) as ws:
        ws.send("héllo")
        assert ws.recv(5) == "héllo"
        ws.send(b"\x00\xffbin")
        assert ws.recv(5) == b"\x00\xffbin"
        big = os.urandom(3 << 20)
        ws.send(big)
        assert ws.recv(10) == big
        ws.send("scope")
        scope = json.loads(ws.recv(5))
    assert scope["path"] == "/ws/echo" and scope["scheme"] == "ws"
    assert scope["state"] == {"greeting": "hello from lifespan"}


def test_subprotocol_and_extra_headers_of_accept(asgi_served: Served) -> None:
    with connect(url(asgi_served, "/ws/echo?x=1"), subprotocols=["chat.v1", "chat.v2"],
                 open_timeout=5) as ws:
        assert ws.subprotocol == "chat.v2"
        assert ws.response.headers["x-extra"] == "yes"
        ws.send("scope")
        scope = json.loads(ws.recv(5))
    assert scope["subprotocols"] == ["chat.v1", "chat.v2"]
    assert scope["query_string"] == "x=1"


def test_close_code_and_reason_from_the_app(asgi_served: Served) -> None:
    with connect(url(asgi_served, "/ws/echo"), open_timeout=5) as ws:
        ws.send("close:4001:going away now")
        with pytest.raises(ConnectionClosed) as info:
            ws.recv(5)
    assert info.value.rcvd is not None
    assert info.value.rcvd.code == 4001 and info.value.rcvd.reason == "going away now"


def test_close_code_and_reason_from_the_client(asgi_served: Served) -> None:
    token = uuid.uuid4().hex
    with connect(url(asgi_served, f"/ws/echo?token={token}"), open_timeout=5) as ws:
        ws.send("hi")
        assert ws.recv(5) == "hi"
        ws.close(4002, "client leaves")
    assert state(asgi_served, token) == {"code": 4002, "reason": "client leaves"}


def test_client_vanishing_is_a_disconnect(asgi_served: Served) -> None:
    token = uuid.uuid4().hex
    with connect(url(asgi_served, f"/ws/echo?token={token}"), open_timeout=5) as ws:
        ws.send("hi")
        assert ws.recv(5) == "hi"
        ws.socket.shutdown(socket.SHUT_RDWR)  # gone without a close frame
    assert state(asgi_served, token)["code"] == 1006


@pytest.mark.parametrize("path", ["/ws/reject", "/ws/return"])
def test_closed_before_accept_is_403(asgi_served: Served, path: str) -> None:
    with pytest.raises(InvalidStatus) as info:
        connect(url(asgi_served, path), open_timeout=5)
    # uvicorn answers an app that returns without accepting with 500; ours treats it as the
    # close-before-accept it is (403).
    allowed = {403} if asgi_served.ours or path == "/ws/reject" else {403, 500}
    assert info.value.response.status_code in allowed


def test_app_failing_before_accept_is_500(asgi_served: Served) -> None:
    with pytest.raises(InvalidStatus) as info:
        connect(url(asgi_served, "/ws/raise"), open_timeout=5)
    assert info.value.response.status_code == 500


def test_websocket_http_response_extension(asgi_served: Served) -> None:
    with pytest.raises(InvalidStatus) as info:
        connect(url(asgi_served, "/ws/http-response"), open_timeout=5)
    assert info.value.response.status_code == 418
    assert info.value.response.body == b"I'm a teapot"


def test_pings_are_answered(asgi_served: Served) -> None:
    with connect(url(asgi_served, "/ws/echo"), open_timeout=5) as ws:
        for _ in range(3):
            assert ws.ping(b"are you there").wait(5)
        ws.send("still here")
        assert ws.recv(5) == "still here"


def _handshake(port: int, path: str = "/ws/echo") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(raw_request("GET", path, [("Upgrade", "websocket"), ("Connection", "Upgrade"),
                                           ("Sec-WebSocket-Key", key),
                                           ("Sec-WebSocket-Version", "13")]))
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock


def _frame(op: int, payload: bytes, fin: bool = True) -> bytes:
    mask = os.urandom(4)
    n = len(payload)
    head = bytes([(0x80 if fin else 0) | op])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + n.to_bytes(2, "big")
    else:
        head += bytes([0x80 | 127]) + n.to_bytes(8, "big")
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def _read_frame(sock: socket.socket) -> tuple[int, bytes]:
    def exact(n: int) -> bytes:
        out = b""
        while len(out) < n:
            data = sock.recv(n - len(out))
            assert data, "closed"
            out += data
        return out
    b0, b1 = exact(2)
    n = b1 & 0x7F
    if n == 126:
        n = int.from_bytes(exact(2), "big")
    elif n == 127:
        n = int.from_bytes(exact(8), "big")
    return b0 & 0x0F, exact(n)


def test_fragmented_message_and_interleaved_ping_on_raw_frames(asgi_served: Served) -> None:
    with _handshake(asgi_served.port) as sock:
        sock.sendall(_frame(1, b"frag", fin=False) + _frame(9, b"p1") +
                     _frame(0, b"mented", fin=True))
        frames = [_read_frame(sock), _read_frame(sock)]
        assert (10, b"p1") in frames  # the pong
        assert (1, b"fragmented") in frames
        sock.sendall(_frame(8, (1000).to_bytes(2, "big") + b"bye"))
        op, payload = _read_frame(sock)
        assert op == 8 and payload[:2] == (1000).to_bytes(2, "big")


def test_plain_http_still_served_beside_websockets(asgi_served: Served) -> None:
    with connect(url(asgi_served, "/ws/echo"), open_timeout=5) as ws:
        with HttpConnection(asgi_served.port) as c:
            assert c.request("GET", "/_ctl/ping").body == b"pong"
        ws.send("x")
        assert ws.recv(5) == "x"


def test_a_lazy_app_stops_the_server_reading(asgi_served: Served) -> None:
    # The app receives nothing for 3 s: the server stops reading, so the client's sends
    # stall long before 64 MiB; then every byte still arrives, in order.
    piece = os.urandom(65536)
    frame = _frame(2, piece)  # masked once: masking in Python is slow (the same key is fine)
    frames = 0
    pending = b""
    with _handshake(asgi_served.port, "/ws/lazy?sleep=3") as sock:
        sock.settimeout(0.5)
        try:
            while frames < 1024:
                if not pending:
                    pending = frame
                    frames += 1
                pending = pending[sock.send(pending):]
        except TimeoutError:
            pass
        assert frames < 768, f"{frames} x 64 KiB accepted while the app read nothing"
        sock.settimeout(20)
        sock.sendall(pending)  # the rest of the frame the stall cut
        sock.sendall(_frame(1, b"end"))
        op, payload = _read_frame(sock)
    assert op == 1 and int(payload) == frames * len(piece)


def test_text_that_is_not_utf8_closes_with_1007(asgi_served: Served) -> None:
    with _handshake(asgi_served.port) as sock:
        sock.sendall(_frame(1, b"ok"))
        assert _read_frame(sock) == (1, b"ok")
        sock.sendall(_frame(1, b"\xff\xfe not text"))
        op, payload = _read_frame(sock)
    assert op == 8 and int.from_bytes(payload[:2], "big") == 1007
