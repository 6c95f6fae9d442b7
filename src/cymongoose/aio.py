"""asyncio integration: a Manager polled on its own thread, driven from async code.

Handlers run on the poll thread, not on the event loop; `schedule()` hands work back to the
loop. A Manager is not thread-safe, so every call into it from the loop side takes a lock
that the poll thread holds while it polls; the caller wakes the poll first so it waits at
most one iteration, not a whole `poll_interval`.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import warnings
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ._mongoose import Connection, Manager, Timer

__all__ = ["AsyncManager"]

_T = TypeVar("_T")
_JOIN_SLICE = 5.0  # seconds between "still stopping" warnings


class AsyncManager:
    """Run a `Manager(enable_wakeup=True)` on a daemon thread inside `async with`."""

    def __init__(
        self,
        handler: Callable[[Connection, int, Any], None] | None = None,
        poll_interval: int = 100,
        error_handler: Callable[[BaseException], object] | None = None,
        shutdown_timeout: float = 30,
    ) -> None:
        if poll_interval < 0:
            raise ValueError("poll_interval must be >= 0 milliseconds")
        if shutdown_timeout < 0:
            raise ValueError("shutdown_timeout must be >= 0 seconds")
        self._handler = handler
        self._poll_interval = poll_interval
        self._error_handler = error_handler
        self._shutdown_timeout = shutdown_timeout
        self._manager: Manager | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._waiters = 0
        self._waiters_lock = threading.Lock()

    async def __aenter__(self) -> AsyncManager:
        if self._thread is not None:
            raise RuntimeError("AsyncManager is already started")
        self._loop = asyncio.get_running_loop()
        self._manager = Manager(self._handler, enable_wakeup=True,
                                error_handler=self._error_handler)
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="cymongoose-aio", daemon=True)
        self._thread.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        thread, manager = self._thread, self._manager
        if thread is None or manager is None:
            return
        self._stopping.set()
        manager.wakeup(manager.wakeup_id, b"")
        waited = 0.0
        while thread.is_alive() and waited < self._shutdown_timeout:
            step = min(_JOIN_SLICE, self._shutdown_timeout - waited)
            await asyncio.to_thread(thread.join, step)
            waited += step
            if thread.is_alive() and waited < self._shutdown_timeout:
                warnings.warn(f"cymongoose poll thread still running after {waited:.0f} s",
                              RuntimeWarning, stacklevel=2)
        if thread.is_alive():
            warnings.warn("cymongoose poll thread did not stop in time; abandoning it "
                          "(its Manager is left open)", RuntimeWarning, stacklevel=2)
        else:
            manager.close()
        self._thread = None
        self._manager = None

    def _run(self) -> None:
        manager = self._manager
        assert manager is not None
        while not self._stopping.is_set():
            with self._lock:
                manager.poll(self._poll_interval)
            if self._waiters:
                # Let a caller that woke us take the lock before the next poll.
                threading.Event().wait(0.0005)

    def _started(self) -> Manager:
        if self._manager is None or self._thread is None:
            raise RuntimeError("AsyncManager is not started")
        return self._manager

    def _locked(self, call: Callable[[Manager], _T]) -> _T:
        manager = self._started()
        if threading.current_thread() is self._thread:
            return call(manager)  # from a handler: the poll thread already holds the lock
        with self._waiters_lock:
            self._waiters += 1
        try:
            manager.wakeup(manager.wakeup_id, b"")  # cut the current wait short
            with self._lock:
                return call(manager)
        finally:
            with self._waiters_lock:
                self._waiters -= 1

    @property
    def manager(self) -> Manager:
        return self._started()

    @property
    def running(self) -> bool:
        return (self._thread is not None and self._thread.is_alive()
                and not self._stopping.is_set())

    def listen(self, url: str, handler: Any = None, *, http: bool | None = None) -> Connection:
        return self._locked(lambda m: m.listen(url, handler, http=http))

    def connect(self, url: str, handler: Any = None, *, http: bool | None = None) -> Connection:
        return self._locked(lambda m: m.connect(url, handler, http=http))

    def mqtt_connect(self, url: str, **kwargs: Any) -> Connection:
        return self._locked(lambda m: m.mqtt_connect(url, **kwargs))

    def mqtt_listen(self, url: str, handler: Any = None) -> Connection:
        return self._locked(lambda m: m.mqtt_listen(url, handler))

    def sntp_connect(self, url: str, handler: Any = None) -> Connection:
        return self._locked(lambda m: m.sntp_connect(url, handler))

    def wakeup(self, connection_id: int, data: bytes = b"") -> bool:
        return self._started().wakeup(connection_id, data)

    def timer_add(self, ms: int, callback: Callable[[], object], *, repeat: bool = False,
                  run_now: bool = False) -> Timer:
        return self._locked(lambda m: m.timer_add(ms, callback, repeat=repeat, run_now=run_now))

    def schedule(self, coro_or_callback: Awaitable[Any] | Callable[[], object]) -> None:
        """From the poll thread (a handler), run a coroutine or a callable on the loop."""
        loop = self._loop
        if loop is None or self._thread is None:
            raise RuntimeError("AsyncManager is not started")
        if inspect.isawaitable(coro_or_callback):
            awaitable = coro_or_callback

            async def _await() -> Any:
                return await awaitable

            asyncio.run_coroutine_threadsafe(_await(), loop)
        elif callable(coro_or_callback):
            loop.call_soon_threadsafe(coro_or_callback)
        else:
            raise TypeError("schedule() takes a coroutine or a callable, not "
                            f"{type(coro_or_callback).__name__}")
