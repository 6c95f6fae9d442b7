"""The server for programs that host apps themselves (model servers, agent frameworks, test
harnesses): `Server(config, app=...)`, awaited inside the program's own running asyncio
loop, on sockets it bound or on the config's address. It reads like `uvicorn.Server` so an
engine that embeds uvicorn changes two lines (docs/embedding.md):

- `await server.serve(sockets=None)` serves until `should_exit` is set (checked every
  0.1 s, from any thread), `shutdown()` is awaited, the serving task is cancelled or, for
  an ASGI app with --max-requests, the count is reached; then it drains (serving/drain.py:
  in-flight requests finish within graceful_timeout) and, for ASGI, runs the lifespan
  shutdown. `started` is True from the moment it listens.
- An ASGI app runs on the caller's loop itself: Mongoose's epoll descriptor is watched by
  that loop (aio.LoopDriver), so its requests are tasks beside the program's own. A WSGI
  app or a raw handler runs on the server's own loop on a thread (process/server_thread.py
  says why), and serve() awaits its end without blocking the caller's loop.
- serve() installs no signal handlers unless asked: the host owns its signals. `run()` is
  the blocking form for a program that does not: an event loop of its own (uvloop's when
  installed) with SIGINT/SIGTERM setting `should_exit` (after --drain-delay, when set).

The sockets given to serve() are closed as soon as it starts to stop, as uvicorn closes
them. The core listens on duplicates, so the listening socket itself lives until the drain
closes those (0.1 s on: a client that connected just before is still served); from then a
new client is refused instead of waiting in an accept queue nobody reads.
The command line's process models (--workers, --reload, --loop-threads and the supervisor's
--metrics and --workers-max-rss) are refused: an embedded server is one server in the
caller's process. Logging is the host's: --log-level and --log-config are not applied.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .aio import new_event_loop
from .config import Config
from .errors import ConfigError
from .process.given_sockets import checked_sockets
from .process.interface import detect_interface
from .process.listening_socket import close_listener, listener_url, open_listener
from .process.server_thread import ServerThread
from .serving.app_loading import load_app
from .serving.drain_delay import DelayedStop
from .typedefs import AppRef

if TYPE_CHECKING:
    from ._mongoose import Manager

__all__ = ["Server"]

log = logging.getLogger("cymongoose.error")

# How often serve() looks at should_exit, which any thread may set (uvicorn's period too).
_EXIT_CHECK_S = 0.1
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# The options that pick a process model of the command line, and what each means there.
_PROCESS_MODELS: tuple[tuple[str, Callable[[Config], bool]], ...] = (
    ("workers", lambda c: c.workers > 1), ("reload", lambda c: c.reload),
    ("loop_threads", lambda c: c.loop_threads > 1), ("metrics", lambda c: c.metrics),
    ("workers_max_rss", lambda c: c.workers_max_rss is not None))


class Server:
    """One server for `config` (a `cymongoose.config.Config`; None: the defaults) and its
    app: `app=` (an object, or a "module:attribute" string) or `config.app`, one of the two.
    Serves once: a stopped Server is not started again."""

    def __init__(self, config: Config | None = None, *, app: AppRef | None = None) -> None:
        config = Config() if config is None else config
        if not isinstance(config, Config):
            raise TypeError(f"config must be a cymongoose.config.Config or None, not "
                            f"{type(config).__name__}")
        if app is not None and config.app is not None:
            raise ValueError(f"the app is given twice: app={app!r} and config.app="
                             f"{config.app!r}; pass one")
        if app is None and config.app is None:
            raise ValueError("no app: pass Server(config, app=app) or "
                             "Config(app='module:attribute')")
        if app is not None and not (isinstance(app, str) or callable(app)):
            raise TypeError(f"app must be a callable or 'module:attribute', not "
                            f"{type(app).__name__}")
        for name, chosen in _PROCESS_MODELS:
            if chosen(config):
                raise ConfigError(f"{name}={getattr(config, name)!r} is a process model of "
                                  "the command line; a Server is one server in this process")
        self.config = config
        self._app_ref: AppRef = app if app is not None else str(config.app)
        #: True once the server listens (and its ASGI lifespan startup has completed).
        self.started = False
        #: Set it (from any thread) to make serve() stop: checked every 0.1 s.
        self.should_exit = False
        self._serving = False
        self._wake: asyncio.Event | None = None  # set by shutdown() and signals: no 0.1 s wait
        self._done: asyncio.Event | None = None  # set once serve() has stopped everything
        self._sockets: list[socket.socket] = []  # listening, until it starts to stop
        self._own_sockets = False  # bound by serve() from the config, not given
        self._manager: Manager | None = None  # the serving server's, once it listens

    def run(self, sockets: Iterable[socket.socket] | None = None) -> None:
        """serve() on an event loop of its own (uvloop's when installed), with SIGINT and
        SIGTERM setting `should_exit` when called on the main thread; returns once stopped.
        RuntimeError inside a running loop (await serve() there)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError("Server.run() cannot be called from a running event loop: "
                               "await server.serve() in it instead")
        loop = new_event_loop()
        try:
            loop.run_until_complete(self.serve(
                sockets, install_signal_handlers=_on_main_thread()))
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    async def serve(self, sockets: Iterable[socket.socket] | None = None, *,
                    install_signal_handlers: bool = False) -> None:
        """Serve on `sockets` (bound and listening; closed when it starts to stop) or, when
        None, on the config's host/port, uds or fd, until `should_exit`; see the module
        docstring.
        `install_signal_handlers=True` (main thread only) lets SIGINT/SIGTERM set
        `should_exit` until serve() returns."""
        loop = _running_loop()
        if self._serving:
            raise RuntimeError("this Server has been served already: a Server serves once, "
                               "make a new one")
        given = checked_sockets(sockets) if sockets is not None else None
        if install_signal_handlers and not _on_main_thread():
            raise RuntimeError("install_signal_handlers=True needs the main thread: only "
                               "it receives signals")
        self._serving = True
        self._wake, self._done = asyncio.Event(), asyncio.Event()
        # The handlers before ours, put back after (remove_signal_handler alone would leave
        # the defaults, not what the program had).
        previous = {signum: signal.getsignal(signum) for signum in _STOP_SIGNALS}
        # --drain-delay applies to the signals serve() takes: the first fails the health
        # path while the server serves on (serving/drain_delay.py). should_exit, the host's
        # own way to stop it, stops at once.
        stops = DelayedStop(self._exit, delay=self.config.drain_delay, unready=self._unready,
                            call_later=loop.call_later)
        if install_signal_handlers:
            for signum in _STOP_SIGNALS:
                loop.add_signal_handler(signum, stops.signal, signal.Signals(signum).name)
        try:
            await self._serve(given)
        finally:
            stops.cancel()
            if install_signal_handlers:
                for signum, handler in previous.items():
                    loop.remove_signal_handler(signum)
                    if handler is not None:  # None: set outside Python, nothing to restore
                        signal.signal(signum, handler)
            self._done.set()

    async def shutdown(self) -> None:
        """Stop serve() and wait until it has: the drain, then the ASGI lifespan shutdown.
        Await it on the serving loop, not from a request of this server (the drain waits
        for that request). Returns at once when serve() is not running."""
        self.should_exit = True
        if self._wake is not None:
            self._wake.set()
        if self._done is not None:
            await self._done.wait()

    async def _serve(self, given: list[socket.socket] | None) -> None:
        config = self.config
        app = load_app(self._app_ref, config.factory)
        interface = config.interface if config.interface != "auto" else detect_interface(app)
        socks = given if given is not None else [open_listener(config)]
        self._sockets, self._own_sockets = list(socks), given is None
        try:
            if interface == "asgi":
                await self._serve_asgi(app, socks)
            else:
                await self._serve_on_thread(app, interface, socks)
        finally:
            self._close_sockets()

    def _close_sockets(self) -> None:
        """Close the listening sockets (see the module docstring); idempotent."""
        socks, self._sockets = self._sockets, []
        for sock in socks:
            if self._own_sockets:
                close_listener(self.config, sock)  # bound here: a --uds file goes too
            else:
                sock.close()

    async def _serve_asgi(self, app: Any, socks: list[socket.socket]) -> None:
        """On the running loop: the lifespan startup, then listen, then wait for the exit
        and stop (drain, lifespan shutdown), also when startup or listening failed."""
        from .asgi import ASGIServer

        if self.config.static:
            from .static_files import ASGIStaticFiles

            app = ASGIStaticFiles(app, self.config.static_mounts())
        server = ASGIServer(app, factory=False, config=self.config)
        server.on_max_requests = self._exit  # it drains in stop() below
        try:
            await server.startup()  # LifespanFailure (a RuntimeError) with the app's message
            for sock in socks:
                server.listen_socket(sock, tls=self.config.ssl_certfile is not None)
            self._manager = server.manager
            self._listening("ASGI", self._urls(socks))
            await self._until_exit(None)
            self._close_sockets()
        finally:
            await server.stop()

    async def _serve_on_thread(self, app: Any, interface: str,
                               socks: list[socket.socket]) -> None:
        """A WSGI app or raw handler: its server listens here, runs on a thread of its own
        (process/server_thread.py) and is stopped from here when it should exit."""
        server = _loop_server(self.config, app, interface)
        try:
            for sock in socks:
                server.listen_socket(sock, tls=self.config.ssl_certfile is not None)
        except BaseException:
            server.close()
            raise
        self._manager = server.manager
        label = "WSGI" if interface == "wsgi" else "raw handler"
        urls = self._urls(socks)  # here: the sockets may be closed once the thread runs
        server.on_ready = lambda: self._listening(label, urls)  # on the server's thread
        thread = ServerThread(server, asyncio.get_running_loop(), f"cymongoose-{interface}")
        thread.start()
        try:
            await self._until_exit(thread.ended)  # a WSGI server may stop itself: max_requests
            self._close_sockets()
        finally:
            thread.stop()
            await asyncio.shield(thread.ended)  # its drain runs on its own thread

    def _urls(self, socks: list[socket.socket]) -> str:
        return ", ".join(listener_url(self.config, sock) for sock in socks)

    def _listening(self, label: str, urls: str) -> None:
        self.started = True
        log.info("serving (%s) on %s", label, urls)

    async def _until_exit(self, ended: asyncio.Future[None] | None) -> None:
        """Return once `should_exit` is set (seen within 0.1 s; at once through the wake
        event) or `ended` is done."""
        assert self._wake is not None
        waiter = asyncio.ensure_future(self._wake.wait())
        waits: set[asyncio.Future[Any]] = {waiter} if ended is None else {waiter, ended}
        try:
            while not self.should_exit and not (ended is not None and ended.done()):
                await asyncio.wait(waits, timeout=_EXIT_CHECK_S,
                                   return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if self.should_exit:
            log.info("stopping, finishing the requests in flight")

    def _exit(self) -> None:
        """On the serving loop: stop now (a signal, --max-requests)."""
        self.should_exit = True
        if self._wake is not None:
            self._wake.set()

    def _unready(self) -> None:
        """A signal with --drain-delay: the health path answers 503 (thread-safe)."""
        if self._manager is not None:
            self._manager.ready = False


def _running_loop() -> asyncio.AbstractEventLoop:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError("Server.serve() must be awaited in a running asyncio event loop "
                           "(asyncio.run(server.serve()), or server.run() to let it own "
                           "one)") from None


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _loop_server(config: Config, app: Any, interface: str) -> Any:
    """The server that runs its own loop for a WSGI app or a raw handler (not started)."""
    if interface == "wsgi":
        from .wsgi import WSGIServer

        if config.static:
            from .static_files import StaticFiles

            app = StaticFiles(app, config.static_mounts())
        return WSGIServer(app, factory=False, config=config)
    if interface == "raw":
        from .bare import RawServer

        return RawServer(app, config=config)
    raise ConfigError(f"interface {interface!r} is not served by Server")

