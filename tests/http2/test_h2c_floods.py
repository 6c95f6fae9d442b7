"""The HTTP/2 floods that cost a server more than the client, refused with GOAWAY
ENHANCE_YOUR_CALM (11) whatever libnghttp2 version the module runs with, while other
clients are served on."""

from __future__ import annotations

from typing import Any

import hpack
import pytest
from support.h2_peer import H2Peer, frame, goaway_code, raw_connection, read_until_closed

from cymongoose import MG_EV_HTTP_MSG, Connection
from cymongoose._mongoose import HTTP2_LIBRARY

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(HTTP2_LIBRARY is None, reason="built without HTTP/2")]

HEADERS, RST_STREAM, CONTINUATION, DATA = 1, 3, 9, 0
END_STREAM, END_HEADERS = 1, 4


def block() -> bytes:
    """A request head, HPACK-encoded without the dynamic table (valid on any stream)."""
    enc = hpack.Encoder()
    enc.header_table_size = 0
    return bytes(enc.encode([(":method", "GET"), (":path", "/"), (":scheme", "http"),
                             (":authority", "localhost")], huffman=False))


@pytest.fixture
def port(server_thread: Any) -> int:
    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            conn.reply(200, b"ok")

    st = server_thread(handler)
    p = st.listen()
    st.start()
    return int(p)


def served(port: int) -> bool:
    with H2Peer(port) as peer:
        (a,) = peer.wait_answers(peer.request("/"))
        return a.status == 200


def flood(port: int, data: bytes) -> int | None:
    """Send `data` after the preface; the GOAWAY code the server closed with."""
    with raw_connection(port) as sock:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed while the flood was still going out
        return goaway_code(read_until_closed(sock))


def test_rapid_reset_ends_the_connection(port: int) -> None:
    head = block()
    burst = b"".join(frame(HEADERS, END_STREAM | END_HEADERS, sid, head)
                     + frame(RST_STREAM, 0, sid, (8).to_bytes(4, "big"))
                     for sid in range(1, 2 * 1200, 2))
    assert flood(port, burst) == 11
    assert served(port)


def test_empty_data_frames_flood_ends_the_connection(port: int) -> None:
    opened = frame(HEADERS, END_HEADERS, 1, block())
    assert flood(port, opened + frame(DATA, 0, 1) * 1500) == 11
    assert served(port)


def test_continuation_flood_ends_the_connection(port: int) -> None:
    # A head left open (no END_HEADERS) and continued by frame after frame.
    head = block()
    continued = frame(HEADERS, END_STREAM, 1, head[:2]) + b"".join(
        frame(CONTINUATION, 0, 1, b"\x00\x01a\x01b") for _ in range(200))
    assert flood(port, continued) == 11
    assert served(port)


def test_a_few_resets_are_not_a_flood(port: int) -> None:
    with H2Peer(port) as peer:
        for _ in range(50):
            peer.reset(peer.request("/"))
        (a,) = peer.wait_answers(peer.request("/"))
        assert a.status == 200 and peer.goaway is None


@pytest.mark.parametrize("kind, payload", [(6, b"pingpong"), (4, b"")], ids=["PING", "SETTINGS"])
def test_control_frame_floods_from_a_client_that_does_not_read(port: int, kind: int,
                                                               payload: bytes) -> None:
    # Each asks for an ACK; a client that never reads them makes the server queue them.
    # nghttp2 ends the connection once 1000 wait (NGHTTP2_ERR_FLOODED); a client that
    # does read gets its ACKs. Either way the connection is bounded and others are served.
    with raw_connection(port) as sock:
        try:
            for _ in range(400):
                sock.sendall(frame(kind, 0, 0, payload) * 1000)
        except (BrokenPipeError, ConnectionResetError):
            pass  # ended while the flood was still going out
        frames = read_until_closed(sock, timeout=30)
    assert goaway_code(frames) in (None, 11)
    assert served(port)
