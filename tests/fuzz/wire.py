"""One fuzz input as one client connection to a Manager driven from the caller's thread.

No poll thread: the harness sends a piece, polls once so the server reads exactly that piece
(loopback queues it on the server's socket before send() returns), and so on; the splits the
fuzzer chose are the reads the parser sees. Then the client half-closes and the exchange
ends when the server closes, or fails when the server neither answers nor closes."""

from __future__ import annotations

import errno
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cymongoose._mongoose as cm

# A server that makes no progress for this long with the client gone is stuck: a failure.
# Wall time, not a poll count, so a loaded machine cannot turn it into a false report.
STUCK_S = 5.0


def fields(data: bytes, count: int) -> list[bytes]:
    """data cut at NUL bytes into exactly `count` arguments (the last takes the rest, missing
    ones are empty): how a harness of several inputs reads one fuzz input, and a form a
    mutation keeps."""
    parts = data.split(b"\0", count - 1)
    return parts + [b""] * (count - len(parts))


def split_pieces(data: bytes) -> list[bytes]:
    """The first byte chooses the reads: below 0x80 all of it at once, else pieces of
    (byte & 0x7f) + 1 bytes, down to one byte per read."""
    if not data:
        return []
    first, payload = data[0], data[1:]
    if first < 0x80 or not payload:
        return [payload]
    size = (first & 0x7F) + 1
    return [payload[i:i + size] for i in range(0, len(payload), size)]


@dataclass
class Reply:
    raw: bytes
    closed: bool  # the server closed (EOF or reset) before the client did


class LoopbackServer:
    """A Manager with one listener on 127.0.0.1 (HTTP, or MQTT for an mqtt:// URL); errors
    the handler raises are collected, never lost."""

    def __init__(self, handler: Callable[[Any, int, Any], None], url: str = "http://127.0.0.1:0",
                 **listen_options: Any) -> None:
        self.errors: list[BaseException] = []
        self.mgr = cm.Manager(error_handler=self.errors.append)
        if url.startswith("mqtt://"):
            self.listener = self.mgr.mqtt_listen(url, handler)
        else:
            self.listener = self.mgr.listen(url, handler, **listen_options)
        addr = self.listener.local_addr
        assert addr is not None
        self.port = addr[1]

    def client_count(self) -> int:
        return len(self.mgr.connections) - 1

    def exchange(self, pieces: list[bytes], half_close: bool = True) -> Reply:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        raw = bytearray()
        closed = False
        try:
            sock.connect_ex(("127.0.0.1", self.port))
            self._settle(lambda: self.client_count() == 1, "the accept")
            for piece in pieces:
                closed = self._send(sock, piece, raw)
                if closed:
                    break
                self.mgr.poll(0)
                closed = _read(sock, raw)
                if closed:
                    break
            if not closed and half_close:
                try:
                    sock.shutdown(socket.SHUT_WR)
                except OSError:
                    closed = True
            while not closed:
                progress = len(raw)
                deadline = time.monotonic() + STUCK_S
                while not closed and len(raw) == progress:
                    if time.monotonic() > deadline:
                        raise AssertionError(
                            f"the server neither answered nor closed in {STUCK_S} s "
                            f"after {len(raw)} bytes of reply")
                    self.mgr.poll(1)
                    closed = _read(sock, raw)
        finally:
            sock.close()
        # Nothing of this input may outlive it: the next input starts from a fresh server side.
        self._settle(lambda: self.client_count() == 0, "the server to drop the connection")
        return Reply(bytes(raw), closed)

    def _send(self, sock: socket.socket, piece: bytes, raw: bytearray) -> bool:
        view = memoryview(piece)
        deadline = time.monotonic() + STUCK_S
        while view:
            try:
                view = view[sock.send(view):]
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise AssertionError("the server stopped reading") from None
                self.mgr.poll(1)
                if _read(sock, raw):
                    return True
            except OSError as exc:
                if exc.errno in (errno.EPIPE, errno.ECONNRESET):
                    return True
                raise
        return False

    def _settle(self, done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + STUCK_S
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            self.mgr.poll(1)

    def close(self) -> None:
        self.mgr.close()


def _read(sock: socket.socket, raw: bytearray) -> bool:
    """Append what arrived; True once the server closed."""
    while True:
        try:
            chunk = sock.recv(65536)
        except BlockingIOError:
            return False
        except ConnectionResetError:
            return True
        if not chunk:
            return True
        raw += chunk
