"""One HTTP request of the ASGI server and its response: the C base (ASGIHTTPExchange,
_pxi/servers/asgi_exchange.pxi) answers the common cases; this subclass streams bodies, waits
on a slow client and turns app mistakes into a logged 500 or a closed connection."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from .._mongoose import (
    ASGIHTTPExchange,
    HeaderBlock,
    RequestBodyTooLarge,
    missing_default_headers,
)
from ..errors import ClientDisconnected
from ..serving.flow_control import ASGI_SEND_HIGH, ASGI_SEND_LOW
from ..serving.reporting import RESPONSE_500, asgi_target, error_log, request_text
from ..serving.request_body import body_refusal
from ..serving.request_deadline import RESPONSE_504
from ..typedefs import ASGIMessage
from .shared import (
    _HEADERS_500,
    _HEADERS_504,
    _RECEIVE_MAX,
    _has_header,
    _Waiter,
)
from .state import ServerState


class _HTTPCycle(ASGIHTTPExchange):
    """One HTTP request and its response; every method runs on the loop's thread. The state,
    `receive()`/`send()` on their common paths and `_finish()` are in C (ASGIHTTPExchange,
    asgi_exchange.pxi); what waits or fails is here, in the hooks the C code calls
    (`gone()`, `receive_slow()`, `send_slow()`, `app_done()`, `cancelled()`)."""

    __slots__ = ()
    server_state: ServerState  # the C field, typed ASGIServerState there
    rx: _Waiter | None  # the C fields, typed ASGIWaiter there
    tx: _Waiter | None

    # Loop side (Mongoose events).
    def gone(self) -> None:
        self.closed = True
        if self.rx is not None:
            self.rx.wake()
        if self.tx is not None:
            self.tx.wake()

    def on_read(self) -> None:
        if self.rx is not None:
            self.rx.wake()

    def on_write(self) -> None:
        if self.tx is not None and self.conn.send_len < ASGI_SEND_LOW:
            self.tx.wake()

    def _need_events(self) -> None:
        if not self.busy:
            self.busy = True
            self.conn.set_handler(self.server_state.busy_handler)

    # App side.
    def _rx(self) -> _Waiter:
        rx = self.rx
        if rx is None:
            rx = self.rx = _Waiter()
        return rx

    async def receive_slow(self) -> ASGIMessage:
        """receive() past its common paths (a disconnect, the body that came with the head):
        a streamed body, or waiting for the client to go away."""
        while self.streaming and not self.closed:
            conn = self.conn
            try:
                data = conn.body_read(_RECEIVE_MAX)
            except RequestBodyTooLarge as exc:
                # The core answered 413 (or closed, once the response had started): the
                # app is told the client is gone, the log says why, with the limit.
                self.closed = True
                self._body_too_large(exc)
                break
            except ConnectionResetError:
                # Broken chunked framing: the core is closing the connection, and to the
                # app the client is gone (as uvicorn reports a body its parser refused).
                self.closed = True
                break
            if conn.body_complete and conn.body_pending == 0:
                self.streaming = False
                return {"type": "http.request", "body": data, "more_body": False}
            if data:
                return {"type": "http.request", "body": data, "more_body": True}
            self._need_events()
            await self._rx().wait()
        while not self.closed and not self.complete:
            if self.conn.peer_closed:
                # The client sent EOF. It may only have half-closed (and would still read
                # a response), but the app asked whether it is gone: from here on it is,
                # as with uvicorn; the connection closes and a send() raises.
                self.closed = True
                self.conn.close()
                self.server_state.kick()
                break
            self._need_events()  # MG_EV_READ (0 bytes) tells of the EOF
            await self._rx().wait()
        return {"type": "http.disconnect"}

    def _body_refused(self) -> RequestBodyTooLarge | None:
        """The core's refusal of this request's body, once handled here; else None."""
        refusal = body_refusal(self.conn)
        if refusal is not None:
            self.closed = True
            self._body_too_large(refusal)
        return refusal

    def _body_too_large(self, exc: RequestBodyTooLarge) -> None:
        error_log.info("%s: %s", self._request_text(), exc)
        if not self.complete:
            if exc.answered:
                self.status, self.sent = 413, 0
            self._finish()  # the access-log line, with the status the server applied

    async def send_slow(self, message: ASGIMessage) -> None:
        """send() for every message its C path did not complete (streaming, files, errors).
        Once the client is gone, every message is dropped without an error (spec 2.3, as
        uvicorn; server.py's _ASGI_HTTP says why): the app learns of it from receive()."""
        if self.closed:
            return
        kind = message["type"]
        try:
            if kind == "http.response.body":
                if self.head_sent or not self.status or self.complete:
                    await self._send_more(message)
                    return
                body = message.get("body", b"")
                if message.get("more_body", False):
                    self._begin()
                    await self._send_more(message)
                    return
                if type(body) is not bytes:
                    body = self._bytes(body)
                # All or nothing: a refused head or body leaves nothing in the send buffer.
                self.conn.http_respond(self.status, self.headers, body,
                                       more_headers=self.server_state.default_headers[
                                           missing_default_headers(self.headers)])  # may raise
                self.head_sent = True
                self.sent = len(body)
                self._finish()
            elif kind == "http.response.start":
                if self.status:
                    raise RuntimeError("http.response.start sent twice")
                status = message["status"]
                if type(status) is not int or not 200 <= status <= 999:
                    raise ValueError(f"status must be an int from 200 to 999, not {status!r}")
                headers = message.get("headers", ())
                if type(headers) is not list:
                    headers = list(headers)
                self.headers = headers
                self.status = status
                if message.get("trailers", False):
                    # The head goes now: trailers need the body framed as it is written.
                    self.trailers = []
                    self._begin()
            elif kind == "http.response.trailers":
                self._send_trailers(message)
            elif kind == "http.response.pathsend":
                self._send_file(message)
            else:
                raise ValueError(f"unexpected ASGI message type {kind!r} for an HTTP response")
        except (ClientDisconnected, asyncio.CancelledError):
            raise
        except Exception as exc:
            if self._body_refused() is not None:
                return  # the core answered 413 before the app read that far: client gone
            self._protocol_error(exc)
            raise

    def _bytes(self, body: Any) -> bytes:
        if isinstance(body, (bytearray, memoryview)):
            return bytes(body)
        raise TypeError(f"response bodies are bytes, not {type(body).__name__}")

    def _begin(self, more: list[tuple[bytes, bytes]] | None = None) -> None:
        stock: HeaderBlock | list[tuple[str | bytes, str | bytes]] | None = \
            self.server_state.default_headers[missing_default_headers(self.headers)]
        if more:
            stock = [*(stock or ()), *more]
        self.conn.http_begin(self.status, self.headers, more_headers=stock)
        self.head_sent = True

    async def _send_more(self, message: ASGIMessage) -> None:
        if not self.status:
            raise RuntimeError("http.response.body before http.response.start")
        if self.complete:
            raise RuntimeError("http.response.body after the response was complete")
        if not self.head_sent:
            self._begin()
        body = message.get("body", b"")
        if type(body) is not bytes:
            body = self._bytes(body)
        conn = self.conn
        if body:
            conn.http_write(body)
            self.sent += len(body)
        if not message.get("more_body", False):
            if self.trailers is not None:
                self.body_done = True  # http.response.trailers ends the response
                return
            if not conn.http_end():
                error_log.error("%s: the app sent fewer bytes than its Content-Length; "
                                "the connection was closed", self._request_text())
            self._finish()
            return
        self.server_state.kick()
        if conn.send_len > ASGI_SEND_HIGH:
            self._need_events()
            while not self.closed and conn.send_len > ASGI_SEND_LOW:
                if self.tx is None:
                    self.tx = _Waiter()
                await self.tx.wait()
            # Closed meanwhile: the rest of the app's messages are dropped (send_slow()).

    def _send_trailers(self, message: ASGIMessage) -> None:
        if self.trailers is None:
            raise RuntimeError("http.response.trailers without trailers=True in "
                               "http.response.start")
        if not self.body_done:
            raise RuntimeError("http.response.trailers before the last http.response.body")
        if self.complete:
            raise RuntimeError("http.response.trailers after the response was complete")
        self.trailers.extend(message.get("headers", ()))
        if message.get("more_trailers", False):
            return
        self.conn.http_end(trailers=self.trailers)  # ValueError for a field not allowed
        self._finish()

    def _send_file(self, message: ASGIMessage) -> None:
        if not self.status:
            raise RuntimeError("http.response.pathsend before http.response.start")
        if self.head_sent:
            raise RuntimeError("http.response.pathsend after the body started")
        path = message["path"]
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            size = os.fstat(fd).st_size
            more = (None if _has_header(self.headers, b"content-length")
                    else [(b"content-length", b"%d" % size)])
            self._begin(more)
            self.conn.http_sendfile(fd, 0, size)
            self.conn.http_end()
            self.sent = size
        finally:
            os.close(fd)
        self._finish()

    # Errors.
    def _request_text(self) -> str:
        """`METHOD target` of this request for an error-log line, escaped."""
        return request_text(self.scope.get("method", "GET"), asgi_target(self.scope))

    def _protocol_error(self, exc: BaseException) -> None:
        self.failed = True
        self.server_state.report(f"{self._request_text()}: invalid response from the app",
                                 exc)
        self.abort()

    def abort(self) -> None:
        """Answer 500 if nothing was sent yet, else close: a response that went wrong never
        looks complete."""
        if self.complete or self.closed:
            return
        conn = self.conn
        try:
            if self.head_sent or conn.response_started:
                conn.close()
            else:
                self.head_sent = True
                self.status = 500
                self.sent = len(RESPONSE_500)
                conn.http_respond(500, _HEADERS_500, RESPONSE_500,
                                  more_headers=self.server_state.default_headers[3])
        except RuntimeError:  # closed under us
            pass
        self._finish()

    def time_out(self) -> None:
        """Loop side: the request deadline passed before http.response.start (deadline.py):
        answer 504 (the access log says so), then cancel the app's task. The exchange counts
        as closed, so what the app sends after is dropped, never logged."""
        try:
            self.conn.http_respond(504, _HEADERS_504, RESPONSE_504,
                                   more_headers=self.server_state.default_headers[3])
            self.head_sent = True
        except RuntimeError:  # closed under us
            pass
        self.status, self.sent = 504, len(RESPONSE_504)
        self._finish()
        self.closed = True
        if self.task is not None:
            self.task.cancel()  # run_app() then ends it quietly: it is complete

    def cancelled(self) -> None:
        """The app's task was cancelled (the server stops)."""
        if self.complete:
            self.app_done(None)
        else:
            self.abort()

    def app_done(self, exc: BaseException | None) -> None:
        if exc is not None:
            if isinstance(exc, ClientDisconnected) or (self.closed and isinstance(exc, OSError)):
                return
            if not self.failed:
                what = "after its response started; the connection is closed" \
                    if self.head_sent else "; answered 500"
                self.server_state.report(f"{self._request_text()}: the app failed"
                                         f"{' ' if self.head_sent else ''}{what}", exc)
            self.abort()
        elif not self.complete and not self.closed:
            error_log.error("%s: the app returned without %s", self._request_text(),
                            "completing its response (connection closed)"
                            if self.head_sent else "sending a response (answered 500)")
            self.abort()
