"""PEP 3333 server on the Mongoose loop: Flask, Django or any WSGI app at C-loop speed.

Threads take turns owning the Manager (leader/followers, turns.py): the owner polls and
runs the apps of the requests that poll delivered inline, one after another, so under load no
request crosses a thread and the GIL does not change hands per request. A standby thread takes
the loop over from an owner stuck in one app for `_STALL_S`; that app finishes on its own
thread and hands its response to the loop through an outbox (`Manager.call_soon_threadsafe`).
An app that must wait for the loop (a body still arriving, a client slow to read inside
write()) hands the loop over before it waits; an iterable whose client is behind is parked
instead, its thread free (parking.py). docs/wsgi.md says what is guaranteed,
docs/performance.md what it costs.

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
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from .. import __version__
from .._mongoose import (
    MG_EV_CLOSE,
    MG_EV_HTTP_HDRS,
    MG_EV_READ,
    MG_EV_WRITE,
    Connection,
    Manager,
    TlsOpts,
    handles,
    wsgi_environ_base,
)
from ..access_log import AccessLog
from ..config import Config, renamed
from ..proxy_headers import ProxyHeaders
from ..serving.app_loading import load_app
from ..serving.default_headers import DefaultHeaders
from ..serving.drain import Drain
from ..serving.flow_control import SEND_LOW
from ..serving.guard_options import set_guard_options
from ..serving.listeners import Listeners, is_unix_client, listener_base
from ..serving.reporting import error_log, report_exception
from ..serving.request_budget import RequestBudget
from ..serving.request_deadline import DeadlineCounts, check_interval
from ..serving.stop_signals import StopSignals
from ..serving.tls_fields import verifies_clients, wsgi_ssl_environ
from ..typedefs import AppRef
from .bodies import _NO_BODY, FileWrapper, _StreamInput
from .deadline import WSGIDeadline
from .exchange import _Exchange
from .loop import ServerLoop
from .parking import check_interval_ms
from .state import ServerState
from .turns import _STALL_S, _LoopTurns

_SERVER_SOFTWARE = f"cymongoose/{__version__}"

__all__ = ["WSGIServer", "serve"]


class WSGIServer:
    """Serve a WSGI app on a Manager of its own; see the module docstring."""

    def __init__(self, app: AppRef, workers: int | None = None,
                 error_handler: Callable[[BaseException], object] | None = None,
                 stream_timeout: float | None = None, *, threads: int | None = None,
                 factory: bool | None = None, root_path: str | None = None,
                 url_scheme: str | None = None, access_log: AccessLog | None = None,
                 proxy_headers: ProxyHeaders | None = None, tls: TlsOpts | None = None,
                 graceful_timeout: float | None = None, max_requests: int | None = None,
                 request_timeout: float | None = None, config: Config | None = None) -> None:
        # Each option keyword overrides `config` (the defaults without it), checked by the
        # settings table's rule; 0.2.x's `workers` is the number of app threads.
        threads = renamed("WSGIServer", "workers", workers, "threads", threads,
                          " (the number of app threads; the command line's --workers "
                          "counts processes)")
        cfg = self.config = Config.for_server(
            config, threads=threads, stream_timeout=stream_timeout, factory=factory,
            root_path=root_path, graceful_timeout=graceful_timeout, max_requests=max_requests,
            request_timeout=request_timeout)
        count, stream_timeout, factory = cfg.threads, cfg.stream_timeout, cfg.factory
        root_path, graceful_timeout, max_requests = (cfg.root_path, cfg.graceful_timeout,
                                                     cfg.max_requests)
        access_log = access_log if access_log is not None else cfg.new_access_log()
        proxy_headers = proxy_headers if proxy_headers is not None else cfg.new_proxy_headers()
        tls = tls if tls is not None else cfg.new_tls()
        wsgi_app = load_app(app, factory)  # before anything that would need closing
        self._access = access_log
        # Each exchange's `started` is stamped at its head for the access log and the deadline.
        self._clock_requests = access_log is not None or cfg.request_timeout is not None
        self._proxy = proxy_headers
        self._tls = tls
        self.graceful_timeout = float(graceful_timeout)
        # Requests left before this server stops by itself (a worker recycled after
        # --max-requests); None: no limit. The loop threads of one process swap in one
        # budget they share (process/loop_threads.py).
        self.request_budget: RequestBudget | None = (RequestBudget(max_requests)
                                                     if max_requests else None)
        #: Called once when max_requests is reached, before the server drains and stops.
        self.on_max_requests: Callable[[], object] | None = None
        #: Called once, from stop(), when the server starts to stop (any thread).
        self.on_stop: Callable[[], object] | None = None
        #: Called by run() once a stop signal would be honoured: a supervisor told "ready"
        #: from here cannot kill the server with a SIGTERM it sends at once.
        self.on_ready: Callable[[], object] | None = None
        self._unix_conns: set[int] = set()  # connections accepted on a Unix socket
        self._root_path = root_path
        self._url_scheme = url_scheme
        self._manager = Manager(None, enable_wakeup=True, error_handler=error_handler)
        self._manager.set_http_limits(**cfg.limits())  # listen(**limits) overrides them
        set_guard_options(self._manager, cfg)
        # App threads need the GIL while the loop waits: never wait holding it.
        self._manager.linger_ms = 0
        if access_log is not None:  # requests the core refused or proxied are logged too
            self._manager.refusal_handler = access_log.log_refusal
            self._manager.proxy_log_handler = access_log.log_proxied
        # What the exchanges, their wsgi.input and the turns share (state.py).
        state = ServerState(self._manager, wsgi_app, float(stream_timeout))
        self._state = state
        self._turns = state.turns = _LoopTurns(state, count, _STALL_S)
        self._outbox = state.outbox
        self._closed = False
        # Date and Server for responses that leave them out, made once a second.
        self._default_headers = DefaultHeaders(server=cfg.server_header)
        self._manager.timer_add(1000, self._default_headers.refresh, repeat=True)
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
                    if ex.flow_wrote(0, conn.send_len) and ex.backlog < SEND_LOW:
                        ex.notify_writer()
                    elif ex.parked is not None:
                        parking.drained(ex)
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
                               access_log=access_log,
                               default_headers=self._default_headers.blocks,
                               error_handler=error_handler, queue=self._turns.resume,
                               park=cfg.park_streams)
        self._loop_side = loop_side
        # Streamed responses parked while their client is behind (parking.py): the timer
        # ends those whose client reads nothing for stream_timeout.
        parking = self._parking = loop_side.parking
        self._manager.timer_add(check_interval_ms(float(stream_timeout)), parking.check,
                                repeat=True)
        loop_side.clock_requests = self._clock_requests
        self._counts = DeadlineCounts()
        self._counts.metrics = self._manager.add_metric
        if cfg.request_timeout is not None:
            deadline = WSGIDeadline(cfg.request_timeout, self._turns, self._live, loop_side,
                                    self._counts, bound=count)
            loop_side._deadline = deadline
            self._manager.timer_add(int(check_interval(cfg.request_timeout) * 1000),
                                    deadline.check, repeat=True)
        state.drain_outbox = self._drain_outbox
        state.drain_in_flight = self._drain_in_flight
        # Verified client certificates reach the app as mod_ssl's SSL_* keys
        # (serving/tls_fields.py), added by _on_request.
        self._tls_fields = verifies_clients(tls)
        fast = proxy_headers is None and self.request_budget is None and not self._tls_fields
        loop_side.quiet_handler = loop_side if fast else on_request

        # A Unix-socket client needs _on_request's steps: the environ gets its address.
        self._listeners = Listeners("WSGIServer", tls, loop_side.quiet_handler, on_request,
                                    self._unix_conns, on_address=self._add_base,
                                    on_unix=self._add_unix_base)

    @property
    def manager(self) -> Manager:
        return self._manager

    def metrics(self) -> dict[str, Any]:
        """A snapshot of the server's counters (`Manager.metrics()`: requests by status,
        refusals, the duration histogram, connections, bytes, WebSockets); still readable
        once the server is closed."""
        return dict(self._manager.metrics())

    @property
    def stream_timeout(self) -> float:
        """Seconds a streamed response may wait for a client that reads nothing."""
        return self._state.stream_timeout

    @stream_timeout.setter
    def stream_timeout(self, seconds: float) -> None:
        self._state.stream_timeout = float(seconds)

    @property
    def request_timeouts(self) -> int:
        """Requests answered 504 because their app had not started its response within
        `request_timeout` (serving/request_deadline.py counts them)."""
        return self._counts.request_timeouts

    @property
    def parked_responses(self) -> int:
        """Streamed responses parked while their client is behind: they hold no thread
        (parking.py). Read it from any thread."""
        return len(self._parking)

    @property
    def threads_abandoned(self) -> int:
        """App threads whose request timed out, replaced and still running their app."""
        return self._counts.threads_abandoned

    def listen(self, url: str = "http://127.0.0.1:8000", **limits: Any) -> Connection:
        return self._listeners.listen(self._manager, url, **limits)

    def listen_socket(self, sock: Any, *, tls: bool = False, **limits: Any) -> Connection:
        """Serve on a listening TCP or Unix socket opened elsewhere (bound in Python, shared
        by worker processes, handed over by systemd); the caller keeps and closes `sock`.
        `tls=True` serves HTTPS with the server's `tls` options."""
        return self._listeners.adopt(self._manager, sock, tls, **limits)

    def _add_base(self, host: str, port: int, scheme: str) -> None:
        self._bases[port] = self._make_base(host, str(port), scheme)
        self._base_default = self._loop_side.base_default = self._bases[port]

    def _add_unix_base(self, name: Any) -> None:
        self._unix_base = self._make_base("localhost", "0", "http")
        # Clients of a Unix socket need _on_request's steps, also after a busy spell.
        self._loop_side.quiet_handler = self._listeners.quiet = self._on_request_py

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
            # CGI's field (RFC 3875 §4.1.17), as gunicorn and mod_wsgi set it.
            "SERVER_SOFTWARE": _SERVER_SOFTWARE,
            "SCRIPT_NAME": self._root_path,
        })

    # Loop side.
    def _on_request(self, conn: Connection, msg: Any) -> None:
        base = listener_base(conn, self._bases, self._base_default)
        if self._unix_conns and is_unix_client(conn, self._unix_conns):
            base = self._unix_base
            environ = msg.wsgi_environ(base, conn, self._root_path)
            # Mongoose reads no address from an AF_UNIX peer: the client is local.
            environ["REMOTE_ADDR"] = "127.0.0.1"
            environ["REMOTE_PORT"] = "0"
            if self._proxy is not None:
                self._apply_proxy(environ, None)
        else:
            environ = msg.wsgi_environ(base, conn, self._root_path)
            if self._tls_fields and conn.is_tls:
                environ.update(wsgi_ssl_environ(conn.tls_info))
            if self._proxy is not None:
                self._apply_proxy(environ, environ["REMOTE_ADDR"])
        method = environ["REQUEST_METHOD"]
        ex = _Exchange(self._state, conn, environ, method == "HEAD")
        if self._clock_requests:
            ex.started = time.perf_counter()
        budget = self.request_budget
        if budget is not None and budget.take():
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
        proxy = self._proxy
        assert proxy is not None
        if proxy.source == "forwarded":  # one family only: the other is the client's
            fwd = proxy.resolve(peer, forwarded=environ.get("HTTP_FORWARDED"))
        else:
            fwd = proxy.resolve(
                peer, x_forwarded_for=environ.get("HTTP_X_FORWARDED_FOR"),
                x_forwarded_proto=environ.get("HTTP_X_FORWARDED_PROTO"),
                x_forwarded_host=environ.get("HTTP_X_FORWARDED_HOST") if proxy.host else None)
        if fwd.client_host is not None:
            environ["REMOTE_ADDR"] = fwd.client_host
            environ["REMOTE_PORT"] = str(fwd.client_port or 0)
        if fwd.scheme is not None:
            environ["wsgi.url_scheme"] = "https" if fwd.scheme in ("https", "wss") else "http"
        if fwd.host is not None:
            environ["HTTP_HOST"] = fwd.host

    def _drain_outbox(self) -> None:
        """Owner: write the queued response steps."""
        self._loop_side.drain(self._outbox, self._default_headers.blocks)

    # Lifecycle.
    def run(self, poll_ms: int = 100) -> None:
        if self._closed:
            raise RuntimeError("this WSGIServer is closed")
        self._state.poll_ms = poll_ms
        self._loop_side.apps_in_parallel = _apps_can_run_at_once(self.config.threads)
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
            with StopSignals(self.stop, delay=self.config.drain_delay,
                             unready=self._unready):
                self._manager.ready = True  # the health path answers 200 from here
                if self.on_ready is not None:
                    self.on_ready()
                while True:
                    turns.lead()
                    if turns.stopping or not turns.follow():
                        break
            # While this thread ran an app that was stuck when the stop came, another one
            # took the loop over to drain (turns.py): the server is done when it is.
            if turns.loop_lock.acquire(timeout=self.graceful_timeout + 1.0):
                turns.loop_lock.release()
        finally:
            self.close()

    def _drain_in_flight(self) -> None:
        """Owner, stopping: stop accepting, finish the requests in flight and close idle
        keep-alive connections, for at most `graceful_timeout` seconds (serving/drain.py
        has the rules)."""
        manager = self._manager
        turns = self._turns
        # The listeners stay open for a few polls more: closing one resets what waits in
        # its accept queue (a socket shared with other worker processes stays open in them).
        drain = Drain(manager, self._listeners.connections, self.graceful_timeout,
                      time.monotonic(), min_steps=3)
        while True:
            now = time.monotonic()
            if drain.expired(now):
                return
            if drain.step(now, bool(self._live)):
                manager.poll(0)  # Mongoose closes the connections marked above
                return  # every answer is written out to its client
            manager.poll(10)
            if self._outbox:
                self._drain_outbox()
            if turns.pending and not turns.run_pending():
                return

    def _unready(self) -> None:
        """--drain-delay: health probes say "draining" and each answer closes its
        connection, while the server serves on. Thread-safe: the guard reads a plain int."""
        self._manager.ready = False

    def stop(self) -> None:
        """Make run() return: requests in flight are finished first. Thread-safe."""
        turns = self._turns
        first = not self._default_headers.closing
        # Health probes say "draining" at once, even while an app holds the loop. A plain
        # int the guard reads: safe to set from any thread.
        self._manager.ready = False
        self._default_headers.close_connections()
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
        # Iterables parked for their client, or queued to go on, that no thread will take.
        self._parking.close_all(turns.pending, self._loop_side.close_parked)


def _apps_can_run_at_once(app_threads: int) -> bool:
    """Whether app threads compute at once here: the GIL is off (a free-threaded build; an
    extension imported since may have turned it back on), there are CPUs to do it on, and
    more than one app thread. The owner then hands apps that compute for long to the app
    threads, as it does apps that wait (WSGILoop.run_batch)."""
    gil_enabled = getattr(sys, "_is_gil_enabled", lambda: True)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return not gil_enabled() and (cpus or 1) > 1 and app_threads > 1


def serve(app: AppRef, url: str = "http://127.0.0.1:8000", workers: int | None = None,
          stream_timeout: float | None = None, *, threads: int | None = None,
          config: Config | None = None) -> None:
    """Serve `app` on `url` until SIGINT/SIGTERM; the options are WSGIServer's (`workers`:
    0.2.x's name for `threads`)."""
    threads = renamed("serve", "workers", workers, "threads", threads,
                      " (the number of app threads)")
    server = WSGIServer(app, threads=threads, stream_timeout=stream_timeout, config=config)
    server.listen(url)
    print(f"cymongoose WSGI server on {url} ({server.config.threads} app threads); Ctrl-C "
          "stops it", file=sys.stderr)
    server.run()
