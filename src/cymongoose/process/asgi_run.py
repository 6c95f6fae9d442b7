"""The ASGI server driven the way the serving process drives the others (serve.py's tail):
`listen_socket()` runs the lifespan startup and listens, `run()` serves until SIGINT/SIGTERM
or --max-requests, then stops it (the drain, then the lifespan shutdown), `close()` frees
the event loop. All three run on one event loop of its own (uvloop's when installed)."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Callable
from typing import Any

from .._mongoose import Manager
from ..aio import new_event_loop
from ..errors import LifespanFailure, StartupFailed
from ..serving.drain_delay import DelayedStop

__all__ = ["ASGIRun"]

log = logging.getLogger("cymongoose.error")


class ASGIRun:
    """`server` (an ASGIServer, not started) served on an event loop of its own."""

    def __init__(self, server: Any, graceful_timeout: float, drain_delay: float = 0.0) -> None:
        self._server = server
        self._graceful_timeout = graceful_timeout
        self._drain_delay = drain_delay
        #: Called by run() once a stop signal would be honoured.
        self.on_ready: Callable[[], object] | None = None
        #: Called once when the server starts to stop.
        self.on_stop: Callable[[], object] | None = None
        #: Called once when --max-requests is reached, before the server stops.
        self.on_max_requests: Callable[[], object] | None = None
        self._loop = new_event_loop()
        self._stop: asyncio.Event | None = None
        # stop() from another thread and close() on the loop's own must not overlap: the
        # wake-up stop() sends goes through the loop's self-pipe, which close() closes, and
        # without the GIL a send could reach the descriptor after its close, or whatever
        # socket took its number since (ThreadSanitizer saw the send race the close).
        self._closing = threading.Lock()

    @property
    def manager(self) -> Manager:
        manager: Manager = self._server.manager
        return manager

    def listen_socket(self, sock: Any, *, tls: bool = False) -> None:
        """The lifespan startup, then listen on `sock`. StartupFailed when the app's
        startup fails; the listener's own errors as they are. The server is stopped on
        either. The listener is added outside the loop: a loop turn after it would accept
        before serve.py has closed the start-up responder and the supervisor said `go`."""
        self._loop.run_until_complete(self._start())
        try:
            self._server.listen_socket(sock, tls=tls)
        except BaseException:
            self._loop.run_until_complete(self._server.stop())
            raise

    async def _start(self) -> None:
        stop = self._stop = asyncio.Event()

        def recycle() -> None:
            if self.on_max_requests is not None:
                self.on_max_requests()
            stop.set()

        self._server.on_max_requests = recycle
        try:
            await self._server.startup()
        except LifespanFailure as exc:
            # The app's own failure, already logged with its traceback or its message: a
            # summary line, not the listener's "cannot serve" (the bind was fine).
            await self._server.stop()
            raise StartupFailed(f"the ASGI app's lifespan startup failed ({exc}); not "
                                "serving") from None
        except (ValueError, TypeError, RuntimeError, OSError):
            await self._server.stop()
            raise

    def run(self) -> None:
        try:
            self._loop.run_until_complete(self._serve())
        finally:
            self.close()

    async def _serve(self) -> None:
        stop = self._stop
        assert stop is not None, "listen_socket() first"
        loop = asyncio.get_running_loop()
        # Only the main thread can take signals; a loop thread of a process with several
        # (loop_threads.py) is stopped by stop() from there.
        signals = (signal.SIGINT, signal.SIGTERM) if _on_main_thread() else ()
        stops = DelayedStop(stop.set, delay=self._drain_delay, unready=self._unready,
                            call_later=loop.call_later)
        for signum in signals:
            loop.add_signal_handler(signum, stops.signal, signal.Signals(signum).name)
        if self.on_ready is not None:
            self.on_ready()
        try:
            await stop.wait()
        finally:
            stops.cancel()
            if self.on_stop is not None:
                self.on_stop()
            await asyncio.wait_for(self._server.stop(), timeout=self._graceful_timeout + 5)

    def _unready(self) -> None:
        """--drain-delay: health probes fail while the server serves on."""
        manager = self._server.manager
        manager.ready = False

    def stop(self) -> None:
        """From any thread: make run() stop the server, as a stop signal does."""
        stop = self._stop
        with self._closing:
            if stop is not None and not self._loop.is_closed():
                self._loop.call_soon_threadsafe(stop.set)

    @property
    def request_budget(self) -> Any:
        """The server's --max-requests count (serving/request_budget.py), None without."""
        return self._server.request_budget

    @request_budget.setter
    def request_budget(self, budget: Any) -> None:
        self._server.request_budget = budget

    def close(self) -> None:
        """Free the event loop (the server is stopped by run() or a failed listen)."""
        with self._closing:
            if not self._loop.is_closed():
                self._loop.close()


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()
