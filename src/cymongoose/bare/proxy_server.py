"""The pure reverse proxy, the command line's --proxy without an app: the core answers the
routes (--proxy, attached through serving/guard_options.py); any other request gets a 404
from a handler that sees only those. It drains like the app servers: on stop the listener
closes, proxied requests in flight finish (within graceful_timeout), idle connections
close (serving/drain.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from .._mongoose import Connection, Manager
from ..config import Config
from ..errors import ConfigError
from ..serving.drain import Drain
from ..serving.fixed_answer import fixed_answer_handler
from ..serving.stop_signals import StopSignals
from .listening import BareServer

__all__ = ["ProxyServer"]

_NOT_FOUND = "Not Found: no proxy route takes this path\n"
_NOT_FOUND_HEADERS = {"Content-Type": "text/plain; charset=utf-8"}


def _not_found_headers() -> dict[str, str]:
    return _NOT_FOUND_HEADERS


class ProxyServer(BareServer):
    """Proxy `config.proxy`'s routes on a Manager of its own, with the config's TLS, HTTP
    limits, access log, --limit-concurrency and --health-path."""

    def __init__(self, config: Config) -> None:
        if config.static or config.request_timeout is not None:
            raise ConfigError("--static and --request-timeout need an app; a pure proxy "
                              "(--proxy without APP) has none")
        tls = config.new_tls()
        #: Called once by run() when the server starts to drain.
        self.on_stop: Callable[[], object] | None = None
        self.graceful_timeout = config.graceful_timeout
        self._stopping = threading.Event()
        self._listeners: list[Connection] = []
        super().__init__(config, tls, fixed_answer_handler(tls, 404, _NOT_FOUND,
                                                           _not_found_headers),
                         prepare=self._log_access)

    def _log_access(self, manager: Manager) -> None:
        access_log = self.config.new_access_log()
        if access_log is not None:  # proxied requests are logged too
            manager.refusal_handler = access_log.log_refusal
            manager.proxy_log_handler = access_log.log_proxied

    def listen_socket(self, sock: Any, *, tls: bool = False) -> Connection:
        conn = super().listen_socket(sock, tls=tls)
        self._listeners.append(conn)
        return conn

    def run(self, poll_ms: int = 100) -> None:
        """Serve until stop() or SIGINT/SIGTERM, drain, then close."""
        manager = self._manager
        try:
            with StopSignals(self.stop, delay=self.config.drain_delay,
                             unready=self._unready):
                manager.ready = True
                if self.on_ready is not None:
                    self.on_ready()
                while not self._stopping.is_set():
                    manager.poll(poll_ms)
                manager.ready = False
                if self.on_stop is not None:
                    self.on_stop()
                # The listener keeps accepting for a moment (two polls at least): closing
                # it resets what waits in its accept queue.
                drain = Drain(manager, self._listeners, self.graceful_timeout,
                              time.monotonic(), min_steps=2)
                while True:
                    manager.poll(20)
                    now = time.monotonic()
                    if drain.step(now, False) or drain.expired(now):
                        break
        finally:
            self.close()

    def stop(self) -> None:
        """Make run() drain and return (within one poll). Thread-safe."""
        self._stopping.set()

