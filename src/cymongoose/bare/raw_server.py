"""A raw handler `(conn, ev, data)` served on the core's HTTP, the command line's
`--interface raw`: the handler answers each request itself, so the options that need an
app protocol (static files, the access log, proxy headers, the request deadline) are
refused. It stops at once on SIGINT/SIGTERM: nothing is in flight that the handler did not
answer within its own event, so there is nothing to drain."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._mongoose import MG_EV_ACCEPT, Connection, Manager, listen_fd
from ..config import Config
from ..errors import ConfigError
from ..serving.guard_options import set_guard_options

__all__ = ["RawServer"]


class RawServer:
    """Serve the raw `handler` on a Manager of its own, with `config`'s TLS, HTTP limits,
    --limit-concurrency, --health-path and --proxy routes."""

    def __init__(self, handler: Any, *, config: Config) -> None:
        if (config.static or config.access_log or config.proxy_headers
                or config.request_timeout is not None):
            raise ConfigError("--static, --access-log, --proxy-headers and --request-timeout "
                              "need a WSGI or ASGI app; a raw handler answers requests itself")
        self.config = config
        tls = self._tls = config.new_tls()
        if tls is not None:
            app = handler

            def handler(conn: Any, ev: int, data: Any) -> None:
                if ev == MG_EV_ACCEPT:
                    conn.tls_init(tls)
                app(conn, ev, data)
        self._handler = handler
        #: Called by run() once the server serves (the health path says 200 from here).
        self.on_ready: Callable[[], object] | None = None
        self._manager = Manager(handler)
        try:
            set_guard_options(self._manager, config)
        except BaseException:
            self._manager.close()
            raise

    @property
    def manager(self) -> Manager:
        return self._manager

    def listen_socket(self, sock: Any, *, tls: bool = False) -> Connection:
        """Serve on a listening TCP or Unix socket opened elsewhere; the caller keeps and
        closes `sock`. `tls=True` serves HTTPS with the config's certificate."""
        if tls and self._tls is None:
            raise ValueError("tls=True needs a config with ssl_certfile")
        return listen_fd(self._manager, sock, self._handler, http=True, tls=tls,
                         **self.config.limits())

    def run(self, poll_ms: int = 100) -> None:
        """Serve until SIGINT/SIGTERM (`Manager.run()`), then close."""
        self._manager.ready = True  # no draining state: a signal stops the server at once
        if self.on_ready is not None:
            self.on_ready()
        self._manager.run(poll_ms)

    def close(self) -> None:
        self._manager.close()
