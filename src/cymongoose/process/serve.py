"""One serving process of the command line: open (or inherit) the listening socket, load
the app, tell which interface it speaks, and serve it until SIGTERM/SIGINT. With
--health-path the socket is opened first and answers 503 while the app loads (starting.py).

A worker started by a supervisor (supervisor.py) gets the shared socket and a status pipe as
descriptors, and reports on the pipe, one line each: `ready <interface>`, `error <message>`
(it could not start; the supervisor prints the message and stops) or `recycle` (it reached
--max-requests and drains: start its replacement now). With --metrics it also gets a shared
memory slot (`--worker-metrics FD`) its core counts into.

Once the server has adopted the listening socket (the core keeps a duplicate), this process
closes its own descriptor: when the server stops accepting, the socket is then closed in
this process, and once every process has closed it a new client is refused at once rather
than left waiting in an accept queue nobody reads (a load balancer's probe reads a refusal
as "not here", a wait as a hang).
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import logging
import os
import random
import signal
import socket
import sys
import threading
import time
from typing import Any

from ..config import Config
from ..errors import AppLoadError, ConfigError, LifespanFailure, StartupFailed
from ..log_config import configure_logging, keep_server_loggers
from ..serving.app_loading import load_app
from ..serving.guard_options import set_guard_options
from .env_file import load_env_file
from .interface import detect_interface
from .listening_socket import close_listener, listener_url, open_listener
from .starting import StartingResponder, starting_responder
from .status_pipe import StatusPipe
from .worker_metrics import share_with_supervisor

__all__ = ["serve_process"]

log = logging.getLogger("cymongoose.error")


def serve_process(config: Config) -> int:
    status = StatusPipe(config.worker_status)
    if config.worker_socket is not None:
        # The supervisor's signals: a terminal's hang-up or job control reaching the whole
        # process group must not stop a worker behind the supervisor's back.
        for signum in (signal.SIGHUP, signal.SIGTTIN, signal.SIGTTOU):
            signal.signal(signum, signal.SIG_IGN)
    try:
        configure_logging(config.log_level, config.access_log, config.access_log_file,
                          config.log_config)
    except ValueError as exc:
        return _fail(status, ConfigError(str(exc)))
    if config.env_file:
        try:
            ignored = load_env_file(config.env_file)
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            return _fail(status, ConfigError(f"--env-file: {exc}"))
        if ignored:
            log.warning("--env-file %s sets %s: the server's options were read before it, "
                        "so only the app sees them (set them in the environment or on the "
                        "command line)", config.env_file, ", ".join(ignored))
    if "." not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # `cymongoose app:app` finds app.py here, as uvicorn
    try:
        if config.app is None:  # cli.parse_args allows it with --proxy only
            proxy_sock = (socket.socket(fileno=config.worker_socket)
                          if config.worker_socket is not None else open_listener(config))
            return _serve_proxy(config, proxy_sock, status)
        # With --health-path the port listens (and answers 503) while the app loads; a
        # worker's supervisor does that for it (starting.py).
        sock: socket.socket | None = None
        starting: StartingResponder | None = None
        if config.health_path and config.worker_socket is None:
            sock = open_listener(config)
            starting = starting_responder(config, sock)
        try:
            restore_loggers = keep_server_loggers()
            try:
                app = load_app(config.app, factory=config.factory)
            except AppLoadError as exc:
                raise ConfigError(str(exc)) from None
            finally:
                restore_loggers()
            interface = (config.interface if config.interface != "auto"
                         else detect_interface(app))
            if sock is None:
                sock = (socket.socket(fileno=config.worker_socket)
                        if config.worker_socket is not None else open_listener(config))
            if interface == "asgi":
                return _serve_asgi(config, app, sock, status, starting)
            if interface == "raw":
                return _serve_raw(config, app, sock, status, starting)
            return _serve_wsgi(config, app, sock, status, starting)
        except BaseException:
            if starting is not None:
                starting.close()
                if sock is not None:
                    close_listener(config, sock)  # opened here for it: a --uds file goes
            raise
    except ConfigError as exc:
        return _fail(status, exc)


def _fail(status: StatusPipe, exc: ConfigError) -> int:
    if status.connected:
        status.send(f"error {exc}")  # the supervisor prints it, once
    else:
        print(f"cymongoose: {exc}", file=sys.stderr, flush=True)
    return exc.exit_status


def _this_worker(config: Config) -> Config:
    """The config a server of this process gets: --max-requests plus this worker's jitter, so
    the workers do not all restart at once."""
    if not config.max_requests:
        return config
    jitter = random.randint(0, config.max_requests_jitter)
    return dataclasses.replace(config, max_requests=config.max_requests + jitter)


def _exit_after_graceful_timeout(config: Config, phases: int = 1) -> None:
    """Started when the worker begins to stop: if it is still running one second after its
    `phases` stop phases had --graceful-timeout each (a request stuck in a blocking call that
    never returns, perhaps on the very thread that would return), the process ends anyway,
    so a stop never waits on an app."""
    seconds = phases * config.graceful_timeout + 1.0

    def give_up() -> None:
        log.error("still stopping %.0f s after the stop signal (--graceful-timeout %g): "
                  "exiting without the requests in flight", seconds, config.graceful_timeout)
        from ..access_log import close_writers

        close_writers()  # os._exit() skips the atexit hooks that would write them out
        logging.shutdown()
        os._exit(0)

    timer = threading.Timer(seconds, give_up)
    timer.daemon = True
    timer.start()


def _adopted(config: Config, sock: socket.socket) -> None:
    """The server serves on its own duplicate of `sock` now: close ours (see the top)."""
    if config.uds and config.worker_socket is None:
        return  # close_listener() removes the socket file at the end
    sock.close()


def _stopped(config: Config, sock: socket.socket) -> int:
    close_listener(config, sock)
    log.info("stopped")
    return 0


def _serve_wsgi(config: Config, app: Any, sock: socket.socket,
                status: StatusPipe, starting: StartingResponder | None) -> int:
    from ..static_files import StaticFiles
    from ..wsgi import WSGIServer

    try:
        if config.static:
            app = StaticFiles(app, config.static_mounts())
        # The app is loaded already (a --factory called): the server takes it as it is.
        server = WSGIServer(app, factory=False, config=_this_worker(config))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    try:
        server.listen_socket(sock, tls=config.ssl_certfile is not None)
    except (ValueError, TypeError, RuntimeError, OSError) as exc:
        server.close()
        raise ConfigError(f"cannot serve on {listener_url(config, sock)}: {exc}") from None
    if starting is not None:
        starting.close()  # the server listens: its health path says 503 until run() starts
    share_with_supervisor(server.manager, config.worker_metrics)
    url = listener_url(config, sock)
    _adopted(config, sock)

    def ready() -> None:
        log.info("serving %s (WSGI, %d app threads) on %s", config.app, config.threads, url)
        status.ready("wsgi")

    server.on_max_requests = lambda: status.send("recycle")
    server.on_stop = lambda: _exit_after_graceful_timeout(config)
    server.on_ready = ready
    server.run()
    return _stopped(config, sock)


def _serve_raw(config: Config, app: Any, sock: socket.socket,
               status: StatusPipe, starting: StartingResponder | None) -> int:
    from .._mongoose import MG_EV_ACCEPT, Manager, listen_fd

    if (config.static or config.access_log or config.proxy_headers
            or config.request_timeout is not None):
        raise ConfigError("--static, --access-log, --proxy-headers and --request-timeout need "
                          "a WSGI or ASGI app; a raw handler answers requests itself")
    tls = config.new_tls()
    handler = app
    if tls is not None:
        def handler(conn: Any, ev: int, data: Any) -> None:
            if ev == MG_EV_ACCEPT:
                conn.tls_init(tls)
            app(conn, ev, data)
    manager = Manager(handler)
    set_guard_options(manager, config)
    try:
        listen_fd(manager, sock, handler, http=True, tls=tls is not None, **config.limits())
    except (ValueError, TypeError, RuntimeError, OSError) as exc:
        manager.close()
        raise ConfigError(f"cannot serve on {listener_url(config, sock)}: {exc}") from None
    if starting is not None:
        starting.close()
    share_with_supervisor(manager, config.worker_metrics)
    log.info("serving %s (raw handler) on %s", config.app, listener_url(config, sock))
    _adopted(config, sock)
    manager.ready = True  # a raw server stops at once on a signal: no draining state
    status.ready("raw")
    manager.run()
    return _stopped(config, sock)


def _serve_proxy(config: Config, sock: socket.socket, status: StatusPipe) -> int:
    """A pure reverse proxy (--proxy without APP): the core answers the routes; anything
    else is a 404 from a handler that sees only those requests. SIGTERM drains like the app
    servers: the listener closes, proxied requests in flight finish (within
    --graceful-timeout), idle connections close."""
    from .._mongoose import MG_EV_ACCEPT, MG_EV_HTTP_MSG, Manager, handles, listen_fd
    from ..serving.drain import Drain
    from ..serving.stop_signals import StopSignals

    if config.static or config.request_timeout is not None:
        raise ConfigError("--static and --request-timeout need an app; a pure proxy (--proxy "
                          "without APP) has none")
    tls = config.new_tls()

    @handles(MG_EV_ACCEPT, MG_EV_HTTP_MSG)
    def handler(conn: Any, ev: int, data: Any) -> None:
        if ev == MG_EV_ACCEPT:
            if tls is not None:
                conn.tls_init(tls)
        else:
            conn.reply(404, "Not Found: no proxy route takes this path\n",
                       headers={"Content-Type": "text/plain; charset=utf-8"})

    manager = Manager(handler)
    access_log = config.new_access_log()
    if access_log is not None:
        manager.refusal_handler = access_log.log_refusal
        manager.proxy_log_handler = access_log.log_proxied  # proxied requests are logged too
    set_guard_options(manager, config)
    try:
        listener = listen_fd(manager, sock, handler, http=True, tls=tls is not None,
                             **config.limits())
    except (ValueError, TypeError, RuntimeError, OSError) as exc:
        manager.close()
        raise ConfigError(f"cannot serve on {listener_url(config, sock)}: {exc}") from None
    share_with_supervisor(manager, config.worker_metrics)
    log.info("proxying %s on %s", ", ".join(config.proxy), listener_url(config, sock))
    _adopted(config, sock)
    stopping = threading.Event()
    with StopSignals(stopping.set):
        manager.ready = True
        status.ready("proxy")
        while not stopping.is_set():
            manager.poll(100)
        manager.ready = False
        _exit_after_graceful_timeout(config)
        drain = Drain(manager, [listener], config.graceful_timeout, time.monotonic(),
                      min_steps=2)
        while True:
            manager.poll(20)
            now = time.monotonic()
            if drain.step(now, False) or drain.expired(now):
                break
    manager.close()
    return _stopped(config, sock)


def _serve_asgi(config: Config, app: Any, sock: socket.socket,
                status: StatusPipe, starting: StartingResponder | None) -> int:
    try:
        # Imported by name: the ASGI server may be missing from a partial install.
        asgi: Any = importlib.import_module("cymongoose.asgi")
    except ImportError as exc:
        raise ConfigError(f"the ASGI server is not available ({exc})") from None
    try:
        if config.static:
            from ..static_files import ASGIStaticFiles

            app = ASGIStaticFiles(app, config.static_mounts())
        server = asgi.ASGIServer(app, factory=False, config=_this_worker(config))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    url = listener_url(config, sock)

    async def run() -> None:
        stop = asyncio.Event()

        def recycle() -> None:
            status.send("recycle")
            stop.set()

        server.on_max_requests = recycle
        try:
            await server.start_socket(sock, tls=config.ssl_certfile is not None)
        except LifespanFailure as exc:
            # The app's own failure, already logged with its traceback or its message: a
            # summary line, not the listener's "cannot serve" (the bind was fine).
            await server.stop()
            raise StartupFailed(f"the ASGI app's lifespan startup failed ({exc}); not "
                                "serving") from None
        except (ValueError, TypeError, RuntimeError, OSError) as exc:
            await server.stop()
            raise ConfigError(f"cannot serve on {url}: {exc}") from None
        if starting is not None:
            starting.close()  # the lifespan startup is done and the server listens
        share_with_supervisor(server.manager, config.worker_metrics)
        _adopted(config, sock)
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        log.info("serving %s (ASGI) on %s", config.app, url)
        status.ready("asgi")
        try:
            await stop.wait()
            log.info("stopping, finishing the requests in flight")
        finally:
            _exit_after_graceful_timeout(config, phases=2)  # the drain, then lifespan shutdown
            await asyncio.wait_for(server.stop(), timeout=config.graceful_timeout + 5)

    from ..aio import new_event_loop  # uvloop's when installed

    loop = new_event_loop()
    try:
        loop.run_until_complete(run())
    finally:
        loop.close()
    return _stopped(config, sock)
