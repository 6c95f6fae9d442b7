"""PEP 3333 server on the Mongoose loop: Flask, Django or any WSGI app at C-loop speed.

Threads take turns owning the Manager (leader/followers, turns.py): the owner polls and
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

This module holds the server's lifecycle (listeners, run, stop, close) and the requests the
C admission leaves to Python; the parts get `state.ServerState`, never the server:
exchange.py (one request), bodies.py (wsgi.input, FileWrapper), turns.py (who owns the
loop), loop.py with responses.py and results.py (the hooks of the C per-request work).
"""

from __future__ import annotations

import io
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from .._mongoose import (
    MG_EV_ACCEPT,
    MG_EV_CLOSE,
    MG_EV_HTTP_HDRS,
    MG_EV_READ,
    MG_EV_WRITE,
    Connection,
    HeaderBlock,
    Manager,
    TlsOpts,
    handles,
    wsgi_environ_base,
)
from ..access_log import AccessLog
from ..proxy_headers import ProxyHeaders
from ..serving import (
    SERVER_NAME,
    DateHeader,
    adopt_listener,
    error_log,
    load_app,
    report_exception,
)
from ..serving.stop_signals import StopSignals
from ..typedefs import AppRef
from .bodies import _NO_BODY, FileWrapper, _StreamInput
from .exchange import _SEND_LOW, _Exchange
from .loop import ServerLoop
from .state import ServerState
from .turns import _STALL_S, _LoopTurns

__all__ = ["WSGIServer", "serve"]

# Stopping: a connection with no request in flight is closed after being idle this long.
_IDLE_GRACE_S = 0.1


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
        wsgi_app = load_app(app, factory)  # before anything that would need closing
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
        #: Called by run() once a stop signal would be honoured: a supervisor told "ready"
        #: from here cannot kill the server with a SIGTERM it sends at once.
        self.on_ready: Callable[[], object] | None = None
        self._listeners: list[Connection] = []
        self._unix_conns: set[int] = set()  # connections accepted on a Unix socket
        self._root_path = root_path
        self._url_scheme = url_scheme
        self._manager = Manager(None, enable_wakeup=True, error_handler=error_handler)
        # App threads need the GIL while the loop waits: never wait holding it.
        self._manager.linger_ms = 0
        if access_log is not None:  # requests the core refused are logged too
            self._manager.refusal_handler = access_log.log_refusal
        # What the exchanges, their wsgi.input and the turns share (state.py).
        state = ServerState(self._manager, wsgi_app, float(stream_timeout))
        self._state = state
        self._turns = state.turns = _LoopTurns(state, count, _STALL_S)
        self._outbox = state.outbox
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

        # The per-request loop work in C (WSGILoop, wsgi_exchange.pxi) with its Python hooks
        # (loop.py): admitting requests, running the owner's batch of apps, writing
        # responses. Admission is Python's (on_request above) while proxy headers or
        # max_requests are on, and for Unix-socket clients: those need the extra steps of
        # _on_request.
        loop_side = ServerLoop(state, pending=self._turns.pending, live=self._live,
                               bases=self._bases, root_path=root_path, busy_handler=on_stream,
                               access_log=access_log, stock_for=self._stock_for,
                               error_handler=error_handler)
        self._loop_side = loop_side
        state.drain_outbox = self._drain_outbox
        state.drain_in_flight = self._drain_in_flight
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

    @property
    def stream_timeout(self) -> float:
        """Seconds a streamed response may wait for a client that reads nothing."""
        return self._state.stream_timeout

    @stream_timeout.setter
    def stream_timeout(self, seconds: float) -> None:
        self._state.stream_timeout = float(seconds)

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
        ex = _Exchange(self._state, conn, environ, method == "HEAD")
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

    def _drain_outbox(self) -> None:
        """Owner: write the queued response steps."""
        # Cleared before draining: a post that misses this drain wakes the loop again.
        self._state.wake_pending = False
        self._loop_side.drain(self._outbox, self._stock_lists)

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

    # Lifecycle.
    def run(self, poll_ms: int = 100) -> None:
        if self._closed:
            raise RuntimeError("this WSGIServer is closed")
        self._state.poll_ms = poll_ms
        turns = self._turns
        # This thread starts as the loop's owner (before any app thread could take the
        # vacant loop), then takes turns like the app threads.
        turns.loop_lock.acquire()
        with turns.lock:
            turns.owner = threading.current_thread()
        turns.start()
        try:
            # This thread takes turns at the loop and may wait on the turns' lock when a
            # stop signal comes: StopSignals acts on it from a thread of its own.
            with StopSignals(self.stop):
                if self.on_ready is not None:
                    self.on_ready()
                while True:
                    turns.lead()
                    if turns.stopping or not turns.follow():
                        break
        finally:
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
        self._state.interrupt_poll()  # end the current poll wait now

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
