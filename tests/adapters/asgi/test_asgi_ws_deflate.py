"""WebSocket permessage-deflate on the ASGI server: on by default as in uvicorn (the same
cases run against it), off with Config(ws_per_message_deflate=False); the message limit holds
for inflated messages (1009) and data that does not inflate is a 1007."""

from __future__ import annotations

import json
import os

import pytest
from support.asgi_fixtures import ServeASGI
from support.served import Served
from support.ws_frames import close_code, deflate, frame, handshake, read_frame
from websockets.exceptions import ConnectionClosed
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory
from websockets.sync.client import connect

from cymongoose.config import Config

pytestmark = pytest.mark.timeout(60)

LIMIT = 1 << 20


def url(served: Served) -> str:
    return f"ws://127.0.0.1:{served.port}/ws/echo"


DOC = json.dumps([{"id": i, "name": f"item {i}", "tags": ["a", "b"]} for i in range(400)])


def test_negotiated_by_default_and_round_trips(asgi_served: Served) -> None:
    with connect(url(asgi_served), open_timeout=5, max_size=None) as ws:
        assert "permessage-deflate" in ws.response.headers["Sec-WebSocket-Extensions"]
        for message in ("hi", DOC, DOC.encode(), os.urandom(100_000), b"\x00" * 2_000_000):
            ws.send(message)
            assert ws.recv(10) == message


def test_no_context_takeover_round_trips(asgi_served: Served) -> None:
    ext = ClientPerMessageDeflateFactory(server_no_context_takeover=True,
                                         client_no_context_takeover=True)
    with connect(url(asgi_served), open_timeout=5, extensions=[ext], compression=None) as ws:
        assert "server_no_context_takeover" in ws.response.headers["Sec-WebSocket-Extensions"]
        for _ in range(3):
            ws.send(DOC)
            assert ws.recv(10) == DOC


def test_bad_offer_gets_no_extension(asgi_served: Served) -> None:
    sock, got = handshake(asgi_served.port,
                          "permessage-deflate; server_max_window_bits=99", path="/ws/echo")
    with sock:
        assert got is None
        sock.sendall(frame(1, b"plain"))
        assert read_frame(sock) == (0x81, b"plain")


def test_off_with_the_config_option(our_asgi: ServeASGI) -> None:
    served = our_asgi(server_kwargs={"config": Config(ws_per_message_deflate=False)})
    with connect(url(served), open_timeout=5) as ws:
        assert ws.response.headers.get("Sec-WebSocket-Extensions") is None
        ws.send(DOC)
        assert ws.recv(5) == DOC


def test_bomb_is_1009_corrupt_is_1007_and_others_are_served(our_asgi: ServeASGI) -> None:
    served = our_asgi(max_body_size=LIMIT)
    sock, got = handshake(served.port, "permessage-deflate", path="/ws/echo")
    with sock:
        assert got is not None
        sock.sendall(frame(2, deflate(b"\x00" * (64 * LIMIT)), rsv1=True))
        assert close_code(sock) == 1009
    sock, _ = handshake(served.port, "permessage-deflate", path="/ws/echo")
    with sock:
        sock.sendall(frame(1, b"\xff\xff\xff\xff not deflate", rsv1=True))
        assert close_code(sock) == 1007
    with connect(url(served), open_timeout=5) as ws:
        ws.send(b"\x00" * (LIMIT + 1))  # compressed by the client: small on the wire
        with pytest.raises(ConnectionClosed) as info:
            ws.recv(10)
    assert info.value.rcvd is not None and info.value.rcvd.code == 1009
    with connect(url(served), open_timeout=5, max_size=None) as ws:
        ws.send(DOC)
        assert ws.recv(5) == DOC


def test_an_app_that_negotiates_itself_is_left_alone(our_asgi: ServeASGI) -> None:
    async def app(scope: dict, receive: object, send: object) -> None:  # type: ignore[type-arg]
        if scope["type"] != "websocket":
            return
        await receive()  # type: ignore[operator]
        await send({"type": "websocket.accept",  # type: ignore[operator]
                    "headers": [(b"sec-websocket-extensions", b"x-mine")]})
        await receive()  # type: ignore[operator]

    served = our_asgi(app)
    sock, got = handshake(served.port, "permessage-deflate", path="/")
    sock.close()
    assert got == "x-mine"
