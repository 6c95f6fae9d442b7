"""One request's exchange between the loop and the thread running its app: the body the
loop feeds to wsgi.input, the response pieces the app posts, the writer the loop wakes when
its client has read enough. The fields and start_response() are the C base's
(WSGIExchange, wsgi_exchange.pxi); the methods here are its hooks and their helpers."""

from __future__ import annotations

import threading

from .._mongoose import RequestBodyTooLarge, WSGIExchange
from ..errors import ClientDisconnected
from ..serving.flow_control import SEND_HIGH, SEND_LOW
from .state import _OP_BEGIN, _OP_WRITE, ServerState


class _Exchange(WSGIExchange):
    """One request and its response (the fields and start_response() are the C base's).
    Connection methods are only ever called on the loop thread."""

    __slots__ = ()
    state: ServerState

    # Loop side: feed_input() and gone() are hooks WSGILoop calls.
    def feed_input(self) -> None:
        inp = self.input
        conn = self.conn
        if inp is None or self.closed:
            return
        room = inp.room()
        if room is None:  # paused: the app's reads resume it
            return
        try:
            data = conn.body_read(room) if room > 0 else b""
            pending = conn.body_pending
            done = pending == 0 and conn.body_complete
        except RequestBodyTooLarge as exc:
            self.state.body_too_large(self, exc)
            return
        except ConnectionResetError as exc:  # broken chunked framing: the core closes
            inp.fail(ClientDisconnected(str(exc)))
            return
        except RuntimeError:  # the connection closed under us
            return
        if data or done or pending:
            inp.feed(data, done, pending > 0)

    def gone(self) -> None:
        waiting = self.flow_closed()
        if self.input is not None:
            self.input.fail(ClientDisconnected("the client disconnected"))
        if waiting:
            self.notify_writer()
        if self.parked is not None:
            self.state.unpark(self)  # a thread closes its iterable

    def notify_writer(self) -> None:
        """Loop side, after a flow_*() call said the app waits: wake it. The app set `cond`
        before it began to wait, and holds it until it sleeps on it, so this reaches it."""
        cond = self.cond
        if cond is not None:
            with cond:
                cond.notify()

    # App side: start_response() and write() are the base's; write() calls the stream() hook.
    def stream(self, data: bytes) -> None:
        """Send one piece of a streamed body, waiting while the client is behind (write();
        results.py parks an iterable instead of waiting)."""
        if self.post_piece(data):
            self.wait_for_client()

    def post_piece(self, data: bytes) -> bool:
        """Queue one piece of a streamed body for the loop; True when the client is behind
        (more than the high mark queued towards it)."""
        if type(data) is not bytes:
            if not isinstance(data, (bytes, bytearray, memoryview)):
                raise TypeError(f"response body items must be bytes, not {type(data).__name__}")
            data = bytes(data)
        if self.closed:
            raise ClientDisconnected("the client disconnected")
        self.sent += len(data)
        if 0 <= self.declared < self.sent:
            raise ValueError(
                f"the app sent more than its Content-Length of {self.declared} bytes")
        state = self.state
        if not self.head_queued:
            self.head_queued = True
            self.head_sent = True
            state.post(self, _OP_BEGIN, None)
        if data:
            ahead = self.flow_ahead(len(data))
            state.post(self, _OP_WRITE, data)
            return ahead > SEND_HIGH
        return False

    def wait_for_client(self) -> None:
        turns = self.state.turns
        if turns.owns_loop():
            turns.hand_off()  # the loop must write what we wait on: stream on our own
        if self.cond is None:
            self.cond = threading.Condition(threading.Lock())
        timeout = self.state.stream_timeout
        with self.cond:
            try:
                # Decided under the flow lock the loop's updates take, so a write or a close
                # the loop makes is seen here, or the loop sees us waiting and notifies.
                while self.flow_wait_begin(SEND_LOW):
                    before = self.flow_ahead()
                    if not self.cond.wait(timeout) and self.flow_ahead() >= before:
                        raise TimeoutError(
                            f"the client read nothing for {timeout} s (stream_timeout)")
            finally:
                self.flow_wait_end()
        if self.closed:
            raise ClientDisconnected("the client disconnected")
