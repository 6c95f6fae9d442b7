"""What both bare servers share: a Manager of their own with one handler for every
connection, the config's TLS and HTTP limits, and listening on a socket opened elsewhere."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._mongoose import Connection, Manager, TlsOpts, listen_fd
from ..config import Config
from ..serving.guard_options import set_guard_options

__all__ = ["BareServer"]


class BareServer:
    """A Manager running `handler` on every connection, with `config`'s --limit-concurrency,
    --health-path and --proxy routes set; `prepare(manager)` adds a server's own settings
    first. The Manager is closed again when either fails."""

    def __init__(self, config: Config, tls: TlsOpts | None, handler: Any,
                 prepare: Callable[[Manager], object] | None = None) -> None:
        self.config = config
        self._tls = tls
        self._handler = handler
        #: Called by run() once the server serves (the health path says 200 from here).
        self.on_ready: Callable[[], object] | None = None
        self._manager = Manager(handler)
        try:
            if prepare is not None:
                prepare(self._manager)
            set_guard_options(self._manager, config)
        except BaseException:
            self._manager.close()
            raise

    @property
    def manager(self) -> Manager:
        return self._manager

    def _unready(self) -> None:
        """--drain-delay: health probes fail while the server serves on (thread-safe: the
        guard reads a plain int)."""
        self._manager.ready = False

    def listen_socket(self, sock: Any, *, tls: bool = False) -> Connection:
        """Serve on a listening TCP or Unix socket opened elsewhere; the caller keeps and
        closes `sock`. `tls=True` serves HTTPS with the config's certificate."""
        if tls and self._tls is None:
            raise ValueError("tls=True needs a config with ssl_certfile")
        return listen_fd(self._manager, sock, self._handler, http=True, tls=tls,
                         **self.config.limits())

    def close(self) -> None:
        self._manager.close()
