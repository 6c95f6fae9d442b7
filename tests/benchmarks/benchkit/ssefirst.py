"""Time to the first server-sent event, decoded: a raw-socket HTTP/1.1 client that sends the
request, then reads the answer's head, undoes its chunked framing and its Content-Encoding as
the bytes arrive, and stops the clock when the first event (text up to a blank line) is whole.
A compressor that holds its output (waiting for more input to fill a block) shows here as a
time of about the stream's interval, or as a timeout.
"""

from __future__ import annotations

import socket
import time
import zlib
from dataclasses import dataclass
from typing import Any


@dataclass
class First:
    seconds: float | None  # None: no event within the timeout
    content_encoding: str  # "identity" when the answer had none
    status: int
    event: bytes
    error: str = ""


def _decoder(coding: str) -> Any:
    if coding == "gzip":
        return zlib.decompressobj(wbits=31)
    if coding == "zstd":
        import zstandard
        return zstandard.ZstdDecompressor().decompressobj()
    if coding == "identity":
        return None
    raise ValueError(f"cannot decode {coding!r}")


class _Chunks:
    """Incremental chunked decoding: feed() bytes, get the payload bytes whole so far."""

    def __init__(self) -> None:
        self.buf = b""
        self.left = 0  # payload bytes left in the current chunk, then its CRLF

    def feed(self, data: bytes) -> bytes:
        self.buf += data
        out = []
        while self.buf:
            if self.left:
                take = self.buf[:self.left]
                out.append(take)
                self.left -= len(take)
                self.buf = self.buf[len(take):]
                if self.left:
                    break
                self.left = -2  # its CRLF
            if self.left < 0:
                if len(self.buf) < 2:
                    break
                self.buf, self.left = self.buf[2:], 0
            line, sep, rest = self.buf.partition(b"\r\n")
            if not sep:
                break
            self.left, self.buf = int(line.split(b";")[0], 16), rest
            if self.left == 0:
                self.buf = b""
                break
        return b"".join(out)


def first_event(port: int, path: str, accept_encoding: str | None,
                timeout: float = 2.0, host: str = "127.0.0.1") -> First:
    """One request on a new connection (connected before the clock starts)."""
    deadline_s = timeout
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        ae = f"Accept-Encoding: {accept_encoding}\r\n" if accept_encoding else ""
        request = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: text/event-stream\r\n"
                   f"{ae}\r\n").encode("ascii")
        started = time.perf_counter()
        sock.sendall(request)
        raw, head = b"", None
        status, coding, chunked = 0, "identity", False
        chunks, decoder, text = _Chunks(), None, b""
        while True:
            left = deadline_s - (time.perf_counter() - started)
            if left <= 0:
                return First(None, coding, status, b"", "timeout")
            sock.settimeout(left)
            try:
                data = sock.recv(65536)
            except TimeoutError:
                return First(None, coding, status, b"", "timeout")
            if not data:
                return First(None, coding, status, b"", "closed before the first event")
            if head is None:
                raw += data
                if b"\r\n\r\n" not in raw:
                    continue
                head, _, data = raw.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                status = int(lines[0].split()[1])
                fields = {k.strip().lower(): v.strip() for k, _, v in
                          (ln.partition(":") for ln in lines[1:])}
                coding = fields.get("content-encoding", "identity").lower()
                chunked = "chunked" in fields.get("transfer-encoding", "").lower()
                if status != 200:
                    return First(None, coding, status, b"", f"status {status}")
                decoder = _decoder(coding)
            payload = chunks.feed(data) if chunked else data
            text += decoder.decompress(payload) if decoder is not None else payload
            end = text.find(b"\n\n")
            if end >= 0:
                return First(time.perf_counter() - started, coding, status, text[:end + 2])
