"""One WebSocket of the ASGI server: the handshake held until the app accepts (or answers
it over HTTP), messages both ways with back-pressure, and the closing handshake."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

from .._mongoose import (
    WEBSOCKET_OP_BINARY,
    WEBSOCKET_OP_CLOSE,
    WEBSOCKET_OP_TEXT,
    ASGICycle,
    Connection,
    missing_default_headers,
)
from ..errors import ClientDisconnected
from ..serving.flow_control import ASGI_SEND_HIGH, ASGI_SEND_LOW
from ..serving.reporting import RESPONSE_500, asgi_target, request_text
from ..typedefs import ASGIMessage
from .shared import (
    _HEADERS_500,
    _HEADERS_TEXT,
    _RESPONSE_403,
    _Waiter,
)
from .state import ServerState

# Incoming WebSocket messages the app has not received yet: past _WS_QUEUE_HIGH bytes the
# socket is not read any more, until the app has taken them below _WS_QUEUE_LOW.
_WS_QUEUE_HIGH = 1 << 20
_WS_QUEUE_LOW = 256 << 10
_WS_CLOSING_GRACE_S = 5.0  # after our close frame, wait this long for the peer's


class _WSCycle(ASGICycle):
    """One WebSocket: the handshake waits for the app's accept (or its HTTP answer). `task`,
    `server_state`, `conn` and `scope` are the C base's fields (ASGICycle); `receive()`,
    `send()`, `gone()`, `app_done()` and `cancelled()` are the hooks the C code calls."""

    __slots__ = ("key", "state", "queue", "rx", "tx", "disconnected", "close_timer", "status",
                 "headers", "head_sent", "queued", "paused", "sent", "started")
    task: asyncio.Task[None] | None  # the C fields, typed object and ASGIServerState there
    server_state: ServerState

    _CONNECTING, _OPEN, _CLOSING, _RESPONDING, _DONE = range(5)

    def __init__(self, server_state: ServerState, conn: Connection, scope: dict[str, Any],
                 key: bytes) -> None:
        self.server_state = server_state
        self.conn = conn
        self.scope = scope
        self.key = key
        self.state = self._CONNECTING
        self.queue: collections.deque[ASGIMessage] = collections.deque(
            [{"type": "websocket.connect"}])
        self.rx = _Waiter()
        self.tx = _Waiter()
        self.disconnected = False  # the disconnect message is queued
        self.close_timer: asyncio.TimerHandle | None = None
        self.status = 0
        self.headers: Any = ()
        self.head_sent = False
        self.queued = 0  # bytes of received messages waiting in `queue`
        self.paused = False
        self.sent = 0  # body bytes of an HTTP answer to the handshake (the access log's)
        self.started = 0.0  # perf_counter() at the handshake, when the access log is on

    # Loop side.
    def on_message(self, msg: Any) -> None:
        if self.disconnected:
            return
        data = msg.data
        if msg.flags & 0x0F == WEBSOCKET_OP_TEXT:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                self._fail(1007, "invalid UTF-8 in a text message")
                return
            self.queue.append({"type": "websocket.receive", "text": text})
            self.queued += len(text)  # receive() subtracts the same measure
        else:
            self.queue.append({"type": "websocket.receive", "bytes": data})
            self.queued += len(data)
        if self.queued > _WS_QUEUE_HIGH and not self.paused:
            self.paused = True
            self.conn.pause_reading(True)
        self.rx.wake()

    def on_control(self) -> None:
        code = self.conn.ws_close_code
        if code is not None:
            self._disconnect(code, self.conn.ws_close_reason or "")

    def on_write(self) -> None:
        if self.conn.send_len < ASGI_SEND_LOW:
            self.tx.wake()

    def gone(self) -> None:
        self._disconnect(1006, "")
        self.state = self._DONE
        if self.close_timer is not None:
            self.close_timer.cancel()
            self.close_timer = None
        self.tx.wake()

    def _disconnect(self, code: int, reason: str) -> None:
        if not self.disconnected:
            self.disconnected = True
            self.queue.append({"type": "websocket.disconnect", "code": code, "reason": reason})
            self.rx.wake()

    def _fail(self, code: int, reason: str) -> None:
        try:
            self.conn.ws_send(code.to_bytes(2, "big") + reason.encode(), WEBSOCKET_OP_CLOSE)
            self.conn.drain()
        except RuntimeError:
            pass
        self._disconnect(code, reason)
        self.server_state.kick()

    # App side.
    async def receive(self) -> ASGIMessage:
        while not self.queue:
            if self.disconnected:  # asked again after the disconnect: still disconnected
                return {"type": "websocket.disconnect", "code": 1006, "reason": ""}
            await self.rx.wait()
        message = self.queue.popleft()
        if message["type"] == "websocket.receive":
            data = message.get("bytes")
            self.queued -= len(data if data is not None else message["text"])
            if self.paused and self.queued < _WS_QUEUE_LOW and self.state != self._DONE:
                self.paused = False
                try:
                    self.conn.pause_reading(False)
                except RuntimeError:  # closed meanwhile
                    pass
        return message

    async def send(self, message: ASGIMessage) -> None:
        kind = message["type"]
        state = self.state
        if state == self._DONE and kind != "websocket.close":
            raise ClientDisconnected("the WebSocket is closed")
        try:
            if kind == "websocket.send":
                if state != self._OPEN:
                    raise RuntimeError("websocket.send before websocket.accept or after "
                                       "websocket.close")
                data = message.get("bytes")
                if data is not None:
                    self.conn.ws_send(data, WEBSOCKET_OP_BINARY)
                else:
                    text = message.get("text")
                    if type(text) is not str:
                        raise TypeError("websocket.send needs 'bytes' or a str 'text'")
                    self.conn.ws_send(text.encode("utf-8"), WEBSOCKET_OP_TEXT)
                await self._flow()
            elif kind == "websocket.accept":
                if state != self._CONNECTING:
                    raise RuntimeError("websocket.accept sent twice or after a close")
                headers = list(message.get("headers") or ())
                subprotocol = message.get("subprotocol")
                if subprotocol is not None:
                    headers.append((b"sec-websocket-protocol", subprotocol.encode("latin-1")))
                stock = self.server_state.default_headers[missing_default_headers(headers)]
                if stock:
                    headers.extend(stock)
                self.conn.ws_accept(self.key, headers, deflate_offer=self._deflate_offer())
                self.state = self._OPEN
                self._answered(101, 0)
                self.conn.set_handler(self.server_state.websocket_handler)
                self.server_state.kick()
            elif kind == "websocket.close":
                if state == self._CONNECTING:
                    self._respond_403()
                elif state == self._OPEN:
                    code = message.get("code", 1000)
                    reason = message.get("reason") or ""
                    payload = int(code).to_bytes(2, "big") + reason.encode("utf-8")[:123]
                    self.conn.ws_send(payload, WEBSOCKET_OP_CLOSE)
                    self.state = self._CLOSING
                    self.close_timer = asyncio.get_running_loop().call_later(
                        _WS_CLOSING_GRACE_S, self._force_close)
                    self.server_state.kick()
                elif state == self._RESPONDING:
                    raise RuntimeError("websocket.close during a websocket.http.response")
            elif kind == "websocket.http.response.start":
                if state != self._CONNECTING:
                    raise RuntimeError("websocket.http.response.start after the handshake "
                                       "was answered")
                status = message["status"]
                if type(status) is not int or not 200 <= status <= 999:
                    raise ValueError(f"status must be an int from 200 to 999, not {status!r}")
                self.status = status
                self.headers = list(message.get("headers") or ())
                self.state = self._RESPONDING
            elif kind == "websocket.http.response.body":
                if state != self._RESPONDING:
                    raise RuntimeError("websocket.http.response.body without its start")
                body = message.get("body", b"")
                if type(body) is not bytes:
                    raise TypeError(f"response bodies are bytes, not {type(body).__name__}")
                conn = self.conn
                stock = self.server_state.default_headers[missing_default_headers(self.headers)]
                if not self.head_sent:
                    self.head_sent = True
                    conn.http_begin(self.status, self.headers, more_headers=stock)
                if body:
                    conn.http_write(body)
                    self.sent += len(body)
                if not message.get("more_body", False):
                    conn.http_end()
                    self.state = self._DONE
                    self._answered(self.status, self.sent)
                self.server_state.kick()
            else:
                raise ValueError(f"unexpected ASGI message type {kind!r} for a WebSocket")
        except (ClientDisconnected, asyncio.CancelledError):
            raise
        except RuntimeError as exc:
            if self.conn.is_closing or self.state == self._DONE and not self.head_sent:
                raise ClientDisconnected("the WebSocket is closed") from exc
            self._protocol_error(exc)
            raise
        except Exception as exc:
            self._protocol_error(exc)
            raise

    def _deflate_offer(self) -> bytes | None:
        """The client's Sec-WebSocket-Extensions, for the core to negotiate permessage-deflate
        from; None when the server has it off (the core also leaves it to an app that sent
        its own Sec-WebSocket-Extensions)."""
        if not self.server_state.ws_deflate:
            return None
        offers = [value for name, value in self.scope["headers"]
                  if name == b"sec-websocket-extensions"]
        return b", ".join(offers) if offers else None

    async def _flow(self) -> None:
        self.server_state.kick()
        conn = self.conn
        if conn.send_len > ASGI_SEND_HIGH:
            while self.state != self._DONE and conn.send_len > ASGI_SEND_LOW:
                await self.tx.wait()
            if self.state == self._DONE:
                raise ClientDisconnected("the WebSocket is closed")

    def _respond_403(self) -> None:
        self._refuse(403, _HEADERS_TEXT, _RESPONSE_403)

    def _refuse(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        """Answer the handshake over HTTP instead of accepting it."""
        self.state = self._DONE
        self.conn.http_respond(status, headers, body,
                               more_headers=self.server_state.default_headers[3])
        self._answered(status, len(body))
        self.server_state.kick()
        self._detach()

    def _answered(self, status: int, sent: int) -> None:
        """The handshake got its answer: one access-log line, as for an HTTP request."""
        self.status = status
        self.sent = sent
        if self.server_state.access_log_on:
            self.server_state.log_access(self)

    def _force_close(self) -> None:
        self.close_timer = None
        try:
            self.conn.close()
        except RuntimeError:
            pass
        self.server_state.kick()

    def _detach(self) -> None:
        conn = self.conn
        if conn.userdata is self:
            conn.userdata = None
            if not conn.is_closing and not conn.is_websocket:
                conn.set_handler(self.server_state.quiet_handler)

    def _protocol_error(self, exc: BaseException) -> None:
        self.server_state.report(f"{request_text('WebSocket', asgi_target(self.scope))}: "
                                 "invalid message from the app", exc)
        self.app_done(None, quiet=True, code=1011)

    def cancelled(self) -> None:
        """The app's task was cancelled (the server stops): 1012, service restart."""
        self.app_done(None, code=1012)

    def app_done(self, exc: BaseException | None, quiet: bool = False,
                 code: int = 1000) -> None:
        state = self.state
        if exc is not None and not isinstance(exc, ClientDisconnected):
            if not quiet:
                self.server_state.report(
                    f"{request_text('WebSocket', asgi_target(self.scope))}: the app failed",
                    exc)
            code = 1011
        try:
            if state == self._CONNECTING:
                if exc is not None:
                    self._refuse(500, _HEADERS_500, RESPONSE_500)
                else:
                    self._respond_403()
            elif state == self._OPEN:
                self.conn.ws_send(code.to_bytes(2, "big"), WEBSOCKET_OP_CLOSE)
                self.state = self._CLOSING
                self.close_timer = asyncio.get_running_loop().call_later(
                    _WS_CLOSING_GRACE_S, self._force_close)
                self.server_state.kick()
            elif state == self._RESPONDING:
                self.state = self._DONE
                self.conn.close()
                self.server_state.kick()
        except RuntimeError:  # the connection closed meanwhile
            pass
