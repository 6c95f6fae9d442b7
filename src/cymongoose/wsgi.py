"""PEP 3333 server on the Mongoose loop: Flask, Django or any WSGI app at C-loop speed.

Threads take turns owning the Manager (leader/followers, `_LoopTurns`): the owner polls and
runs the apps of the requests that poll delivered inline, one after another, so under load no
request crosses a thread and the GIL does not change hands per request. A standby thread takes
the loop over from an owner stuck in one app for `_STALL_S`; that app finishes on its own
thread and hands its response to the loop through an outbox (`Manager.call_soon_threadsafe`).
An app that must wait for the loop (a body still arriving, a client slow to read) hands the
loop over before it waits. docs/wsgi.md says what is guaranteed, docs/performance.md what it
costs.

Responses leave through the core's `http_respond` (a whole body) or `http_begin/http_write/
http_sendfile/http_end` (streamed), which keep keep-alive, pipelining, HEAD and
`Connection: close` right. Request bodies stream (`listen(..., stream_body=True)`): the loop
stops reading a socket while its app is behind.
"""

from __future__ import annotations

import collections
import io
import os
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from ._mongoose import (
    MG_EV_ACCEPT,
    MG_EV_CLOSE,
    MG_EV_HTTP_HDRS,
    MG_EV_READ,
    MG_EV_WRITE,
    Connection,
    HeaderBlock,
    Manager,
    TlsOpts,
    WSGIExchange,
    WSGILoop,
    handles,
    wsgi_environ_base,
)
from .access_log import AccessLog
from .proxy_headers import ProxyHeaders
from .serving import (
    SERVER_NAME,
    DateHeader,
    adopt_listener,
    error_log,
    load_app,
    report_exception,
)
from .typedefs import AppRef, WSGIApp

__all__ = ["WSGIServer", "FileWrapper", "serve", "WSGIApp"]

# wsgi.input: the loop stops taking body bytes from a connection while this much waits
# unread in the app's buffer, and takes more once the app has read it below _INPUT_LOW.
_INPUT_HIGH = 1 << 20
_INPUT_LOW = 256 << 10
# Streaming responses: an app thread waits while this much is queued towards its client,
# until the client has read it below _SEND_LOW.
_SEND_HIGH = 1 << 20
_SEND_LOW = 256 << 10
# An app thread wakes the loop before its work runs dry once a response has waited this long.
# The loop's owner runs apps inline; one that runs longer than this hands the loop over.
_STALL_S = 0.005

# Outbox operations (WSGILoop.drain() in wsgi_exchange.pxi knows WHOLE and FILE by number).
_OP_WHOLE, _OP_BEGIN, _OP_WRITE, _OP_FILE, _OP_END, _OP_ABORT = range(6)

_RESPONSE_500 = b"Internal Server Error\n"


class _EnvironKeys(dict[str, str]):
    """Header name -> its environ key ("user-agent" -> "HTTP_USER_AGENT"), made once."""

    def __missing__(self, name: str) -> str:
        key = self[name] = "HTTP_" + name.upper().replace("-", "_")
        return key


_ENVIRON_KEYS = _EnvironKeys()

# Stopping: a connection with no request in flight is closed after being idle this long.
_IDLE_GRACE_S = 0.1


def _nothing() -> None:
    pass


class _NoBody(io.RawIOBase):
    """`wsgi.input` of a request without a body: shared, since it has no state."""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return 0

    def read(self, size: int | None = -1) -> bytes:
        return b""

    def readline(self, size: int | None = -1) -> bytes:
        return b""

    def close(self) -> None:  # an app closing it must not close it for the next one
        pass


_NO_BODY = _NoBody()


class ClientDisconnected(ConnectionResetError):
    """The client went away while the app was reading its body or writing the response."""


class FileWrapper:
    """`wsgi.file_wrapper`: iterates a file in blocks; the server sends a real file with
    sendfile(2) instead of iterating it."""

    def __init__(self, filelike: Any, blksize: int = 8192) -> None:
        if blksize <= 0:
            raise ValueError("blksize must be a positive number of bytes")
        self.filelike = filelike
        self.blksize = blksize

    def __iter__(self) -> Iterator[bytes]:
        read = self.filelike.read
        while True:
            block = read(self.blksize)
            if not block:
                return
            yield block

    def fileno_for_sendfile(self) -> int | None:
        """The descriptor of a regular file positioned where the body starts, or None."""
        try:
            fd = self.filelike.fileno()
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
        except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
            return None
        return int(fd)

    def close(self) -> None:
        """PEP 3333: closing the wrapper closes the file, when it has a close()."""
        close = getattr(self.filelike, "close", None)
        if close is not None:
            close()


class _StreamInput:
    """`wsgi.input` for a body that is still arriving: reads block the app's thread."""

    __slots__ = ("_buf", "_eof", "_error", "_cond", "_want", "_exchange", "_paused")

    def __init__(self, exchange: _Exchange) -> None:
        self._buf = bytearray()
        self._eof = False
        self._error: BaseException | None = None
        self._cond = threading.Condition(threading.Lock())
        self._want = 0  # bytes a waiting reader needs (0: nobody waits)
        self._exchange = exchange
        self._paused = False  # the loop stopped feeding: buffer full

    # Loop side.
    def room(self) -> int:
        return max(_INPUT_HIGH, self._want) - len(self._buf)

    def feed(self, data: bytes, eof: bool, left_behind: bool) -> None:
        """`left_behind`: the connection still holds body bytes this feed had no room for.
        Then the app side must ask for them (the connection may have paused its reads, so no
        read event would bring them), however much the app consumed meanwhile."""
        with self._cond:
            self._buf += data
            if eof:
                self._eof = True
            self._paused = not eof and (left_behind or
                                        len(self._buf) >= max(_INPUT_HIGH, self._want))
            if self._want:
                self._cond.notify()

    def fail(self, exc: BaseException) -> None:
        with self._cond:
            if not self._eof:
                self._error = exc
            self._cond.notify_all()

    # App side.
    def _take(self, n: int) -> bytes:
        data = bytes(self._buf[:n])
        del self._buf[:n]
        if self._paused and len(self._buf) < _INPUT_LOW:
            self._paused = False
            self._exchange.server._call_loop(self._exchange.feed_input)
        return data

    def _wait_for(self, n: int) -> None:
        """Block until n bytes (n < 0: the whole body) are buffered, or the body ended."""
        while not self._eof and (n < 0 or len(self._buf) < n):
            if self._error is not None:
                raise self._error
            self._want = sys.maxsize if n < 0 else n
            if self._exchange.server._turns.owns_loop():
                # Running inline on the loop's owner: the loop must go on without us.
                self._cond.release()
                try:
                    self._exchange.server._turns.hand_off()
                finally:
                    self._cond.acquire()
                continue
            if self._paused:
                self._paused = False
                self._exchange.server._call_loop(self._exchange.feed_input)
            self._cond.wait(1.0)
            self._want = 0
        if self._error is not None and not self._eof:
            raise self._error

    def read(self, size: int | None = -1) -> bytes:
        n = -1 if size is None or size < 0 else size
        with self._cond:
            self._wait_for(n)
            return self._take(len(self._buf) if n < 0 else min(n, len(self._buf)))

    def read1(self, size: int = -1) -> bytes:
        with self._cond:
            if not self._buf:
                self._wait_for(1)
            return self._take(len(self._buf) if size < 0 else min(size, len(self._buf)))

    def readline(self, size: int | None = -1) -> bytes:
        limit = -1 if size is None or size < 0 else size
        with self._cond:
            start = 0
            while True:
                end = self._buf.find(b"\n", start)
                if end >= 0:
                    n = end + 1
                    break
                if self._eof or (0 <= limit <= len(self._buf)):
                    n = len(self._buf)
                    break
                start = len(self._buf)
                self._wait_for(len(self._buf) + 1)
            if 0 <= limit < n:
                n = limit
            return self._take(n)

    def readlines(self, hint: int = -1) -> list[bytes]:
        lines: list[bytes] = []
        total = 0
        while True:
            line = self.readline()
            if not line:
                return lines
            lines.append(line)
            total += len(line)
            if 0 < hint <= total:
                return lines

    def __iter__(self) -> Iterator[bytes]:
        while True:
            line = self.readline()
            if not line:
                return
            yield line


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


class WSGIServer:
    """Serve a WSGI app on a Manager of its own; see the module docstring."""

    def __init__(self, app: AppRef, workers: int = 4,
                 error_handler: Callable[[BaseException], object] | None = None,
                 stream_timeout: float = 5.0, *, threads: int | None = None,
                 factory: bool = False, root_path: str = "",
                 url_scheme: str | None = None, access_log: AccessLog | None = None,
                 proxy_headers: ProxyHeaders | None = None, tls: TlsOpts | None = None,
                 graceful_timeout: float = 5.0, max_requests: int = 0) -> None:
        count = threads if threads is not None else workers
        if type(count) is not int or count < 1:
            raise ValueError(f"threads (workers) must be a positive int, not {count!r}")
        if not isinstance(stream_timeout, (int, float)) or stream_timeout <= 0:
            raise ValueError(f"stream_timeout must be a positive number of seconds, "
                             f"not {stream_timeout!r}")
        if root_path and (not root_path.startswith("/") or root_path.endswith("/")):
            raise ValueError(f"root_path must start with '/' and not end with one, "
                             f"not {root_path!r}")
        if not isinstance(graceful_timeout, (int, float)) or graceful_timeout < 0:
            raise ValueError(f"graceful_timeout must be a number of seconds >= 0, "
                             f"not {graceful_timeout!r}")
        if type(max_requests) is not int or max_requests < 0:
            raise ValueError(f"max_requests must be an int >= 0 (0: no limit), "
                             f"not {max_requests!r}")
        self._app: WSGIApp = load_app(app, factory)
        self._access = access_log
        self._proxy = proxy_headers
        self._tls = tls
        self.graceful_timeout = float(graceful_timeout)
        # Requests left before this server stops by itself (a worker recycled after
        # --max-requests); -1: no limit.
        self._requests_left = max_requests or -1
        #: Called once when max_requests is reached, before the server drains and stops.
        self.on_max_requests: Callable[[], object] | None = None
        #: Called once, from stop(), when the server starts to stop (any thread).
        self.on_stop: Callable[[], object] | None = None
        self._listeners: list[Connection] = []
        self._unix_conns: set[int] = set()  # connections accepted on a Unix socket
        self.stream_timeout = float(stream_timeout)
        self._error_handler = error_handler
        self._root_path = root_path
        self._url_scheme = url_scheme
        self._manager = Manager(None, enable_wakeup=True, error_handler=error_handler)
        # App threads need the GIL while the loop waits: never wait holding it.
        self._manager.linger_ms = 0
        if access_log is not None:  # requests the core refused are logged too
            self._manager.refusal_handler = access_log.log_refusal
        self._turns = _LoopTurns(self, count, _STALL_S)
        self._outbox: collections.deque[tuple[_Exchange, int, Any]] = collections.deque()
        self._wake_pending = False  # a wake-up of the loop is on its way
        self._poll_ms = 100
        self._closed = False
        self._date = DateHeader()
        self._draining = False
        self._stock_lists: list[HeaderBlock | None] = []
        self._refresh_stock()
        self._manager.timer_add(1000, self._refresh_stock, repeat=True)
        self._bases: dict[int, dict[str, Any]] = {}
        self._base_default: dict[str, Any] = {}
        self._live: set[_Exchange] = set()

        on_head = self._on_request

        @handles(MG_EV_HTTP_HDRS, MG_EV_CLOSE)
        def on_request(conn: Connection, ev: int, msg: Any) -> None:
            if ev == MG_EV_HTTP_HDRS:
                on_head(conn, msg)
            else:
                ex = conn.userdata
                if ex is not None:
                    self._live.discard(ex)
                    ex.gone()
                if self._unix_conns:
                    self._unix_conns.discard(conn.id)

        @handles(MG_EV_HTTP_HDRS, MG_EV_READ, MG_EV_WRITE, MG_EV_CLOSE)
        def on_stream(conn: Connection, ev: int, msg: Any) -> None:
            ex = conn.userdata
            if ev == MG_EV_READ:
                if ex is not None and ex.input is not None:
                    ex.feed_input()
            elif ev == MG_EV_WRITE:
                if ex is not None:
                    ex.backlog = conn.send_len
                    if ex.waiting and ex.backlog < _SEND_LOW:
                        ex.notify_writer()
            else:
                on_request(conn, ev, msg)

        self._on_busy = on_stream
        self._on_request_py = on_request

        # The per-request loop work in C (WSGILoop, wsgi_exchange.pxi): admitting requests,
        # running the owner's batch of apps, writing whole responses. Admission is Python's
        # (on_request above) while proxy headers or max_requests are on, and for Unix-socket
        # clients: those need the extra steps of _on_request.
        loop_side = WSGILoop()
        loop_side.server = self
        loop_side.exchange_type = _Exchange
        loop_side.stream_input_type = _StreamInput
        loop_side.no_body = _NO_BODY
        loop_side.pending = self._turns.pending
        loop_side.live = self._live
        loop_side.bases = self._bases
        loop_side.base_default = self._base_default
        loop_side.root_path = root_path
        loop_side.outbox = self._outbox
        loop_side.busy_handler = on_stream
        loop_side.log_access = access_log is not None
        self._loop_side = loop_side
        fast = proxy_headers is None and self._requests_left < 0
        self._on_quiet: Any = loop_side if fast else on_request
        loop_side.quiet_handler = self._on_quiet

        tls_opts = tls

        @handles(MG_EV_ACCEPT)
        def on_accept_tls(conn: Connection, ev: int, msg: Any) -> None:
            conn.set_handler(self._on_quiet)
            assert tls_opts is not None
            conn.tls_init(tls_opts)

        @handles(MG_EV_ACCEPT)
        def on_accept_unix(conn: Connection, ev: int, msg: Any) -> None:
            conn.set_handler(on_request)
            self._unix_conns.add(conn.id)

        self._on_accept_tls = on_accept_tls
        self._on_accept_unix = on_accept_unix

    @property
    def manager(self) -> Manager:
        return self._manager

    def listen(self, url: str = "http://127.0.0.1:8000", **limits: Any) -> Connection:
        tls = url.startswith("https")
        if tls and self._tls is None:
            raise ValueError("an https:// listener needs tls=TlsOpts(cert=..., key=...)")
        handler = self._on_accept_tls if tls else self._on_quiet
        conn = self._manager.listen(url, handler, stream_body=True, **limits)
        local = conn.local_addr
        assert local is not None  # a listener just opened
        self._add_base(local[0], local[1], "https" if tls else "http")
        self._listeners.append(conn)
        return conn

    def listen_socket(self, sock: Any, *, tls: bool = False, **limits: Any) -> Connection:
        """Serve on a listening TCP or Unix socket opened elsewhere (bound in Python, shared
        by worker processes, handed over by systemd); the caller keeps and closes `sock`.
        `tls=True` serves HTTPS with the server's `tls` options."""
        if tls and self._tls is None:
            raise ValueError("tls=True needs the server's tls=TlsOpts(cert=..., key=...)")
        conn, unix, name = adopt_listener(
            self._manager, sock, tls=tls, on_unix=self._on_accept_unix,
            on_tls=self._on_accept_tls, on_plain=self._on_quiet, **limits)
        if unix:
            self._unix_base = self._make_base("localhost", "0", "http")
            # Clients of a Unix socket need _on_request's steps, also after a busy spell.
            self._on_quiet = self._loop_side.quiet_handler = self._on_request_py
        else:
            self._add_base(name[0], name[1], "https" if tls else "http")
        self._listeners.append(conn)
        return conn

    def _add_base(self, host: str, port: int, scheme: str) -> None:
        self._bases[port] = self._make_base(host, str(port), scheme)
        self._base_default = self._loop_side.base_default = self._bases[port]

    def _make_base(self, host: str, port: str, scheme: str) -> dict[str, Any]:
        scheme = self._url_scheme or scheme
        return wsgi_environ_base({
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": scheme,
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
            "wsgi.input_terminated": True,
            "wsgi.file_wrapper": FileWrapper,
            "SERVER_NAME": host,
            "SERVER_PORT": port,
            "SCRIPT_NAME": self._root_path,
        })

    # Loop side.
    def _on_request(self, conn: Connection, msg: Any) -> None:
        base = self._base_default
        if len(self._bases) > 1:  # several listeners: the one this client came in on
            local = conn.local_addr
            if local is not None:
                base = self._bases.get(local[1], base)
        if self._unix_conns and conn.id in self._unix_conns:
            base = self._unix_base
            environ = msg.wsgi_environ(base, conn, self._root_path)
            # Mongoose reads no address from an AF_UNIX peer: the client is local.
            environ["REMOTE_ADDR"] = "127.0.0.1"
            environ["REMOTE_PORT"] = "0"
            if self._proxy is not None:
                self._apply_proxy(environ, None)
        else:
            environ = msg.wsgi_environ(base, conn, self._root_path)
            if self._proxy is not None:
                self._apply_proxy(environ, environ["REMOTE_ADDR"])
        method = environ["REQUEST_METHOD"]
        ex = _Exchange(self, conn, environ, method == "HEAD")
        if self._access is not None:
            ex.started = time.perf_counter()
        if self._requests_left > 0:
            self._requests_left -= 1
            if self._requests_left == 0:
                if self.on_max_requests is not None:
                    self.on_max_requests()
                self.stop()  # recycled: finish this one and the others in flight, then exit
        if conn.body_complete:
            environ["wsgi.input"] = (io.BytesIO(conn.body_read()) if conn.body_pending
                                     else _NO_BODY)
        else:
            ex.input = _StreamInput(ex)
            environ["wsgi.input"] = ex.input
            ex.busy = True
            conn.set_handler(self._on_busy)
            ex.feed_input()
        conn.userdata = ex
        self._live.add(ex)
        self._turns.pending.append(ex)

    def _apply_proxy(self, environ: dict[str, Any], peer: str | None) -> None:
        """Trusted proxy headers (proxy_headers.py) into REMOTE_ADDR, the scheme and Host."""
        assert self._proxy is not None
        fwd = self._proxy.resolve(
            peer, forwarded=environ.get("HTTP_FORWARDED"),
            x_forwarded_for=environ.get("HTTP_X_FORWARDED_FOR"),
            x_forwarded_proto=environ.get("HTTP_X_FORWARDED_PROTO"),
            x_forwarded_host=environ.get("HTTP_X_FORWARDED_HOST"))
        if fwd.client_host is not None:
            environ["REMOTE_ADDR"] = fwd.client_host
            environ["REMOTE_PORT"] = str(fwd.client_port or 0)
        if fwd.scheme is not None:
            environ["wsgi.url_scheme"] = "https" if fwd.scheme in ("https", "wss") else "http"
        if fwd.host is not None:
            environ["HTTP_HOST"] = fwd.host

    def _log_access(self, ex: _Exchange) -> None:
        access = self._access
        assert access is not None
        env = ex.environ
        status = ex.status[0] if ex.status is not None else 0
        try:
            access.log(env["REMOTE_ADDR"], env["REQUEST_METHOD"],
                       env["SCRIPT_NAME"] + env["PATH_INFO"], env["QUERY_STRING"],
                       env["SERVER_PROTOCOL"], status, 0 if ex.is_head else ex.sent,
                       time.perf_counter() - ex.started,
                       lambda name: env.get(_ENVIRON_KEYS[name]),
                       env.get("REMOTE_USER"))
        except Exception as exc:  # a broken handler or format must not break serving
            report_exception("access log failed", exc)

    def _call_loop(self, fn: Callable[[], None]) -> None:
        try:
            self._manager.call_soon_threadsafe(fn)
        except RuntimeError:  # closed: nothing left to do
            pass

    def _post(self, ex: _Exchange, op: int, arg: Any) -> None:
        """Queue one response step for the loop: its owner writes the outbox after each
        poll and each batch; any other thread wakes it."""
        self._outbox.append((ex, op, arg))
        if not self._wake_pending and self._turns.owner is not threading.current_thread():
            self._wake_loop()

    def _wake_loop(self) -> None:
        if not self._wake_pending:
            self._wake_pending = True
            self._call_loop(_nothing)

    def _drain_outbox(self) -> None:
        """Owner: write the queued response steps."""
        # Cleared before draining: a post that misses this drain wakes the loop again.
        self._wake_pending = False
        self._loop_side.drain(self._outbox, self._stock_lists)

    def _apply(self, ex: _Exchange, op: int, arg: Any) -> None:
        conn = ex.conn
        if op == _OP_WHOLE:
            status = ex.status
            assert status is not None
            conn.http_respond(status[0], ex.headers, arg, reason=status[1],
                              more_headers=self._stock_for(ex.stock))
            self._finish(ex)
        elif op == _OP_WRITE:
            conn.http_write(arg)
            ex.queued -= len(arg)
            ex.backlog = conn.send_len
            if ex.backlog >= _SEND_LOW and not ex.busy:
                ex.busy = True
                conn.set_handler(self._on_busy)  # be told when the client reads
            elif ex.waiting:
                ex.notify_writer()
        elif op == _OP_BEGIN:
            code, reason = ex.status or (500, "")
            conn.http_begin(code, ex.headers, reason=reason,
                            more_headers=self._stock_for(ex.stock))
        elif op == _OP_FILE:
            fd, offset, count = arg
            try:
                conn.http_sendfile(fd, offset, count)
            finally:
                os.close(fd)
        elif op == _OP_END:
            if not conn.http_end():
                error_log.error(
                    "%s %s: the app sent %d bytes, fewer than its Content-Length of %d; "
                    "the connection was closed", ex.environ["REQUEST_METHOD"],
                    ex.environ["PATH_INFO"], ex.sent, ex.declared)
            self._finish(ex)
        elif op == _OP_ABORT:
            conn.close()
            self._finish(ex)

    def _finish(self, ex: _Exchange) -> None:
        ex.finished = True
        self._live.discard(ex)
        if self._access is not None:
            self._log_access(ex)
        conn = ex.conn
        if conn.userdata is ex:
            conn.userdata = None
            if ex.busy and not conn.is_closing:
                conn.set_handler(self._on_quiet)

    def _protocol_error(self, ex: _Exchange, exc: BaseException) -> None:
        """The app's response could not be sent as given (a bad header, too many bytes)."""
        report_exception(f"{ex.environ['REQUEST_METHOD']} {ex.environ['PATH_INFO']}: "
                         f"invalid response from the app", exc)
        conn = ex.conn
        try:
            if conn.response_started:
                conn.close()
            else:
                conn.http_begin(500, [(b"Content-Type", b"text/plain; charset=utf-8"),
                                      (b"Content-Length", b"%d" % len(_RESPONSE_500)),
                                      (b"Connection", b"close")],
                                  more_headers=self._stock_lists[3])
                conn.http_write(_RESPONSE_500)
                conn.http_end()
        except RuntimeError:
            pass
        self._finish(ex)

    def _refresh_stock(self) -> None:
        """Timer, every second: the Date (stock & 1) and Server (stock & 2) fields an app
        left out, as lists indexed by `_Exchange.stock`, so no response formats a date."""
        date = self._date.get()
        stock: list[list[tuple[bytes, bytes]]] = [
            [], [(b"Date", date)], [(b"Server", SERVER_NAME)],
            [(b"Date", date), (b"Server", SERVER_NAME)]]
        if self._draining:
            # Stopping: every response closes its connection, so a client that keeps its
            # connection busy moves on to another worker instead of holding this one.
            stock = [[*lst, (b"Connection", b"close")] for lst in stock]
        # Checked and rendered once a second, copied into responses as they are.
        self._stock_lists = [HeaderBlock(lst) if lst else None for lst in stock]

    def _stock_for(self, stock: int) -> HeaderBlock | None:
        return self._stock_lists[stock]

    # App side.
    def _finish_app(self, ex: _Exchange, result: Any) -> None:
        """Send what the app returned (any iterable), then close() it."""
        try:
            if not ex.head_queued and type(result) in (list, tuple):
                self._respond_whole(ex, result)
            elif isinstance(result, FileWrapper) and not ex.head_queued:
                self._respond_file(ex, result)
            else:
                whole = False
                for chunk in result:
                    if not chunk:
                        continue
                    if (not ex.head_queued and len(chunk) == ex.declared
                            and type(chunk) is bytes):
                        # The first piece is the whole declared body (Flask's and Django's
                        # responses): one write, as for a list. Any more is an app error.
                        whole = True
                        ex.sent = len(chunk)
                        ex.head_sent = ex.head_queued = True
                        self._post(ex, _OP_WHOLE, chunk)
                        continue
                    ex.stream(chunk)
                if ex.status is None:
                    raise AssertionError("the app returned without calling start_response()")
                if whole:
                    return
                if not ex.head_queued and (ex.declared <= 0 or ex.is_head):
                    # No body at all: one write too.
                    ex.head_sent = ex.head_queued = True
                    self._post(ex, _OP_WHOLE, b"")
                    return
                if not ex.head_queued:
                    ex.stream(b"")
                if 0 <= ex.declared != ex.sent and not ex.is_head:
                    if ex.sent > ex.declared:
                        raise ValueError("the app sent more than its Content-Length")
                self._post(ex, _OP_END, None)
        except BaseException as exc:
            self._app_failed(ex, exc)
        finally:
            if result is not None and hasattr(result, "close"):
                try:
                    result.close()
                except BaseException as exc:
                    self._report(ex, "close() of the app's iterable failed", exc)

    def _respond_whole(self, ex: _Exchange, result: Any) -> None:
        if ex.status is None:
            raise AssertionError("the app returned without calling start_response()")
        if len(result) == 1:
            body = result[0]  # bytes-like; http_respond refuses anything else
        else:
            for item in result:
                if type(item) is not bytes:
                    raise TypeError(
                        f"response body items must be bytes, not {type(item).__name__}")
            body = b"".join(result)
        ex.sent = len(body)
        ex.head_sent = ex.head_queued = True
        self._post(ex, _OP_WHOLE, body)

    def _respond_file(self, ex: _Exchange, wrapper: FileWrapper) -> None:
        fd = wrapper.fileno_for_sendfile()
        if fd is None or ex.status is None:
            for chunk in wrapper:
                ex.stream(chunk)
            if not ex.head_queued:
                ex.stream(b"")
            self._post(ex, _OP_END, None)
            return
        offset = os.lseek(fd, 0, os.SEEK_CUR)
        count = max(0, os.fstat(fd).st_size - offset)
        if ex.declared >= 0:
            count = min(count, ex.declared)
        ex.sent = count
        ex.head_sent = ex.head_queued = True
        self._post(ex, _OP_BEGIN, None)
        self._post(ex, _OP_FILE, (os.dup(fd), offset, count))
        self._post(ex, _OP_END, None)

    def _app_failed(self, ex: _Exchange, exc: BaseException) -> None:
        if isinstance(exc, ClientDisconnected) or (ex.closed and isinstance(exc, OSError)):
            return  # the client left: nothing to answer, nothing to log
        what = f"{ex.environ['REQUEST_METHOD']} {ex.environ['PATH_INFO']}"
        if ex.head_sent:
            self._report(ex, f"{what}: the app failed after its response started; "
                             "the connection is closed", exc)
            self._post(ex, _OP_ABORT, None)
            return
        self._report(ex, f"{what}: the app failed; answered 500", exc)
        ex.head_sent = ex.head_queued = True
        ex.status = (500, None)
        ex.headers = [("Content-Type", "text/plain; charset=utf-8"), ("Connection", "close")]
        ex.declared = -1
        ex.stock = 3
        self._respond_whole(ex, [_RESPONSE_500])

    def _report(self, ex: _Exchange, what: str, exc: BaseException) -> None:
        if self._error_handler is not None:
            try:
                self._error_handler(exc)
                return
            except BaseException:
                pass
        report_exception(what, exc)

    # Lifecycle.
    def run(self, poll_ms: int = 100) -> None:
        if self._closed:
            raise RuntimeError("this WSGIServer is closed")
        self._poll_ms = poll_ms
        turns = self._turns
        # This thread starts as the loop's owner (before any app thread could take the
        # vacant loop), then takes turns like the app threads.
        turns.loop_lock.acquire()
        with turns.lock:
            turns.owner = threading.current_thread()
        turns.start()
        previous: dict[signal.Signals, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                previous[signum] = signal.signal(signum, lambda *_: self.stop())
        try:
            while True:
                turns.lead()
                if turns.stopping or not turns.follow():
                    break
        finally:
            for signum, old in previous.items():
                signal.signal(signum, old)
            self.close()

    def _drain_in_flight(self) -> None:
        """Owner, stopping: stop accepting, finish the requests in flight and close idle
        keep-alive connections, for at most `graceful_timeout` seconds."""
        now = time.monotonic()
        deadline = now + self.graceful_timeout
        manager = self._manager
        turns = self._turns
        # The listeners close after _IDLE_GRACE_S and a few polls: a client that connected
        # just before the stop may still be in the accept queue, and closing a listener
        # resets what waits there (a socket shared with other worker processes stays open
        # in them, with its queue).
        accept_until = now + _IDLE_GRACE_S
        polls = 0
        # An idle connection is closed once it has stayed idle for _IDLE_GRACE_S: a client
        # whose request is on its way (it connected just now) is answered, not cut off.
        idle_since: dict[int, float] = {}
        while now < deadline:
            busy = bool(self._live)
            conns = [c for c in manager.connections if not c.is_listening]
            if self._listeners:
                if now >= accept_until and polls >= 3:
                    for listener in self._listeners:
                        listener.close()
                    self._listeners.clear()
                else:
                    busy = True
            for c in conns:
                if c.userdata is None and not c.send_len and not c.recv_len:
                    if (not c.is_closing
                            and now - idle_since.setdefault(c.id, now) >= _IDLE_GRACE_S):
                        c.close()
                else:
                    busy = True
                    idle_since.pop(c.id, None)
            if not busy and all(c.is_closing for c in conns):
                manager.poll(0)  # Mongoose closes the connections marked above
                return  # every answer is written out to its client
            manager.poll(10)
            polls += 1
            now = time.monotonic()
            if self._outbox:
                self._drain_outbox()
            if turns.pending and not turns.run_pending():
                return

    def stop(self) -> None:
        """Make run() return: requests in flight are finished first. Thread-safe."""
        turns = self._turns
        first = not self._draining
        self._draining = True
        self._refresh_stock()
        with turns.lock:
            turns.stopping = True
        if first and self.on_stop is not None:
            try:
                self.on_stop()
            except Exception as exc:
                report_exception("on_stop failed", exc)
        self._call_loop(_nothing)  # end the current poll wait now

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        turns = self._turns
        self.stop()
        turns.stop(5.0)
        with turns.lock:
            for ex in list(self._live):
                ex.gone()
        if turns.loop_lock.acquire(timeout=5.0):
            self._manager.close()
        else:
            error_log.error("WSGIServer.close(): an app thread still holds the loop; "
                            "its Manager is left open")


def serve(app: AppRef, url: str = "http://127.0.0.1:8000", workers: int = 4,
          stream_timeout: float = 5.0) -> None:
    """Serve `app` on `url` until SIGINT/SIGTERM."""
    server = WSGIServer(app, workers=workers, stream_timeout=stream_timeout)
    server.listen(url)
    print(f"cymongoose WSGI server on {url} ({workers} app threads); Ctrl-C stops it",
          file=sys.stderr)
    server.run()
