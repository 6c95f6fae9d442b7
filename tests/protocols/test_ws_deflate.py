"""WebSocket permessage-deflate (RFC 7692) on raw handlers: ws_upgrade(deflate=True) against
the `websockets` library's client, and hand-built frames where the bytes matter (bombs,
corrupt data, RSV1 where it is not allowed)."""

from __future__ import annotations

import json
import os
import zlib
from typing import Any

import pytest
from support.waiting import wait_for
from support.ws_frames import close_code, deflate, frame, handshake, inflate, read_frame
from websockets.exceptions import ConnectionClosed
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory
from websockets.sync.client import connect

from cymongoose import MG_EV_ERROR, MG_EV_HTTP_MSG, MG_EV_WS_MSG, Connection

pytestmark = pytest.mark.timeout(60)

LIMIT = 1 << 20  # the message limit of the test server (max_body_size)


class DeflateServer:
    """An echo server on a background thread whose ws_upgrade() takes `deflate`; it records
    the flags of each message its handler saw and the errors."""

    def __init__(self, server_thread: Any, deflate: bool = True) -> None:
        self.deflate = deflate
        self.flags: list[int] = []
        self.errors: list[str] = []
        self.st = server_thread(self.handler)
        self.port = self.st.listen("http://127.0.0.1:0", max_body_size=LIMIT)
        self.st.start()

    def handler(self, conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            conn.ws_upgrade(data, deflate=self.deflate)
        elif ev == MG_EV_WS_MSG:
            self.flags.append(data.flags)
            conn.ws_send(data.data, data.flags & 0x0F)
        elif ev == MG_EV_ERROR:
            self.errors.append(data)

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/"


@pytest.fixture
def server(server_thread: Any) -> DeflateServer:
    return DeflateServer(server_thread)


@pytest.mark.parametrize(("offer", "answer"), [
    ("permessage-deflate", "permessage-deflate; server_max_window_bits=12"),
    ("permessage-deflate; client_max_window_bits",
     "permessage-deflate; server_max_window_bits=12; client_max_window_bits=12"),
    ("permessage-deflate; client_max_window_bits=10; server_max_window_bits=10; "
     "server_no_context_takeover; client_no_context_takeover",
     "permessage-deflate; server_max_window_bits=10; client_max_window_bits=10; "
     "server_no_context_takeover; client_no_context_takeover"),
    ('permessage-deflate; server_max_window_bits="13"',
     "permessage-deflate; server_max_window_bits=12"),
    # Bad offers get no extension (RFC 7692 §5); of several, the first acceptable one wins.
    ("permessage-deflate; foo", None),
    ("permessage-deflate; server_max_window_bits=16", None),
    ("permessage-deflate; server_max_window_bits", None),
    ("permessage-deflate; client_max_window_bits=010", None),
    ("permessage-deflate; server_no_context_takeover; server_no_context_takeover", None),
    ("permessage-deflate; client_no_context_takeover=1", None),
    ("permessage-deflate; server_max_window_bits=8", None),  # zlib cannot keep to 8
    ("x-webkit-deflate-frame", None),
    ("permessage-deflate; bad=1, permessage-deflate; server_no_context_takeover",
     "permessage-deflate; server_max_window_bits=12; server_no_context_takeover"),
])
def test_negotiation(server: DeflateServer, offer: str, answer: str | None) -> None:
    sock, got = handshake(server.port, offer)
    with sock:
        assert got == answer
        # Either way the WebSocket works: a plain message is echoed plainly.
        sock.sendall(frame(1, b"plain"))
        assert read_frame(sock) == (0x81, b"plain")


def test_off_by_default_for_raw_handlers(server_thread: Any) -> None:
    srv = DeflateServer(server_thread, deflate=False)
    sock, got = handshake(srv.port, "permessage-deflate")
    with sock:
        assert got is None
        sock.sendall(frame(1, deflate(b"x" * 200), rsv1=True))
        assert close_code(sock) == 1002  # RSV1 without the extension stays an error
    with connect(srv.url, open_timeout=5) as ws:
        assert ws.response.headers.get("Sec-WebSocket-Extensions") is None
        ws.send("hi" * 100)
        assert ws.recv(5) == "hi" * 100


@pytest.mark.parametrize("takeover", [True, False])
def test_round_trips_with_the_websockets_client(server: DeflateServer, takeover: bool) -> None:
    ext = ClientPerMessageDeflateFactory(
        server_no_context_takeover=not takeover, client_no_context_takeover=not takeover,
        client_max_window_bits=True)
    doc = json.dumps([{"id": i, "name": f"item {i}", "tags": ["a", "b"]} for i in range(400)])
    messages: list[str | bytes] = ["tiny", "ü" * 300, doc, doc.encode(), os.urandom(200_000),
                                   b"\x00" * 900_000, doc]
    with connect(server.url, open_timeout=5, extensions=[ext], compression=None,
                 max_size=None) as ws:
        agreed = ws.response.headers["Sec-WebSocket-Extensions"]
        assert ("server_no_context_takeover" in agreed) is not takeover
        for message in messages:
            ws.send(message)
            assert ws.recv(10) == message
    # The handler saw the messages inflated: RSV1 cleared, the opcode as sent.
    assert [f & 0x4F for f in server.flags] == [1, 1, 1, 2, 2, 2, 1]


def test_server_compresses_with_context_takeover(server: DeflateServer) -> None:
    sock, got = handshake(server.port, "permessage-deflate")
    text = b'{"key": "value", "numbers": [1, 2, 3, 4, 5, 6, 7, 8]}' * 20
    comp = zlib.compressobj(wbits=-15)
    decomp = zlib.decompressobj(wbits=-12)
    sizes = []
    with sock:
        assert got is not None
        for _ in range(2):
            out = comp.compress(text) + comp.flush(zlib.Z_SYNC_FLUSH)
            sock.sendall(frame(1, out[:-4], rsv1=True))
            b0, payload = read_frame(sock)
            assert b0 == 0xC1  # FIN, RSV1, TEXT
            assert decomp.decompress(payload + b"\x00\x00\xff\xff") == text
            sizes.append(len(payload))
        sock.sendall(frame(1, b"short"))  # under the threshold: sent as it is
        assert read_frame(sock) == (0x81, b"short")
    assert sizes[1] < sizes[0] < len(text) // 4  # the second refers to the first


def test_fragmented_compressed_message(server: DeflateServer) -> None:
    sock, _ = handshake(server.port, "permessage-deflate")
    text = ("fragmented and compressed " * 200).encode()
    packed = deflate(text)
    with sock:
        sock.sendall(frame(1, packed[:10], fin=False, rsv1=True) + frame(9, b"p")
                     + frame(0, packed[10:20], fin=False) + frame(0, packed[20:]))
        b0, pong = read_frame(sock)
        assert (b0, pong) == (0x8A, b"p")
        b0, payload = read_frame(sock)
        assert b0 == 0xC1 and inflate(payload, 12) == text


@pytest.mark.parametrize(("frames", "why"), [
    ([frame(1, b"x", fin=False), frame(0, b"y", rsv1=True)], "continuation"),
    ([frame(9, b"", rsv1=True)], "control"),
])
def test_rsv1_only_on_the_first_data_frame(server: DeflateServer, frames: list[bytes],
                                           why: str) -> None:
    sock, _ = handshake(server.port, "permessage-deflate")
    with sock:
        sock.sendall(b"".join(frames))
        assert close_code(sock) == 1002
    wait_for(lambda: server.errors, 5, "MG_EV_ERROR for RSV1 on a " + why)
    assert "RSV1" in server.errors[0]


def test_decompression_bomb_is_1009_and_others_are_served(server: DeflateServer) -> None:
    bomb = deflate(b"\x00" * (64 * LIMIT))  # 64 MiB of zeros in about 64 KiB
    assert len(bomb) < LIMIT // 8
    sock, _ = handshake(server.port, "permessage-deflate")
    with sock:
        sock.sendall(frame(2, bomb, rsv1=True))
        assert close_code(sock) == 1009
    wait_for(lambda: server.errors, 5, "MG_EV_ERROR for the bomb")
    assert "too big once inflated" in server.errors[0] and not server.flags
    # Exactly the limit still goes through.
    with connect(server.url, open_timeout=5, max_size=None) as ws:
        ws.send(b"\x01" * LIMIT)
        assert ws.recv(10) == b"\x01" * LIMIT


def test_bomb_from_the_websockets_client(server: DeflateServer) -> None:
    with connect(server.url, open_timeout=5) as ws:
        ws.send(b"\x00" * (LIMIT + 1))
        with pytest.raises(ConnectionClosed) as info:
            ws.recv(10)
    assert info.value.rcvd is not None and info.value.rcvd.code == 1009


def test_corrupt_compressed_frame_is_1007(server: DeflateServer) -> None:
    sock, _ = handshake(server.port, "permessage-deflate")
    with sock:
        sock.sendall(frame(1, b"\xff\xff\xff\xff not deflate", rsv1=True))
        assert close_code(sock) == 1007
    wait_for(lambda: server.errors, 5, "MG_EV_ERROR for the corrupt frame")
    assert "does not inflate" in server.errors[0]
    with connect(server.url, open_timeout=5) as ws:
        ws.send("still serving " * 20)
        assert ws.recv(5) == "still serving " * 20


def test_ws_upgrade_leaves_an_extensions_header_of_the_caller(server_thread: Any) -> None:
    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            conn.ws_upgrade(data, {"Sec-WebSocket-Extensions": "x-mine"}, deflate=True)
    st = server_thread(handler)
    port = st.listen("http://127.0.0.1:0")
    st.start()
    sock, got = handshake(port, "permessage-deflate")
    sock.close()
    assert got == "x-mine"
