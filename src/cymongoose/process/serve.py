"""One serving process of the command line: open (or inherit) the listening socket, load
the app, tell which interface it speaks, and serve it until SIGTERM/SIGINT. With
--health-path the socket is opened first and answers 503 while the app loads (starting.py).
The interface picks the server from SERVERS (WSGIServer, the ASGI server through
asgi_run.py, bare/'s RawServer and ProxyServer); every one then goes through the same steps
(_serve): listen, close the start-up responder, share its counts, report ready, run.

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

import dataclasses
import importlib
import logging
import os
import random
import signal
import socket
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..config import Config
from ..errors import AppLoadError, ConfigError, StartupFailed
from ..log_config import configure_logging, keep_server_loggers
from ..serving.app_loading import load_app
from .env_file import load_env_file
from .interface import detect_interface
from .listening_socket import close_listener, listener_url, open_listener
from .starting import StartingResponder, starting_responder
from .status_pipe import StatusPipe
from .worker_metrics import share_with_supervisor

if TYPE_CHECKING:
    from .._mongoose import Manager

__all__ = ["SERVERS", "serve_process"]

log = logging.getLogger("cymongoose.error")


def serve_process(config: Config) -> int:
    status = StatusPipe(config.worker_status)
    if config.worker_socket is not None or config.worker_status is not None:
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
            return _serve(config, "proxy", None, proxy_sock, status, None)
        # With --health-path the port listens (and answers 503) while the app loads; a
        # worker's supervisor does that for it (starting.py). A worker with a socket of its
        # own (--reuse-port) opens it once the app is loaded: until then the kernel sends
        # new connections to the workers that can serve them.
        sock: socket.socket | None = None
        starting: StartingResponder | None = None
        if config.health_path and config.worker_socket is None and not status.connected:
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
            return _serve(config, interface, app, sock, status, starting)
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


def _serve(config: Config, interface: str, app: Any, sock: socket.socket,
           status: StatusPipe, starting: StartingResponder | None) -> int:
    """Build the server `interface` names (SERVERS), serve `sock` with it until it stops,
    with the start-up responder closed once it listens and the supervisor told."""
    kind = SERVERS[interface]
    if config.loop_threads > 1:
        return _serve_loops(config, interface, app, sock, status, starting)
    server = kind.build(config, app, status)
    url = listener_url(config, sock)
    try:
        server.listen_socket(sock, tls=config.ssl_certfile is not None)
    except StartupFailed:  # the app's own start-up failed (the ASGI lifespan), not the bind
        server.close()
        raise
    except (ValueError, TypeError, RuntimeError, OSError) as exc:
        server.close()
        raise ConfigError(f"cannot serve on {url}: {exc}") from None
    if starting is not None:
        starting.close()  # the server listens and answers from here
    share_with_supervisor(server.manager, config.worker_metrics)
    _adopted(config, sock)

    def ready() -> None:
        log.info("%s on %s", kind.serving(config), url)
        status.ready(interface)  # returns once the supervisor says this worker may accept

    server.on_ready = ready
    server.run()
    close_listener(config, sock)
    log.info("stopped")
    return 0


def _serve_loops(config: Config, interface: str, app: Any, sock: socket.socket,
                 status: StatusPipe, starting: StartingResponder | None) -> int:
    """_serve() on --loop-threads N loops (loop_threads.py): one --max-requests count for
    the process, its jitter drawn once."""
    from ..serving.request_budget import RequestBudget
    from .loop_threads import LoopThreads

    kind = SERVERS[interface]
    limit = _this_worker(config).max_requests
    budget = RequestBudget(limit) if limit and interface != "raw" else None
    phases = 2 if interface == "asgi" else 1  # ASGI: the drain, then the lifespan shutdown
    loops = LoopThreads(config, interface, app, kind.build, status, budget=budget,
                        on_stop=lambda: _exit_after_graceful_timeout(config, phases))
    status_code = loops.serve(sock, adopted=lambda: _adopted(config, sock), starting=starting,
                              serving=kind.serving(config), url=listener_url(config, sock))
    close_listener(config, sock)
    log.info("stopped")
    return status_code


class _Server(Protocol):
    """What _serve() asks of a server: WSGIServer, ASGIRun, RawServer, ProxyServer."""

    on_ready: Callable[[], object] | None

    @property
    def manager(self) -> Manager: ...

    def listen_socket(self, sock: Any, *, tls: bool = False) -> object: ...

    def run(self) -> None: ...

    def close(self) -> None: ...


def _build_wsgi(config: Config, app: Any, status: StatusPipe) -> _Server:
    from ..wsgi import WSGIServer

    try:
        # --static is the core's (serving/guard_options.py): the app is served as it is.
        # The app is loaded already (a --factory called): the server takes it as it is.
        server = WSGIServer(app, factory=False, config=_this_worker(config))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    server.on_max_requests = lambda: status.send("recycle")
    server.on_stop = lambda: _exit_after_graceful_timeout(config)
    return server


def _build_asgi(config: Config, app: Any, status: StatusPipe) -> _Server:
    try:
        # Imported by name: the ASGI server may be missing from a partial install.
        asgi: Any = importlib.import_module("cymongoose.asgi")
    except ImportError as exc:
        raise ConfigError(f"the ASGI server is not available ({exc})") from None
    from .asgi_run import ASGIRun

    try:
        server = ASGIRun(asgi.ASGIServer(app, factory=False, config=_this_worker(config)),
                         config.graceful_timeout, config.drain_delay)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    server.on_max_requests = lambda: status.send("recycle")
    # Two phases: the drain, then the lifespan shutdown.
    server.on_stop = lambda: _exit_after_graceful_timeout(config, phases=2)
    return server


def _build_raw(config: Config, app: Any, status: StatusPipe) -> _Server:
    from ..bare import RawServer

    return RawServer(app, config=config)  # it stops at once on a signal: nothing to time


def _build_proxy(config: Config, app: Any, status: StatusPipe) -> _Server:
    from ..bare import ProxyServer

    server = ProxyServer(config)
    server.on_stop = lambda: _exit_after_graceful_timeout(config)
    return server


@dataclasses.dataclass(frozen=True)
class ServerKind:
    """How the serving process builds the server of one interface, and what its log says
    once it serves."""

    build: Callable[[Config, Any, StatusPipe], _Server]
    serving: Callable[[Config], str]


# The interface a worker reports in its `ready` line (and the supervisor's metrics carry)
# -> its server. "proxy": --proxy without an app.
SERVERS: dict[str, ServerKind] = {
    "wsgi": ServerKind(_build_wsgi, lambda c: f"serving {c.app} (WSGI, {c.threads} app "
                                              "threads)"),
    "asgi": ServerKind(_build_asgi, lambda c: f"serving {c.app} (ASGI)"),
    "raw": ServerKind(_build_raw, lambda c: f"serving {c.app} (raw handler)"),
    "proxy": ServerKind(_build_proxy, lambda c: f"proxying {', '.join(c.proxy)}"),
}
