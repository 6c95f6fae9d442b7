"""The correctness check every contender passes before it is measured.

A raw-socket HTTP/1.1 client (no library between us and the bytes): two requests on one
connection, each answer checked for status, body and Content-Type, and the connection checked
to still be open after the first answer (keep-alive honoured). A contender that fails is
reported with the reason and never measured.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path

HELLO_BODY = b'{"message":"Hello, World!"}'
HELLO_TYPE = "application/json"


class CheckFailed(Exception):
    """The contender answered wrongly; the message says how."""


@dataclass
class Response:
    status: int
    reason: str
    version: str
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    raw_head: bytes = b""

    def header(self, name: str) -> str | None:
        name = name.lower()
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return None

    @property
    def wants_close(self) -> bool:
        conn = (self.header("connection") or "").lower()
        if self.version == "HTTP/1.0":
            return "keep-alive" not in conn
        return "close" in conn


class _Reader:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def _fill(self) -> bool:
        chunk = self.sock.recv(65536)
        if not chunk:
            return False
        self.buf += chunk
        return True

    def until(self, marker: bytes, limit: int = 65536) -> bytes:
        while marker not in self.buf:
            if len(self.buf) > limit:
                raise CheckFailed(f"no {marker!r} within {limit} bytes")
            if not self._fill():
                raise EOFError
        out, _, self.buf = self.buf.partition(marker)
        return out

    def exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            if not self._fill():
                raise CheckFailed(f"connection closed after {len(self.buf)} of {n} body bytes")
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def rest(self) -> bytes:
        while self._fill():
            pass
        out, self.buf = self.buf, b""
        return out


def _read_response(reader: _Reader, method: str) -> Response:
    head = reader.until(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise CheckFailed(f"malformed status line {lines[0]!r}")
    resp = Response(status=int(parts[1]), reason=parts[2] if len(parts) > 2 else "",
                    version=parts[0], raw_head=head)
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise CheckFailed(f"malformed header line {line!r}")
        resp.headers.append((name.strip(), value.strip()))
    if method == "HEAD" or resp.status in (204, 304) or resp.status < 200:
        return resp
    te = (resp.header("transfer-encoding") or "").lower()
    length = resp.header("content-length")
    if "chunked" in te:
        body = []
        while True:
            size = int(reader.until(b"\r\n").split(b";")[0], 16)
            if size == 0:
                reader.until(b"\r\n")  # no trailers expected
                break
            body.append(reader.exactly(size))
            reader.exactly(2)
        resp.body = b"".join(body)
    elif length is not None:
        resp.body = reader.exactly(int(length))
    else:
        resp.body = reader.rest()  # framed by close: keep-alive impossible
        resp.headers.append(("X-Check-Framing", "close"))
    return resp


def exchange(port: int, paths: list[str], host: str = "127.0.0.1",
             timeout: float = 5.0, headers: list[str] | None = None) -> list[Response]:
    """GET each path in turn on one connection, with `headers` ("Name: value") besides Host
    and User-Agent. Stops early if the server closes it."""
    extra = "".join(f"{h}\r\n" for h in headers or [])
    out: list[Response] = []
    with socket.create_connection((host, port), timeout=timeout) as sock:
        reader = _Reader(sock)
        for i, path in enumerate(paths):
            request = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                       f"User-Agent: bench-check\r\n{extra}\r\n")
            try:
                sock.sendall(request.encode("ascii"))
                out.append(_read_response(reader, "GET"))
            except (EOFError, ConnectionError) as exc:
                if i == 0:
                    raise CheckFailed(f"connection closed before any answer ({exc!r})") from None
                break
            except TimeoutError:
                raise CheckFailed(f"no complete answer to request {i + 1} within "
                                  f"{timeout:g} s") from None
            if out[-1].wants_close or out[-1].header("X-Check-Framing"):
                break
    return out


def _check_one(resp: Response, what: str, body: bytes, content_type: str | None) -> None:
    if resp.status != 200:
        raise CheckFailed(f"{what}: status {resp.status} {resp.reason}, expected 200")
    if content_type is not None:
        got = resp.header("content-type")
        if got is None:
            raise CheckFailed(f"{what}: no Content-Type, expected {content_type}")
        if got.split(";")[0].strip().lower() != content_type:
            raise CheckFailed(f"{what}: Content-Type {got!r}, expected {content_type}")
    if resp.body != body:
        shown = resp.body if len(resp.body) <= 80 else resp.body[:80] + b"..."
        raise CheckFailed(f"{what}: body {shown!r} ({len(resp.body)} bytes) differs from "
                          f"the expected {len(body)} bytes")


def _check_keepalive(responses: list[Response], wanted: int, keepalive: bool) -> str:
    if keepalive:
        if len(responses) < wanted:
            last = responses[-1]
            why = ("it answered 'Connection: close'" if last.wants_close
                   else "it closed the connection")
            raise CheckFailed(f"keep-alive not honoured: after request {len(responses)} {why}")
        return "keep-alive ok"
    # Declared without keep-alive (gunicorn's sync worker): it must say so, not just drop.
    if not responses[0].wants_close:
        raise CheckFailed("declared without keep-alive but did not send 'Connection: close'")
    return "no keep-alive (announced with Connection: close)"


def check_hello(port: int, keepalive: bool = True) -> tuple[str, str]:
    """(keep-alive note, the first answer's exact text) or CheckFailed."""
    responses = exchange(port, ["/", "/"])
    for i, resp in enumerate(responses):
        _check_one(resp, f"request {i + 1}", HELLO_BODY, HELLO_TYPE)
    answer = (responses[0].raw_head + b"\r\n\r\n" + responses[0].body).decode("latin-1")
    return _check_keepalive(responses, 2, keepalive), answer


def check_static(port: int, files: list[Path], keepalive: bool = True) -> str:
    picks = [files[0], files[len(files) // 2], files[-1]]
    responses = exchange(port, [f"/{p.name}" for p in picks])
    for resp, path in zip(responses, picks, strict=False):
        _check_one(resp, f"GET /{path.name}", path.read_bytes(), None)
    return _check_keepalive(responses, len(picks), keepalive)


def check_body(port: int, path: str, body: bytes, content_type: str,
               keepalive: bool = True) -> str:
    """GET path twice on one connection: each answer exactly `body`; the keep-alive note."""
    responses = exchange(port, [path, path])
    for i, resp in enumerate(responses):
        _check_one(resp, f"GET {path} #{i + 1}", body, content_type)
    return _check_keepalive(responses, 2, keepalive)


def check_close(port: int, host: str = "127.0.0.1", timeout: float = 5.0) -> str:
    """GET / with `Connection: close`: the hello, then the server closes the connection (what
    makes wrk open a new one for the next request: one that kept it open would be measured on
    keep-alive). The note says whether the answer also announced the close."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        reader = _Reader(sock)
        sock.sendall(f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: bench-check\r\n"
                     "Connection: close\r\n\r\n".encode("ascii"))
        try:
            resp = _read_response(reader, "GET")
        except (EOFError, ConnectionError) as exc:
            raise CheckFailed(f"connection closed before any answer ({exc!r})") from None
        _check_one(resp, "GET / with Connection: close", HELLO_BODY, HELLO_TYPE)
        try:
            extra = reader.rest()
        except TimeoutError:
            raise CheckFailed(f"the connection was still open {timeout:g} s after the answer "
                              "to a 'Connection: close' request") from None
        except ConnectionError:
            extra = b""  # a reset after the answer is a close too
        if extra:
            raise CheckFailed(f"{len(extra)} bytes after the answer")
    return ("closed, announced" if resp.wants_close else
            "closed without 'Connection: close' in the answer")
