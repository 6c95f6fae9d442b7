"""ASGI 3 server (spec 2.4: HTTP, WebSocket, lifespan) on the Mongoose loop.

Mongoose is polled by the asyncio loop itself (`aio.LoopDriver`: its epoll descriptor, or
without epoll each socket, watched with `loop.add_reader`), so a request is parsed, handed to
its app task and answered on one thread, with no hand-over. Each request runs as a task;
`send()` writes through the core's `http_respond` (a whole response: one write) or
`http_begin/http_write/http_sendfile/http_end` (streamed), which keep keep-alive, pipelining,
HEAD and `Connection: close` right.
Request bodies stream (`listen(..., stream_body=True)`): the core stops reading a socket while
the app leaves 256 KiB unread. A WebSocket handshake waits for the app's `websocket.accept`
(`Connection.ws_accept`) or is refused with its HTTP answer. docs/asgi.md says what is
guaranteed.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable
from typing import Any

from .._mongoose import WEBSOCKET_OP_CLOSE, Connection, Manager, TlsOpts
from ..access_log import AccessLog
from ..aio import LoopDriver, new_event_loop
from ..config import Config, renamed
from ..errors import LifespanFailure
from ..proxy_headers import ProxyHeaders
from ..serving.app_loading import load_app
from ..serving.default_headers import DefaultHeaders
from ..serving.drain import Drain
from ..serving.guard_options import set_guard_options
from ..serving.listeners import Listeners
from ..serving.reporting import report_exception
from ..serving.request_budget import RequestBudget
from ..serving.request_deadline import DeadlineCounts
from ..serving.tls_fields import verifies_clients
from ..typedefs import AppRef, ASGIApp
from .admission import Admission
from .deadline import ASGIDeadline
from .handlers import busy_handler, websocket_handler
from .lifespan import _Lifespan
from .state import ServerState
from .websocket import _WSCycle

__all__ = ["ASGIServer", "serve"]

# http.response.trailers: sent on HTTP/2, and on HTTP/1.1 responses framed chunked (no
# Content-Length from the app); with any other framing there is no place for them.
_HTTP_EXTENSIONS: dict[str, Any] = {"http.response.pathsend": {}, "http.response.trailers": {}}
# Shared by every HTTP scope. 2.3, not 2.4: a send() after the client left returns quietly, as
# on uvicorn and granian (2.3 servers), because Django's ASGI handler lets an OSError from
# send() skip its request_finished, and with it the return of the request's database
# connection to the pool: every client that left before its answer leaked one. Starlette, told
# 2.3, listens for http.disconnect itself while it streams.
_ASGI_HTTP = {"version": "3.0", "spec_version": "2.3"}


def _scope_base(scheme: str, server: tuple[str, int | None], root_path: str) -> dict[str, Any]:
    """The items every request through one listener shares, and a placeholder for each one
    HttpMessage.asgi_scope() fills in: copying a dict that has all its keys and replacing
    values costs less than growing a copy."""
    return {"type": "http", "asgi": _ASGI_HTTP, "http_version": "1.1", "method": "GET",
            "scheme": scheme, "path": "/", "raw_path": b"/", "query_string": b"",
            "root_path": root_path, "headers": [], "client": None, "server": server,
            "extensions": _HTTP_EXTENSIONS, "state": None}


class ASGIServer:
    """Serve an ASGI app on a Manager driven by the running asyncio loop."""

    def __init__(self, app: AppRef, error_handler: Callable[[BaseException], object] | None
                 = None, *, factory: bool | None = None, root_path: str | None = None,
                 lifespan: str | None = None, graceful_timeout: float | None = None,
                 shutdown_timeout: float | None = None, access_log: AccessLog | None = None,
                 proxy_headers: ProxyHeaders | None = None, tls: TlsOpts | None = None,
                 max_requests: int | None = None, request_timeout: float | None = None,
                 config: Config | None = None) -> None:
        # Each option keyword overrides `config` (the defaults without it), checked by the
        # settings table's rule; `shutdown_timeout` is graceful_timeout's old name.
        graceful_timeout = renamed("ASGIServer", "shutdown_timeout", shutdown_timeout,
                                   "graceful_timeout", graceful_timeout)
        cfg = self.config = Config.for_server(
            config, factory=factory, root_path=root_path, lifespan=lifespan,
            graceful_timeout=graceful_timeout, max_requests=max_requests,
            request_timeout=request_timeout)
        factory, root_path, lifespan = cfg.factory, cfg.root_path, cfg.lifespan
        max_requests = cfg.max_requests
        if error_handler is not None and not callable(error_handler):
            raise TypeError("error_handler must be a callable error_handler(exc) or None")
        options: tuple[tuple[str, object, type, str], ...] = (
            ("access_log", access_log, AccessLog, "an AccessLog"),
            ("proxy_headers", proxy_headers, ProxyHeaders, "a ProxyHeaders"),
            ("tls", tls, TlsOpts, "a TlsOpts"))
        for name, value, cls, what in options:
            if value is not None and not isinstance(value, cls):
                raise TypeError(f"{name} must be {what} or None, not {type(value).__name__}")
        access_log = access_log if access_log is not None else cfg.new_access_log()
        proxy_headers = proxy_headers if proxy_headers is not None else cfg.new_proxy_headers()
        tls = tls if tls is not None else cfg.new_tls()
        self._app: ASGIApp = load_app(app, factory)
        self._access = access_log
        self._tls = tls
        #: Called once when max_requests is reached; the owner then awaits stop(), which
        #: finishes the requests in flight. Without it the server stops itself.
        self.on_max_requests: Callable[[], object] | None = None
        self._error_handler = error_handler
        self._root_path = root_path
        self._lifespan_mode = lifespan
        self._graceful_timeout = cfg.graceful_timeout
        self._manager: Manager | None = None
        self._final_metrics: dict[str, Any] | None = None  # metrics() once stopped
        self._driver: LoopDriver | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lifespan: _Lifespan | None = None
        # What the exchanges and WebSocket cycles get of the server (state.py), and the
        # handler of a connection waiting for a request head, which starts the app's tasks
        # (the C ASGILoop, asgi_exchange.pxi, and the Python paths of admission.py).
        self._server_state = server_state = ServerState(access_log, error_handler)
        server_state.ws_deflate = cfg.ws_per_message_deflate
        # Each exchange's `started` is stamped at its head for the access log and the deadline.
        server_state.clock_requests = (access_log is not None
                                       or cfg.request_timeout is not None)
        self._counts = DeadlineCounts()
        self._deadline = (ASGIDeadline(cfg.request_timeout, self._counts)
                          if cfg.request_timeout is not None else None)
        on_quiet = Admission(server_state, self._app, proxy=proxy_headers,
                             max_requests=max_requests,
                             requests_exhausted=self._max_requests_reached,
                             tls_fields=verifies_clients(tls))
        self._unix_conns = on_quiet.unix_conns  # connections accepted on a Unix socket
        self._state = on_quiet.lifespan_state
        # Per listener port: the scope items every request through it shares.
        self._bases = on_quiet.bases
        self._tasks: set[asyncio.Task[None]] = on_quiet.tasks
        # Date and Server for responses that leave them out: the exchanges read the blocks
        # (updated in place) from their state.
        self._default_headers = DefaultHeaders(lowercase=True, server=cfg.server_header)
        server_state.default_headers = self._default_headers.blocks
        self._date_timer: asyncio.TimerHandle | None = None
        self._stopping = False
        self._stop_task: asyncio.Task[None] | None = None

        server_state.quiet_handler = on_quiet
        server_state.busy_handler = busy_handler(on_quiet)
        server_state.websocket_handler = websocket_handler(self._unix_conns)

        self._loop_side = on_quiet
        # A Unix-socket client needs admit_request()'s steps: the scope gets its address.
        self._listeners = Listeners("ASGIServer", tls, on_quiet, on_quiet, self._unix_conns,
                                    on_address=self._add_base, on_unix=self._add_unix_base)

    @property
    def manager(self) -> Manager:
        if self._manager is None:
            raise RuntimeError("ASGIServer is not started: await start() first")
        return self._manager

    def metrics(self) -> dict[str, Any]:
        """A snapshot of the server's counters (`Manager.metrics()`: requests by status,
        refusals, the duration histogram, connections, bytes, WebSockets); after `stop()`,
        the final ones. `RuntimeError` before `start()`."""
        if self._manager is None and self._final_metrics is not None:
            return self._final_metrics
        return dict(self.manager.metrics())

    @property
    def request_budget(self) -> RequestBudget | None:
        """The --max-requests count left (None: no limit). The loop threads of one process
        share one (process/loop_threads.py); set it before the server listens."""
        return self._loop_side.request_budget

    @request_budget.setter
    def request_budget(self, budget: RequestBudget | None) -> None:
        self._loop_side.request_budget = budget

    @property
    def request_timeouts(self) -> int:
        """Requests answered 504 because their app had sent no http.response.start within
        `request_timeout` (serving/request_deadline.py counts them)."""
        return self._counts.request_timeouts

    @property
    def threads_abandoned(self) -> int:
        """Always 0: a timed-out ASGI app's task is cancelled, no thread is left behind
        (here so both servers offer the same counters)."""
        return self._counts.threads_abandoned

    @property
    def state(self) -> dict[str, Any]:
        """The lifespan state; each request's scope["state"] is a shallow copy of it."""
        return self._state

    # Lifecycle.
    async def start(self, url: str = "http://127.0.0.1:8000", **limits: Any) -> Connection:
        """Run the lifespan startup (once), then listen on `url` with the limits of
        docs/server-behaviour.md. `LifespanFailure` (a RuntimeError) when startup fails."""
        await self.startup()
        return self.listen(url, **limits)

    async def start_socket(self, sock: Any, *, tls: bool = False, **limits: Any) -> Connection:
        """`start()` on a listening socket opened elsewhere: see `listen_socket()`."""
        await self.startup()
        return self.listen_socket(sock, tls=tls, **limits)

    async def startup(self) -> None:
        """The lifespan startup (once) and the server on the running loop, with no listener
        yet: `listen()`/`listen_socket()` add them, and nothing is accepted before the loop
        runs again. `start()` is the two together."""
        if self._manager is None:
            if self._stopping:
                raise RuntimeError("this ASGIServer was stopped")
            loop = asyncio.get_running_loop()
            self._lifespan = _Lifespan(self._app, self._state, self._lifespan_mode)
            await self._lifespan.startup()
            self._manager = Manager(None, enable_wakeup=True, error_handler=self._error_handler)
            self._manager.set_http_limits(**self.config.limits())  # start(**limits) overrides
            set_guard_options(self._manager, self.config)
            self._counts.metrics = self._manager.add_metric
            self._manager.ready = True  # the lifespan startup is done: healthy from here
            if self._access is not None:  # requests the core refused or proxied are logged too
                self._manager.refusal_handler = self._access.log_refusal
                self._manager.proxy_log_handler = self._access.log_proxied
            self._driver = LoopDriver(self._manager, loop)
            self._server_state.kick = self._driver.kick  # a no-op again once it is detached
            self._loop = loop
            self._loop_side.loop = loop
            self._driver.attach()
            self._date_timer = loop.call_later(1.0, self._tick_date)
            if self._deadline is not None:
                self._deadline.start(loop, self._manager)

    def listen(self, url: str = "http://127.0.0.1:8000", **limits: Any) -> Connection:
        """Another listener on the running server (same app, same loop)."""
        conn = self._listeners.listen(self.manager, url, **limits)
        self._server_state.kick()  # without epoll, a socket is watched after a poll step
        return conn

    def listen_socket(self, sock: Any, *, tls: bool = False, **limits: Any) -> Connection:
        """Serve on a listening TCP or Unix socket (or its descriptor) opened elsewhere:
        bound in Python, shared by worker processes, handed over by systemd. The caller keeps
        and closes `sock`. `tls=True` serves HTTPS with the server's `tls` options. Clients
        of a Unix socket are ("127.0.0.1", 0) in the scope and trusted for proxy headers."""
        conn = self._listeners.adopt(self.manager, sock, tls, **limits)
        self._server_state.kick()  # without epoll, a socket is watched after a poll step
        return conn

    def _add_unix_base(self, name: Any) -> None:
        self._loop_side.unix_base = _scope_base(
            "http", (name if isinstance(name, str) else "", None), self._root_path)
        self._loop_side.python_admission = True

    def _add_base(self, host: str, port: int, scheme: str) -> None:
        base = _scope_base(scheme, (host, port), self._root_path)
        self._bases[port] = base
        if len(self._bases) == 1:
            self._loop_side.base_default = base

    async def stop(self) -> None:
        """Drain (see _drain: keep accepting briefly, answer with `Connection: close`, close
        idle keep-alive connections, let requests in flight finish, up to graceful_timeout),
        close WebSockets with 1012, run the lifespan shutdown and free everything.
        Idempotent."""
        stopping = self._stop_task
        if stopping is not None and stopping is not asyncio.current_task():
            await asyncio.shield(stopping)  # max_requests already stops the server
            return
        if self._stopping and self._manager is None:
            return
        self._stopping = True
        self._default_headers.close_connections()
        manager, driver = self._manager, self._driver
        if manager is not None:
            manager.ready = False  # health probes say "draining" from here
        if manager is not None and driver is not None:
            for conn in manager.connections:
                cycle = conn.userdata
                if isinstance(cycle, _WSCycle) and cycle.state == cycle._OPEN:
                    try:
                        conn.ws_send((1012).to_bytes(2, "big"), WEBSOCKET_OP_CLOSE)
                        cycle.state = cycle._CLOSING
                    except RuntimeError:
                        pass
            driver.kick()
            await self._drain(manager, driver)
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:
                await asyncio.wait(set(self._tasks), timeout=1.0)
            # A task cancelled before it started never ran its own removal.
            self._tasks.difference_update([task for task in self._tasks if task.done()])
        if self._lifespan is not None:
            await self._lifespan.shutdown(self._graceful_timeout)
            self._lifespan = None
        if self._date_timer is not None:
            self._date_timer.cancel()
            self._date_timer = None
        if self._deadline is not None:
            self._deadline.stop()
        if driver is not None:
            driver.detach()
        if manager is not None:
            manager.close()
            self._final_metrics = dict(manager.metrics())
        self._manager = None
        self._driver = None

    async def _drain(self, manager: Manager, driver: LoopDriver) -> None:
        """Finish the requests in flight and close idle keep-alive connections, for at most
        graceful_timeout seconds (serving/drain.py has the rules)."""
        loop = asyncio.get_running_loop()
        drain = Drain(manager, self._listeners.connections, self._graceful_timeout,
                      loop.time(), on_close=driver.kick)
        while True:
            now = loop.time()
            if drain.step(now, bool(self._tasks)) or drain.expired(now):
                return
            await asyncio.sleep(0.01)

    # Loop side.
    def _tick_date(self) -> None:
        self._default_headers.refresh()
        if self._driver is not None:
            self._date_timer = asyncio.get_running_loop().call_later(1.0, self._tick_date)

    def _max_requests_reached(self) -> None:
        self._default_headers.close_connections()
        callback = self.on_max_requests
        if callback is not None:
            try:
                callback()
            except Exception as exc:
                report_exception("on_max_requests failed", exc)
        elif self._stop_task is None and not self._stopping and self._loop is not None:
            self._stop_task = self._loop.create_task(self.stop())

def serve(app: AppRef, url: str = "http://127.0.0.1:8000", *, factory: bool | None = None,
          root_path: str | None = None, lifespan: str | None = None,
          shutdown_timeout: float | None = None, access_log: AccessLog | None = None,
          proxy_headers: ProxyHeaders | None = None, tls: TlsOpts | None = None,
          max_requests: int | None = None,
          error_handler: Callable[[BaseException], object] | None = None,
          graceful_timeout: float | None = None, request_timeout: float | None = None,
          config: Config | None = None, **limits: Any) -> None:
    """Serve `app` on `url` until SIGINT/SIGTERM (uvloop when installed), or until
    `max_requests` requests were admitted; the requests in flight are finished first. The
    options are ASGIServer's (an https:// `url` needs `tls`; `shutdown_timeout` is
    graceful_timeout's old name); `limits` go to its listener. A failed lifespan startup
    prints the app's message and exits with status 3."""
    graceful_timeout = renamed("serve", "shutdown_timeout", shutdown_timeout,
                               "graceful_timeout", graceful_timeout)
    server = ASGIServer(app, error_handler, factory=factory, root_path=root_path,
                        lifespan=lifespan, graceful_timeout=graceful_timeout,
                        access_log=access_log, proxy_headers=proxy_headers, tls=tls,
                        max_requests=max_requests, request_timeout=request_timeout,
                        config=config)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        try:
            try:
                await server.start(url, **limits)
            except LifespanFailure as exc:
                print(f"cymongoose: ASGI lifespan startup failed: {exc}", file=sys.stderr)
                raise SystemExit(3) from None
            print(f"cymongoose ASGI server on {url}; Ctrl-C stops it", file=sys.stderr)
            server.on_max_requests = stop.set
            await stop.wait()
        finally:
            await server.stop()
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)

    loop = new_event_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
