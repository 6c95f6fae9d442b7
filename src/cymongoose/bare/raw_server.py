"""A raw handler `(conn, ev, data)` served on the core's HTTP, the command line's
`--interface raw`: the handler answers each request itself, so the options that need an
app protocol (the access log, proxy headers, the request deadline) are refused; --static
mounts are answered by the core before the handler sees the request. It stops at once on
SIGINT/SIGTERM: nothing is in flight that the handler did not answer within its own event,
so there is nothing to drain. With --drain-delay it serves on
for the delay first, its health path answering 503 (serving/drain_delay.py)."""

from __future__ import annotations

import threading
from contextlib import nullcontext
from typing import Any

from .._mongoose import MG_EV_ACCEPT
from ..config import Config
from ..errors import ConfigError
from ..serving.stop_signals import StopSignals
from .listening import BareServer

__all__ = ["RawServer"]


class RawServer(BareServer):
    """Serve the raw `handler` on a Manager of its own, with `config`'s TLS, HTTP limits,
    --limit-concurrency, --health-path, --static mounts and --proxy routes."""

    def __init__(self, handler: Any, *, config: Config) -> None:
        if (config.access_log or config.proxy_headers
                or config.request_timeout is not None):
            raise ConfigError("--access-log, --proxy-headers and --request-timeout "
                              "need a WSGI or ASGI app; a raw handler answers requests itself")
        tls = config.new_tls()
        if tls is not None:
            app = handler

            def handler(conn: Any, ev: int, data: Any) -> None:
                if ev == MG_EV_ACCEPT:
                    conn.tls_init(tls)
                app(conn, ev, data)
        super().__init__(config, tls, handler)
        self._stopping = False

    def run(self, poll_ms: int = 100) -> None:
        """Serve until SIGINT/SIGTERM (`Manager.run()`; with --drain-delay, after the
        delay), or on a loop thread of a process with several (process/loop_threads.py,
        where only the main thread takes signals) until stop(); then close."""
        self._manager.ready = True  # without a delay, a signal stops the server at once
        if self.on_ready is not None:
            self.on_ready()
        on_main = threading.current_thread() is threading.main_thread()
        if on_main and not self.config.drain_delay:
            self._manager.run(poll_ms)
            return
        try:
            # The main thread with a delay: signals through StopSignals, which calls
            # stop() once the delay is over.
            with (StopSignals(self.stop, delay=self.config.drain_delay,
                              unready=self._unready) if on_main else nullcontext()):
                while not self._stopping:
                    self._manager.poll(poll_ms)
        finally:
            self._manager.close()

    def stop(self) -> None:
        """From any thread: make a loop thread's run() return within `poll_ms` (the
        Manager has no wakeup to cut the wait short: a raw server needs none)."""
        self._stopping = True
