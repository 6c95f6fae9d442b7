"""The supervisor's metrics listener: `GET /metrics` on --metrics-address:--metrics-port,
answered with the document of every worker. It is a Manager of its own that the
supervisor's loop polls (its descriptor is in the loop's select), so no thread is added and
a scrape is answered between two looks at the workers: always a whole document."""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable
from typing import Any

from ..config import Config
from ..errors import ConfigError

__all__ = ["MetricsListener"]

_PATH = "/metrics"


class MetricsListener:
    """Serves `document()` at /metrics until `close()`."""

    def __init__(self, config: Config, document: Callable[[], str]) -> None:
        from .._mongoose import MG_EV_HTTP_MSG, Manager, handles, listen_fd
        from ..metrics import CONTENT_TYPE

        self._sock = _bind(config)
        headers = {"Content-Type": CONTENT_TYPE, "Cache-Control": "no-store"}

        @handles(MG_EV_HTTP_MSG)
        def on_request(conn: Any, ev: int, msg: Any) -> None:
            path = msg.uri.partition("?")[0]
            if path != _PATH:
                conn.reply(404, b"not found: the metrics are at /metrics\n",
                           {"Content-Type": "text/plain; charset=utf-8"})
            elif msg.method not in ("GET", "HEAD"):
                conn.reply(405, b"GET /metrics\n", {"Allow": "GET, HEAD",
                                                    "Content-Type": "text/plain"})
            else:
                conn.reply(200, document().encode("utf-8"), headers)

        self._manager = Manager()
        listen_fd(self._manager, self._sock, on_request, http=True)
        host, port = self._sock.getsockname()[:2]
        self.url = f"http://{f'[{host}]' if ':' in host else host}:{port}{_PATH}"

    def fileno(self) -> int:
        fd = self._manager.fileno()
        # Without epoll (macOS) no one descriptor covers every socket: the listening one wakes
        # the supervisor for a new scrape, and its tick polls the rest anyway.
        return fd if fd >= 0 else self._sock.fileno()

    def poll(self) -> None:
        """Answer what has arrived; never waits."""
        self._manager.poll(0)

    def close(self) -> None:
        self._manager.close()
        self._sock.close()


def _bind(config: Config) -> socket.socket:
    """The listening socket, bound here so a port in use is one line naming the option."""
    host = config.metrics_address.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, config.metrics_port))
        sock.listen(64)
    except OSError as exc:
        sock.close()
        hint = ": the port is in use" if exc.errno == errno.EADDRINUSE else ""
        raise ConfigError(f"--metrics-port {config.metrics_port}: cannot listen on "
                          f"{config.metrics_address}:{config.metrics_port} "
                          f"({exc.strerror}){hint}") from None
    return sock
