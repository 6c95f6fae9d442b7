"""Where the WSGI server's loop and app threads meet: one request's exchange (the input
the loop feeds, the writer it wakes) and the leader/followers turns of owning the Manager."""

from __future__ import annotations

import collections
import threading
import time
from typing import TYPE_CHECKING

from .._mongoose import RequestBodyTooLarge, WSGIExchange
from ..errors import ClientDisconnected

if TYPE_CHECKING:
    from .server import WSGIServer

# Streaming responses: an app thread waits while this much is queued towards its client,
# until the client has read it below _SEND_LOW.
_SEND_HIGH = 1 << 20
_SEND_LOW = 256 << 10
# An app thread wakes the loop before its work runs dry once a response has waited this long.
# The loop's owner runs apps inline; one that runs longer than this hands the loop over.
_STALL_S = 0.005

# Outbox operations (WSGILoop.drain() in wsgi_exchange.pxi knows WHOLE and FILE by number).
_OP_WHOLE, _OP_BEGIN, _OP_WRITE, _OP_FILE, _OP_END, _OP_ABORT = range(6)


class _Exchange(WSGIExchange):
    """One request and its response (the fields and start_response() are the C base's).
    Connection methods are only ever called on the loop thread."""

    __slots__ = ("started",)  # set only while the access log is on
    started: float

    # Loop side.
    def feed_input(self) -> None:
        inp = self.input
        conn = self.conn
        if inp is None or self.closed or inp._paused:
            return
        try:
            room = inp.room()
            data = conn.body_read(room) if room > 0 else b""
            pending = conn.body_pending
            done = pending == 0 and conn.body_complete
        except RequestBodyTooLarge as exc:
            self.server._body_too_large(self, exc)
            return
        except ConnectionResetError as exc:  # broken chunked framing: the core closes
            inp.fail(ClientDisconnected(str(exc)))
            return
        except RuntimeError:  # the connection closed under us
            return
        if data or done or pending:
            inp.feed(data, done, pending > 0)

    def gone(self) -> None:
        self.closed = True
        if self.input is not None:
            self.input.fail(ClientDisconnected("the client disconnected"))
        self.notify_writer()

    def notify_writer(self) -> None:
        cond = self.cond
        if cond is not None:
            with cond:
                if self.waiting:
                    cond.notify()

    # App side: start_response() and write() are the base's.
    def stream(self, data: bytes) -> None:
        """Send one piece of a streamed body, waiting while the client is behind."""
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
        server = self.server
        if not self.head_queued:
            self.head_queued = True
            self.head_sent = True
            server._post(self, _OP_BEGIN, None)
        if data:
            self.queued += len(data)
            server._post(self, _OP_WRITE, data)
            if self.queued + self.backlog > _SEND_HIGH:
                self.wait_for_client()

    def wait_for_client(self) -> None:
        turns = self.server._turns
        if turns.owns_loop():
            turns.hand_off()  # the loop must write what we wait on: stream on our own
        if self.cond is None:
            self.cond = threading.Condition(threading.Lock())
        timeout = self.server.stream_timeout
        with self.cond:
            self.waiting = True
            try:
                while not self.closed and self.queued + self.backlog > _SEND_LOW:
                    before = self.queued + self.backlog
                    if not self.cond.wait(timeout) and self.queued + self.backlog >= before:
                        raise TimeoutError(
                            f"the client read nothing for {timeout} s (stream_timeout)")
            finally:
                self.waiting = False
        if self.closed:
            raise ClientDisconnected("the client disconnected")


class _LoopTurns:
    """Threads that take turns owning the Manager (leader/followers).

    The owner polls, then runs the apps of the requests that polling delivered inline, one
    after another, and writes their responses once the batch is done: under load no request
    crosses a thread, so the GIL never changes hands per request. For the batch the owner
    lets go of `loop_lock`, the right to touch Mongoose. A standby thread checks every
    `stall_s`: when the same app has been running for longer (it blocks on I/O, or
    computes), the standby takes `loop_lock` and the loop over, and goes on with the rest of
    the batch; the stalled thread finishes its request on its own, its response reaching the
    loop through the outbox, then waits to take a turn again. An app that must wait for the
    loop itself (reading a body still arriving, a client slow to read) hands the loop over
    before it waits.

    Per request this costs deque operations only (atomic under the GIL); `lock` is taken
    once per batch, and by the standby once per `stall_s`.
    """

    def __init__(self, server: WSGIServer, count: int, stall_s: float) -> None:
        self._server = server
        self._count = count
        self._stall_s = stall_s
        self.lock = threading.Lock()  # guards owner and _standby
        self._cond = threading.Condition(self.lock)
        self.loop_lock = threading.Lock()  # held by whoever touches Mongoose
        self.owner: threading.Thread | None = None
        self.current: _Exchange | None = None  # the app the owner is running inline
        self._standby_wake = threading.Event()  # set when the standby should look now
        self._standby: threading.Thread | None = None
        self.pending: collections.deque[_Exchange] = collections.deque()
        # One token per app allowed to run at once (the loop owner is a thread more, so a
        # stalled app on every app thread still leaves one to serve the loop).
        self._slots: collections.deque[None] = collections.deque([None] * count)
        self.stopping = False
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        if self._threads:
            return
        for i in range(self._count):
            t = threading.Thread(target=self._follow_forever, name=f"cymongoose-wsgi-{i}",
                                 daemon=True)
            t.start()
            self._threads.append(t)

    def owns_loop(self) -> bool:
        return self.owner is threading.current_thread()

    # The owner.
    def run_pending(self) -> bool:
        """Owner: run the queued apps inline, then write their responses. False once this
        thread lost the loop."""
        me = threading.current_thread()
        server = self._server
        outbox = server._outbox
        self.loop_lock.release()
        try:
            server._loop_side.run_batch(self, me, server._app, self._slots)
        finally:
            with self.lock:
                owner = self.owner is me
                if owner:
                    self.loop_lock.acquire()  # free: only a takeover holds it otherwise
        if not owner:
            server._wake_loop()  # for our responses, and for the requests waiting for a slot
            return False
        if outbox:
            server._drain_outbox()
        return True

    def hand_off(self) -> None:
        """Called from an app running inline that is about to wait for the loop: give the
        loop to another thread."""
        me = threading.current_thread()
        with self.lock:
            if self.owner is me:
                self.owner = None
                self.current = None
                self._cond.notify()
                self._standby_wake.set()
        self._server._wake_loop()  # what this app posted so far is the new owner's to write

    # The followers.
    def _follow_forever(self) -> None:
        while True:
            if not self.follow():
                return
            self.lead()

    def follow(self) -> bool:
        """Wait for a turn. True: this thread now owns the loop (holding loop_lock)."""
        me = threading.current_thread()
        while True:
            with self._cond:
                while True:
                    if self.stopping:
                        return False
                    if self.owner is None and self.loop_lock.acquire(False):
                        self.owner = me
                        return True
                    if self._standby is None:
                        self._standby = me
                        break
                    self._cond.wait()
            try:
                if self._stand_by(me):
                    return True
            finally:
                with self._cond:
                    self._standby = None
                    self._cond.notify()  # another thread stands by now

    def _stand_by(self, me: threading.Thread) -> bool:
        """Check the owner every stall_s, without holding `lock` in between. True: the
        owner was stuck in an app and this thread took the loop over; False: the loop is
        free or the server stops."""
        wake = self._standby_wake
        seen: _Exchange | None = None
        while True:
            wake.wait(self._stall_s)
            wake.clear()  # the state is read after this: a wake-up set from now on counts
            with self.lock:
                if self.stopping or self.owner is None:
                    return False
                cur = self.current
                if cur is not None and cur is seen and self.loop_lock.acquire(False):
                    # The same app ran for a whole stall_s, and its thread let go of
                    # loop_lock for its batch: take the loop (and the rest of the batch).
                    self.owner = me
                    self.current = None
                    return True
                seen = cur

    def lead(self) -> None:
        """Own the loop until another thread takes it over or the server stops."""
        server = self._server
        manager = server.manager
        poll_ms = server._poll_ms
        me = threading.current_thread()
        try:
            outbox = server._outbox
            while not self.stopping:
                manager.poll(poll_ms)
                if outbox:
                    server._drain_outbox()
                if self.pending and not self.run_pending():
                    return
                if self.owner is not me:
                    return
            server._drain_in_flight()
        except BaseException:
            self.stopping = True
            raise
        finally:
            if self.owner is me:
                with self._cond:
                    self.owner = None
                    self.loop_lock.release()
                    self._cond.notify_all()
                    self._standby_wake.set()

    def stop(self, timeout: float) -> None:
        with self._cond:
            self.stopping = True
            self._cond.notify_all()
            self._standby_wake.set()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        self._threads = [t for t in self._threads if t.is_alive()]
