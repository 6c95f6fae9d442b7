"""One serving process of the command line: open (or inherit) the listening socket, load
the app, tell which interface it speaks, and serve it until SIGTERM/SIGINT.

A worker started by a supervisor (supervisor.py) gets the shared socket and a status pipe as
descriptors, and reports on the pipe, one line each: `ready`, `error <message>` (it could not
start; the supervisor prints the message and stops) or `recycle` (it reached --max-requests
and drains: start its replacement now).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import importlib
import inspect
import logging
import os
import random
import signal
import socket
import stat
import sys
import threading
from typing import Any

from ..config import Config
from ..errors import AppLoadError, ConfigError
from ..log_config import configure_logging, keep_server_loggers
from ..serving import load_app

__all__ = ["close_listener", "detect_interface", "open_listener", "serve_process"]

log = logging.getLogger("cymongoose.error")


class StatusPipe:
    """The worker's line to its supervisor (nothing when this process serves alone)."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd

    def send(self, line: str) -> None:
        if self._fd is None:
            return
        data = (line.replace("\n", " ") + "\n").encode("utf-8", "replace")
        with contextlib.suppress(OSError):  # the supervisor is gone: nothing to tell
            os.write(self._fd, data[:4000])  # < PIPE_BUF: one atomic write


def detect_interface(app: Any) -> str:
    """"asgi" for an async callable, "raw" for a plain callable of three positional
    parameters (conn, ev, data), "wsgi" for two (environ, start_response)."""
    call = getattr(app, "__call__", None)  # noqa: B004 - instances: their __call__
    if inspect.iscoroutinefunction(app) or inspect.iscoroutinefunction(call):
        return "asgi"
    try:
        sig = inspect.signature(app)
    except (TypeError, ValueError):
        return "wsgi"
    kinds = [p.kind for p in sig.parameters.values()]
    positional = sum(k in (inspect.Parameter.POSITIONAL_ONLY,
                           inspect.Parameter.POSITIONAL_OR_KEYWORD) for k in kinds)
    if positional == 3:
        return "raw"
    if positional == 2 or inspect.Parameter.VAR_POSITIONAL in kinds:
        return "wsgi"
    raise ConfigError(f"cannot tell how to call {app!r}: a WSGI app takes (environ, "
                   "start_response), an ASGI app is async (scope, receive, send), a raw "
                   "handler takes (conn, ev, data); pass --interface")


def open_listener(config: Config) -> socket.socket:
    """The listening socket the options name: inherited (--fd), a Unix socket (--uds) or
    TCP (--host/--port), bound here so a port in use is reported before any app loads."""
    if config.fd is not None:
        try:
            sock = socket.socket(fileno=config.fd)
        except OSError as exc:
            raise ConfigError(f"--fd {config.fd}: not a socket ({exc.strerror})") from None
        if not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            sock.detach()
            raise ConfigError(f"--fd {config.fd}: the socket is not listening")
        return sock
    if config.uds:
        return _unix_listener(config.uds)
    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((config.host.strip("[]"), config.port))
        sock.listen(1024)
    except OSError as exc:
        sock.close()
        hint = "; is the port in use?" if exc.errno == errno.EADDRINUSE else ""
        raise ConfigError(f"cannot listen on {config.host}:{config.port} ({exc.strerror})"
                          f"{hint}") from None
    return sock


def close_listener(config: Config, sock: socket.socket) -> None:
    """Close the socket; the process that created a Unix socket file removes it too."""
    unix = sock.family == socket.AF_UNIX
    sock.close()
    if unix and config.uds and config.worker_socket is None:
        with contextlib.suppress(OSError):
            os.unlink(config.uds)


def _unix_listener(path: str) -> socket.socket:
    if os.path.exists(path):
        if not stat.S_ISSOCK(os.stat(path).st_mode):
            raise ConfigError(f"--uds {path}: the path exists and is not a socket")
        probe = socket.socket(socket.AF_UNIX)
        try:
            probe.connect(path)
        except ConnectionRefusedError:
            os.unlink(path)  # a stale socket file from a server that is gone
        except OSError as exc:
            raise ConfigError(f"--uds {path}: {exc.strerror}") from None
        else:
            raise ConfigError(f"--uds {path}: another server is listening there")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        os.chmod(path, 0o666)  # the proxy in front usually runs as another user
        sock.listen(1024)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {path} ({exc.strerror})") from None
    return sock


def _url(config: Config, sock: socket.socket | None) -> str:
    scheme = "https" if config.ssl_certfile else "http"
    if sock is not None and sock.family == socket.AF_UNIX:
        return f"unix:{sock.getsockname()}"
    if sock is not None:
        host, port = sock.getsockname()[:2]
    else:
        host, port = config.host, config.port
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


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
    if "." not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # `cymongoose app:app` finds app.py here, as uvicorn
    try:
        restore_loggers = keep_server_loggers()
        try:
            assert config.app is not None  # cli.parse_args asks for it
            app = load_app(config.app, factory=config.factory)
        except AppLoadError as exc:
            raise ConfigError(str(exc)) from None
        finally:
            restore_loggers()
        interface = config.interface if config.interface != "auto" else detect_interface(app)
        sock = (socket.socket(fileno=config.worker_socket) if config.worker_socket is not None
                else open_listener(config))
        if interface == "asgi":
            return _serve_asgi(config, app, sock, status)
        if interface == "raw":
            return _serve_raw(config, app, sock, status)
        return _serve_wsgi(config, app, sock, status)
    except ConfigError as exc:
        return _fail(status, exc)


def _fail(status: StatusPipe, exc: ConfigError) -> int:
    if status._fd is not None:
        status.send(f"error {exc}")  # the supervisor prints it, once
    else:
        print(f"cymongoose: {exc}", file=sys.stderr, flush=True)
    return 2


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


def _serve_wsgi(config: Config, app: Any, sock: socket.socket,
                status: StatusPipe) -> int:
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
        raise ConfigError(f"cannot serve on {_url(config, sock)}: {exc}") from None

    def ready() -> None:
        log.info("serving %s (WSGI, %d app threads) on %s", config.app, config.threads,
                 _url(config, sock))
        status.send("ready")

    server.on_max_requests = lambda: status.send("recycle")
    server.on_stop = lambda: _exit_after_graceful_timeout(config)
    server.on_ready = ready
    server.run()
    close_listener(config, sock)
    log.info("stopped")
    return 0


def _serve_raw(config: Config, app: Any, sock: socket.socket,
               status: StatusPipe) -> int:
    from .._mongoose import MG_EV_ACCEPT, Manager, listen_fd

    if config.static or config.access_log or config.proxy_headers:
        raise ConfigError("--static, --access-log and --proxy-headers need a WSGI or ASGI app; "
                       "a raw handler answers requests itself")
    tls = config.new_tls()
    handler = app
    if tls is not None:
        def handler(conn: Any, ev: int, data: Any) -> None:
            if ev == MG_EV_ACCEPT:
                conn.tls_init(tls)
            app(conn, ev, data)
    manager = Manager(handler)
    try:
        listen_fd(manager, sock, handler, http=True, tls=tls is not None, **config.limits())
    except (ValueError, TypeError, RuntimeError, OSError) as exc:
        manager.close()
        raise ConfigError(f"cannot serve on {_url(config, sock)}: {exc}") from None
    log.info("serving %s (raw handler) on %s", config.app, _url(config, sock))
    status.send("ready")
    manager.run()
    close_listener(config, sock)
    log.info("stopped")
    return 0


def _serve_asgi(config: Config, app: Any, sock: socket.socket,
                status: StatusPipe) -> int:
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
    url = _url(config, sock)

    async def run() -> None:
        stop = asyncio.Event()

        def recycle() -> None:
            status.send("recycle")
            stop.set()

        server.on_max_requests = recycle
        try:
            await server.start_socket(sock, tls=config.ssl_certfile is not None)
        except (ValueError, TypeError, RuntimeError, OSError) as exc:
            await server.stop()
            raise ConfigError(f"cannot serve on {url}: {exc}") from None
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        log.info("serving %s (ASGI) on %s", config.app, url)
        status.send("ready")
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
    close_listener(config, sock)
    log.info("stopped")
    return 0
