"""The WebSocket frame path: after a real upgrade, arbitrary bytes as client frames in
arbitrary reads, to a server that echoes every message. Whatever the client sends, what
comes back after the 101 is a sequence of whole, unmasked server frames with valid opcodes
(a close frame carrying a valid status code), and the server survives to the next input."""

from __future__ import annotations

import struct
from typing import Any

import cymongoose._mongoose as cm

from ..wire import LoopbackServer, split_pieces

UPGRADE = (b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")


def _frame(op: int, payload: bytes, fin: bool = True, mask: bytes = b"\x01\x02\x03\x04") -> bytes:
    n = len(payload)
    size = bytes([n]) if n < 126 else (b"\x7e" + struct.pack("!H", n))
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([(0x80 if fin else 0) | op, 0x80 | size[0]]) + size[1:] + mask + masked


SEEDS = [
    b"\x00" + _frame(1, b"hello"),
    b"\x83" + _frame(2, bytes(range(200))) + _frame(9, b"p") + _frame(8, b"\x03\xe8bye"),
    b"\x00" + _frame(1, b"he", fin=False) + _frame(9, b"") + _frame(0, b"llo"),
    b"\x00" + _frame(1, b"\xff\xfe") + _frame(8, b"\x00"),
]
# RFC 6455 §7.4: the codes a close frame may carry on the wire.
VALID_CLOSE = set(range(1000, 1004)) | set(range(1007, 1012)) | set(range(3000, 5000))

_server: LoopbackServer | None = None


def _echo(conn: cm.Connection, ev: int, msg: Any) -> None:
    if ev == cm.MG_EV_HTTP_MSG:
        conn.ws_upgrade(msg)
    elif ev == cm.MG_EV_WS_MSG:
        conn.ws_send(msg.data, msg.flags & 0x0F)


def _server_once() -> LoopbackServer:
    global _server
    if _server is None:
        _server = LoopbackServer(_echo)
    return _server


def server_frames(raw: bytes) -> list[tuple[int, bytes]]:
    """(opcode, payload) of each frame; AssertionError for anything a client must refuse."""
    frames = []
    i = 0
    while i < len(raw):
        assert len(raw) - i >= 2, f"a frame cut short at {i}"
        b0, b1 = raw[i], raw[i + 1]
        op = b0 & 0x0F
        assert b0 & 0x70 == 0, f"reserved bits set: {b0:#x}"
        assert op in (0, 1, 2, 8, 9, 10), f"opcode {op}"
        assert not b1 & 0x80, "a masked server frame"
        n, i = b1 & 0x7F, i + 2
        if n == 126:
            (n,), i = struct.unpack("!H", raw[i:i + 2]), i + 2
        elif n == 127:
            (n,), i = struct.unpack("!Q", raw[i:i + 8]), i + 8
        assert i + n <= len(raw), f"a frame of {n} bytes cut short"
        payload = raw[i:i + n]
        if op >= 8:
            assert b0 & 0x80 and n <= 125, "a fragmented or long control frame"
        if op == 8 and n >= 2:
            assert struct.unpack("!H", payload[:2])[0] in VALID_CLOSE, payload
        frames.append((op, payload))
        i += n
    return frames


def one_input(data: bytes) -> None:
    server = _server_once()
    reply = server.exchange([UPGRADE, *split_pieces(data)])
    assert not server.errors, f"the app raised: {server.errors!r}"
    head, sep, rest = reply.raw.partition(b"\r\n\r\n")
    assert sep and head.startswith(b"HTTP/1.1 101 "), reply.raw[:200]
    server_frames(rest)
