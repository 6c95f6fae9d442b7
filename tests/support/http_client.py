"""A small blocking HTTP/1.x client on a raw socket, with h11 (the strict reference parser)
reading every response, so that a malformed response fails the test instead of being
guessed at. Requests can also be written as raw bytes (pipelining, HTTP/1.0, odd headers)."""

from __future__ import annotations

import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from types import TracebackType

import h11

from .ports import HOST

Headers = Sequence[tuple[str, str]]


class IncompleteResponse(Exception):
    """The server closed the connection before the response was complete (a truncated
    response; `partial` holds what had arrived)."""

    def __init__(self, message: str, partial: Response | None) -> None:
        super().__init__(message)
        self.partial = partial


@dataclass
class Response:
    status: int
    reason: str
    http_version: str
    headers: list[tuple[str, str]]  # names lower-cased, values latin-1 decoded
    body: bytes = b""
    chunks: list[bytes] = field(default_factory=list)

    def header(self, name: str) -> str | None:
        values = self.header_list(name)
        return ", ".join(values) if values else None

    def header_list(self, name: str) -> list[str]:
        name = name.lower()
        return [v for k, v in self.headers if k == name]


class HttpConnection:
    """One client connection. `request()` sends with h11 and reads the response; `send_raw()`
    plus `read_response(method)` handle requests written by hand, in order."""

    def __init__(self, port: int, host: str = HOST, timeout: float = 5.0) -> None:
        self.host = host
        self.port = port
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._h11 = h11.Connection(h11.CLIENT)
        self._pending_send = False

    def __enter__(self) -> HttpConnection:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def settimeout(self, timeout: float) -> None:
        self.sock.settimeout(timeout)

    def _next_cycle(self) -> None:
        if self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE:
            self._h11.start_next_cycle()

    def _announce(self, method: str, target: str, headers: Headers,
                  http_version: str) -> bytes:
        """Tell h11 a request was sent (so it can frame the response); returns its bytes."""
        self._next_cycle()
        hdrs = list(headers)
        if http_version == "1.1" and not any(k.lower() == "host" for k, _ in hdrs):
            hdrs.insert(0, ("Host", f"{self.host}:{self.port}"))
        return self._h11.send(h11.Request(method=method, target=target, headers=hdrs,
                                          http_version=http_version)) or b""

    def send_request(self, method: str, target: str, headers: Headers = (),
                     body: bytes | Iterable[bytes] | None = None) -> None:
        """Send one request with h11. bytes → Content-Length; another iterable → chunked
        (unless `headers` give a Content-Length); None → no body."""
        hdrs = list(headers)
        names = {k.lower() for k, _ in hdrs}
        if isinstance(body, bytes):
            if "content-length" not in names and (body or method in ("POST", "PUT")):
                hdrs.append(("Content-Length", str(len(body))))
        elif body is not None and "content-length" not in names:
            hdrs.append(("Transfer-Encoding", "chunked"))
        self.sock.sendall(self._announce(method, target, hdrs, "1.1"))
        if isinstance(body, bytes):
            if body:
                self.sock.sendall(self._h11.send(h11.Data(data=body)) or b"")
        elif body is not None:
            for part in body:
                if part:
                    self.sock.sendall(self._h11.send(h11.Data(data=part)) or b"")
        self.sock.sendall(self._h11.send(h11.EndOfMessage()) or b"")

    def request(self, method: str, target: str, headers: Headers = (),
                body: bytes | Iterable[bytes] | None = None) -> Response:
        self.send_request(method, target, headers, body)
        return self.read_response(method)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def expect(self, method: str = "GET", http_version: str = "1.1",
               headers: Headers = ()) -> None:
        """Record that a request written with send_raw() awaits its response (in order).
        h11 only speaks HTTP/1.1, so an HTTP/1.0 request is announced as a 1.1 one with the
        same persistence (`Connection: close` unless `headers` say keep-alive); tests of
        HTTP/1.0 check themselves that the response carries no chunked framing."""
        hdrs = list(headers)
        if http_version == "1.0" and not any(k.lower() == "connection" for k, _ in hdrs):
            hdrs.append(("Connection", "close"))
        self._announce(method, "/", hdrs, "1.1")
        self._h11.send(h11.EndOfMessage())

    def _event(self, partial: Response | None = None) -> object:
        """The next h11 event. A close in the middle of a message (a truncated response) is
        IncompleteResponse; any other protocol error h11 finds propagates."""
        while True:
            try:
                event = self._h11.next_event()
            except h11.RemoteProtocolError as exc:
                if "peer closed connection" in str(exc):
                    raise IncompleteResponse(str(exc), partial) from exc
                raise
            if event is not h11.NEED_DATA:
                return event
            try:
                data = self.sock.recv(1 << 20)
            except ConnectionResetError:
                data = b""
            self._h11.receive_data(data)

    def read_head(self, method: str = "GET", http_version: str | None = None,
                  headers: Headers = ()) -> Response:
        """Read the status line and headers of the next response. A request sent with
        send_raw() must be described by `method`/`http_version` (h11 frames by them)."""
        if http_version is not None:
            self.expect(method, http_version, headers)
        while True:
            event = self._event()
            if isinstance(event, h11.InformationalResponse):
                continue
            if isinstance(event, h11.Response):
                return Response(
                    status=event.status_code, reason=event.reason.decode("latin-1"),
                    http_version=event.http_version.decode("ascii"),
                    headers=[(k.decode("latin-1"), v.decode("latin-1"))
                             for k, v in event.headers])
            if isinstance(event, h11.ConnectionClosed):
                raise IncompleteResponse("connection closed before a response head", None)
            raise AssertionError(f"unexpected h11 event {event!r}")

    def read_body(self, resp: Response, limit: int | None = None) -> bool:
        """Read body data into `resp` until the message ends (True) or, with `limit`, until
        at least that many body bytes have arrived (False). Raises IncompleteResponse when
        the connection closes first."""
        while True:
            if limit is not None and len(resp.body) >= limit:
                return False
            event = self._event(resp)
            if isinstance(event, h11.Data):
                resp.chunks.append(bytes(event.data))
                resp.body += bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self._after_http10_keep_alive(resp)
                return True
            elif isinstance(event, h11.ConnectionClosed):
                raise IncompleteResponse("connection closed inside the body", resp)
            else:
                raise AssertionError(f"unexpected h11 event {event!r}")

    def _after_http10_keep_alive(self, resp: Response) -> None:
        """h11 never reuses a connection after an HTTP/1.0 response, even one that says
        `Connection: keep-alive`; start a fresh parser (keeping any bytes already received)
        so the next response on this connection can be read."""
        if resp.http_version == "1.0" and \
                (resp.header("connection") or "").lower() == "keep-alive" and \
                self._h11.their_state is h11.MUST_CLOSE:
            trailing, _ = self._h11.trailing_data
            self._h11 = h11.Connection(h11.CLIENT)
            if trailing:  # (receive_data(b"") would mean end of stream)
                self._h11.receive_data(trailing)

    def read_response(self, method: str = "GET", http_version: str | None = None,
                      headers: Headers = ()) -> Response:
        resp = self.read_head(method, http_version, headers)
        self.read_body(resp)
        return resp

    def server_closed(self, timeout: float = 5.0) -> bool:
        """True when the server closes the connection within `timeout` without sending any
        more bytes; False if it stays open. Fails if unexpected bytes arrive."""
        old = self.sock.gettimeout()
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
        finally:
            self.sock.settimeout(old)
        assert data == b"", f"unexpected bytes after the response: {data[:200]!r}"
        return True

    @property
    def keep_alive(self) -> bool:
        return self._h11.our_state is not h11.MUST_CLOSE and \
            self._h11.their_state is not h11.MUST_CLOSE


def get(port: int, target: str, headers: Headers = (), timeout: float = 5.0) -> Response:
    """One GET on a fresh connection."""
    with HttpConnection(port, timeout=timeout) as c:
        return c.request("GET", target, headers)


def get_as_sent(port: int, target: str) -> Response:
    """One GET with `target` sent byte for byte (h11 would refuse or normalise a hostile one:
    `..`, `%00`, `//`), on a fresh connection."""
    with HttpConnection(port) as c:
        c.send_raw(raw_request("GET", target))
        return c.read_response()


def raw_request(method: str, target: str, headers: Headers = (), body: bytes = b"",
                version: str = "1.1", host: str = "127.0.0.1") -> bytes:
    """Request bytes written by hand (header values are latin-1 encoded as given)."""
    lines = [f"{method} {target} HTTP/{version}"]
    if version == "1.1" and not any(k.lower() == "host" for k, _ in headers):
        lines.append(f"Host: {host}")
    lines += [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def recv_head(sock: socket.socket) -> bytes | None:
    """Bytes from `sock` up to and including the first blank line (a request or response
    head, and whatever came with it); None if the peer closed before it."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            return None
        data += chunk
    return data
