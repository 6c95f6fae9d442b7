"""ASGI 3 server (spec 2.4: HTTP, WebSocket, lifespan) on the Mongoose loop.

Mongoose is polled by the asyncio loop itself (`aio.LoopDriver`: its epoll descriptor is
watched with `loop.add_reader`), so a request is parsed, handed to its app task and answered
on one thread, with no hand-over. Each request runs as a task; `send()` writes through the
core's `http_respond` (a whole response: one write) or `http_begin/http_write/http_sendfile/
http_end` (streamed), which keep keep-alive, pipelining, HEAD and `Connection: close` right.
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

from .._mongoose import (
    MG_EV_ACCEPT,
    Connection,
    HeaderBlock,
    Manager,
    TlsOpts,
    handles,
)
from ..access_log import AccessLog
from ..aio import LoopDriver, new_event_loop
from ..config import Config, renamed
from ..errors import LifespanFailure
from ..proxy_headers import ProxyHeaders
from ..serving import (
    SERVER_NAME,
    DateHeader,
    adopt_listener,
    load_app,
    report_exception,
)
from ..typedefs import AppRef, ASGIApp
from .admission import Admission
from .handlers import busy_handler, websocket_handler
from .lifespan import _Lifespan
from .state import ServerState
from .websocket import _WS_OP_CLOSE, _WSCycle

__all__ = ["ASGIServer", "serve"]

# Stopping: listeners keep accepting this long (a client that connected just before the stop
# may still wait in the accept queue), and an idle keep-alive connection is closed once it
# has stayed idle this long (a request on its way is answered, not cut off).
_IDLE_GRACE_S = 0.1

_HTTP_EXTENSIONS: dict[str, Any] = {"http.response.pathsend": {}}
_ASGI_HTTP = {"version": "3.0", "spec_version": "2.4"}  # shared by every scope


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
                 max_requests: int | None = None, config: Config | None = None) -> None:
        # Each option keyword overrides `config` (the defaults without it), checked by the
        # settings table's rule; `shutdown_timeout` is graceful_timeout's old name.
        graceful_timeout = renamed("ASGIServer", "shutdown_timeout", shutdown_timeout,
                                   "graceful_timeout", graceful_timeout)
        cfg = self.config = Config.for_server(
            config, factory=factory, root_path=root_path, lifespan=lifespan,
            graceful_timeout=graceful_timeout, max_requests=max_requests)
        factory, root_path, lifespan = cfg.factory, cfg.root_path, cfg.lifespan
        shutdown_timeout, max_requests = cfg.graceful_timeout, cfg.max_requests
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
        self._shutdown_timeout = float(shutdown_timeout)
        self._manager: Manager | None = None
        self._driver: LoopDriver | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lifespan: _Lifespan | None = None
        self._listeners: list[Connection] = []
        # What the exchanges and WebSocket cycles get of the server (state.py), and the
        # handler of a connection waiting for a request head, which starts the app's tasks
        # (the C ASGILoop, asgi_exchange.pxi, and the Python paths of admission.py).
        self._server_state = server_state = ServerState(access_log, error_handler)
        on_quiet = Admission(server_state, self._app, proxy=proxy_headers,
                             max_requests=max_requests,
                             requests_exhausted=self._max_requests_reached)
        self._unix_conns = on_quiet.unix_conns  # connections accepted on a Unix socket
        self._state = on_quiet.lifespan_state
        # Per listener port: the scope items every request through it shares.
        self._bases = on_quiet.bases
        self._default_base: dict[str, Any] = on_quiet.base_default
        self._tasks: set[asyncio.Task[None]] = on_quiet.tasks
        self._date = DateHeader()
        self._date_timer: asyncio.TimerHandle | None = None
        self._draining = False
        self._refresh_stock()
        self._stopping = False
        self._stop_task: asyncio.Task[None] | None = None

        server_state.quiet_handler = on_quiet
        server_state.busy_handler = busy_handler(on_quiet)
        server_state.websocket_handler = websocket_handler(self._unix_conns)

        tls_opts = tls

        @handles(MG_EV_ACCEPT)
        def on_accept_tls(conn: Connection, ev: int, msg: Any) -> None:
            conn.set_handler(on_quiet)
            assert tls_opts is not None
            conn.tls_init(tls_opts)

        @handles(MG_EV_ACCEPT)
        def on_accept_unix(conn: Connection, ev: int, msg: Any) -> None:
            conn.set_handler(on_quiet)
            self._unix_conns.add(conn.id)

        self._on_accept_tls = on_accept_tls
        self._on_accept_unix = on_accept_unix
        self._on_quiet = on_quiet
        self._loop_side = on_quiet

    @property
    def manager(self) -> Manager:
        if self._manager is None:
            raise RuntimeError("ASGIServer is not started: await start() first")
        return self._manager

    @property
    def state(self) -> dict[str, Any]:
        """The lifespan state; each request's scope["state"] is a shallow copy of it."""
        return self._state

    # _refresh_stock() and listen_socket() assign these two; the exchanges and the loop side
    # read them from their own fields.
    @property
    def _stock(self) -> list[HeaderBlock | None]:
        return self._server_state.default_headers

    @_stock.setter
    def _stock(self, blocks: list[HeaderBlock | None]) -> None:
        self._server_state.default_headers = blocks

    @property
    def _unix_base(self) -> dict[str, Any]:
        return self._loop_side.unix_base

    @_unix_base.setter
    def _unix_base(self, base: dict[str, Any]) -> None:
        self._loop_side.unix_base = base

    # Lifecycle.
    async def start(self, url: str = "http://127.0.0.1:8000", **limits: Any) -> Connection:
        """Run the lifespan startup (once), then listen on `url` with the limits of
        docs/server-behaviour.md. `LifespanFailure` (a RuntimeError) when startup fails."""
        await self._start_loop()
        return self.listen(url, **limits)

    async def start_socket(self, sock: Any, *, tls: bool = False, **limits: Any) -> Connection:
        """`start()` on a listening socket opened elsewhere: see `listen_socket()`."""
        await self._start_loop()
        return self.listen_socket(sock, tls=tls, **limits)

    async def _start_loop(self) -> None:
        if self._manager is None:
            if self._stopping:
                raise RuntimeError("this ASGIServer was stopped")
            loop = asyncio.get_running_loop()
            self._lifespan = _Lifespan(self._app, self._state, self._lifespan_mode)
            await self._lifespan.startup()
            self._manager = Manager(None, enable_wakeup=True, error_handler=self._error_handler)
            self._manager.set_http_limits(**self.config.limits())  # start(**limits) overrides
            if self._access is not None:  # requests the core refused are logged too
                self._manager.refusal_handler = self._access.log_refusal
            self._driver = LoopDriver(self._manager, loop)
            self._server_state.kick = self._driver.kick  # a no-op again once it is detached
            self._loop = loop
            self._loop_side.loop = loop
            self._driver.attach()
            self._date_timer = loop.call_later(1.0, self._tick_date)

    def listen(self, url: str = "http://127.0.0.1:8000", **limits: Any) -> Connection:
        """Another listener on the running server (same app, same loop)."""
        manager = self.manager
        tls = url.startswith(("https:", "wss:"))
        if tls and self._tls is None:
            raise ValueError("an https:// listener needs ASGIServer(..., tls=TlsOpts(cert=..., "
                             "key=...))")
        conn = manager.listen(url, self._on_accept_tls if tls else self._on_quiet,
                              stream_body=True, **limits)
        local = conn.local_addr
        assert local is not None
        self._add_base(local[0], int(local[1]), "https" if tls else "http")
        self._listeners.append(conn)
        return conn

    def listen_socket(self, sock: Any, *, tls: bool = False, **limits: Any) -> Connection:
        """Serve on a listening TCP or Unix socket (or its descriptor) opened elsewhere:
        bound in Python, shared by worker processes, handed over by systemd. The caller keeps
        and closes `sock`. `tls=True` serves HTTPS with the server's `tls` options. Clients
        of a Unix socket are ("127.0.0.1", 0) in the scope and trusted for proxy headers."""
        manager = self.manager
        if tls and self._tls is None:
            raise ValueError("tls=True needs ASGIServer(..., tls=TlsOpts(cert=..., key=...))")
        conn, unix, name = adopt_listener(
            manager, sock, tls=tls, on_unix=self._on_accept_unix, on_tls=self._on_accept_tls,
            on_plain=self._on_quiet, **limits)
        if unix:
            self._unix_base = _scope_base("http", (name if isinstance(name, str) else "",
                                                   None), self._root_path)
            self._extras = self._loop_side.python_admission = True
        else:
            self._add_base(name[0], int(name[1]), "https" if tls else "http")
        self._listeners.append(conn)
        return conn

    def _add_base(self, host: str, port: int, scheme: str) -> None:
        base = _scope_base(scheme, (host, port), self._root_path)
        self._bases[port] = base
        if len(self._bases) == 1:
            self._default_base = self._loop_side.base_default = base

    async def stop(self) -> None:
        """Drain (see _drain: keep accepting briefly, answer with `Connection: close`, close
        idle keep-alive connections, let requests in flight finish, up to shutdown_timeout),
        close WebSockets with 1012, run the lifespan shutdown and free everything.
        Idempotent."""
        stopping = self._stop_task
        if stopping is not None and stopping is not asyncio.current_task():
            await asyncio.shield(stopping)  # max_requests already stops the server
            return
        if self._stopping and self._manager is None:
            return
        self._stopping = True
        self._draining = True
        self._refresh_stock()
        manager, driver = self._manager, self._driver
        if manager is not None and driver is not None:
            for conn in manager.connections:
                cycle = conn.userdata
                if isinstance(cycle, _WSCycle) and cycle.state == cycle._OPEN:
                    try:
                        conn.ws_send((1012).to_bytes(2, "big"), _WS_OP_CLOSE)
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
            await self._lifespan.shutdown(self._shutdown_timeout)
            self._lifespan = None
        if self._date_timer is not None:
            self._date_timer.cancel()
            self._date_timer = None
        if driver is not None:
            driver.detach()
        if manager is not None:
            manager.close()
        self._manager = None
        self._driver = None

    async def _drain(self, manager: Manager, driver: LoopDriver) -> None:
        """Finish the requests in flight and close idle keep-alive connections, for at most
        shutdown_timeout seconds; the listeners keep accepting for _IDLE_GRACE_S first."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        deadline = now + self._shutdown_timeout
        accept_until = now + min(_IDLE_GRACE_S, self._shutdown_timeout)
        idle_since: dict[int, float] = {}
        while True:
            busy = bool(self._tasks)
            if self._listeners:
                if now >= accept_until:
                    for listener in self._listeners:
                        try:
                            listener.close()
                        except RuntimeError:
                            pass
                    self._listeners.clear()
                    driver.kick()
                else:
                    busy = True
            conns = [c for c in manager.connections if not c.is_listening]
            for c in conns:
                if c.userdata is None and not c.send_len and not c.recv_len:
                    if (not c.is_closing
                            and now - idle_since.setdefault(c.id, now) >= _IDLE_GRACE_S):
                        c.close()
                        driver.kick()
                elif not c.is_closing:
                    busy = True
                    idle_since.pop(c.id, None)
                elif c.send_len:
                    busy = True  # an answer still on its way out
            if (not busy and all(c.is_closing for c in conns)) or now >= deadline:
                return
            await asyncio.sleep(0.01)
            now = loop.time()

    # Loop side.
    def _tick_date(self) -> None:
        self._refresh_stock()
        if self._driver is not None:
            self._date_timer = asyncio.get_running_loop().call_later(1.0, self._tick_date)

    def _refresh_stock(self) -> None:
        """The Date (index & 1) and Server (index & 2) fields an app left out, as lists
        indexed by `_stock_index()`, so no response formats a date."""
        date = self._date.get()
        stock: list[list[tuple[bytes, bytes]]] = [
            [], [(b"date", date)], [(b"server", SERVER_NAME)],
            [(b"date", date), (b"server", SERVER_NAME)]]
        if self._draining:
            # Stopping: every response closes its connection, so a client that keeps its
            # connection busy moves on to another worker instead of holding this one.
            stock = [[*lst, (b"connection", b"close")] for lst in stock]
        # Checked and rendered once a second, copied into responses as they are.
        self._stock = [HeaderBlock(lst) if lst else None for lst in stock]

    def _max_requests_reached(self) -> None:
        self._draining = True  # from now on every response closes its connection
        self._refresh_stock()
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
          graceful_timeout: float | None = None, config: Config | None = None,
          **limits: Any) -> None:
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
                        max_requests=max_requests, config=config)

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
