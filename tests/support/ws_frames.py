"""WebSocket frames by hand, for the permessage-deflate tests: a raw handshake that offers
extensions, masked client frames (RSV1 on request), raw deflate as RFC 7692 §7.2 has it,
and reading the server's frames and close code."""

from __future__ import annotations

import os
import socket
import struct
import zlib


def handshake(port: int, extensions: str | None, path: str = "/"
              ) -> tuple[socket.socket, str | None]:
    """A raw upgrade offering `extensions`: the socket and the response's
    Sec-WebSocket-Extensions (None when absent)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    offer = f"Sec-WebSocket-Extensions: {extensions}\r\n" if extensions is not None else ""
    sock.sendall((f"GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                  f"{offer}\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        assert chunk, f"closed during the handshake: {head!r}"
        head += chunk
    assert head.startswith(b"HTTP/1.1 101"), head
    for line in head.decode("latin-1").split("\r\n"):
        name, _, value = line.partition(":")
        if name.strip().lower() == "sec-websocket-extensions":
            return sock, value.strip()
    return sock, None


def frame(op: int, payload: bytes, *, fin: bool = True, rsv1: bool = False) -> bytes:
    """A masked client frame."""
    head = bytes([(0x80 if fin else 0) | (0x40 if rsv1 else 0) | op])
    n = len(payload)
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    key = os.urandom(4)
    masked = (int.from_bytes(payload, "big") ^ int.from_bytes((key * (n // 4 + 1))[:n], "big")
              ).to_bytes(n, "big") if n else b""
    return head + key + masked


def deflate(data: bytes, wbits: int = 15) -> bytes:
    c = zlib.compressobj(wbits=-wbits)
    out = c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH)
    assert out.endswith(b"\x00\x00\xff\xff")
    return out[:-4]


def recv_exact(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise EOFError(f"peer closed after {len(out)} of {n} bytes")
        out += chunk
    return out


def read_frame(sock: socket.socket) -> tuple[int, bytes]:
    b0, b1 = recv_exact(sock, 2)
    n = b1 & 0x7F
    if n == 126:
        (n,) = struct.unpack("!H", recv_exact(sock, 2))
    elif n == 127:
        (n,) = struct.unpack("!Q", recv_exact(sock, 8))
    return b0, recv_exact(sock, n)


def close_code(sock: socket.socket) -> int:
    """Read frames up to the server's CLOSE; its code."""
    while True:
        b0, payload = read_frame(sock)
        if b0 & 0x0F == 8:
            return int.from_bytes(payload[:2], "big")


def inflate(payload: bytes, wbits: int = 15) -> bytes:
    return zlib.decompressobj(wbits=-wbits).decompress(payload + b"\x00\x00\xff\xff")
