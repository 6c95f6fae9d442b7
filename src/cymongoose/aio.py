"""asyncio integration: a Manager polled by the asyncio loop itself, on the loop's thread.

`LoopDriver` runs a non-blocking `poll(0)` when the loop reports a socket of the Manager
ready, after code on the loop wrote to a connection (`kick()`), and when Mongoose's next timer
or timeout is due: handlers run on the loop's thread, so an event never crosses a thread and
handlers may touch asyncio objects directly. `AsyncManager` (the 0.2.x API) and
`cymongoose.asgi` both drive their Manager this way.

What the loop watches depends on how Mongoose waits. With epoll (Linux) it is one descriptor,
Mongoose's epoll set (`Manager.fileno()`), readable when any socket is. Without (Mongoose's
poll() backend: macOS, the BSDs) `fileno()` is -1 and the loop watches every socket itself
(`socket_watches.SocketWatches`), brought up to date after each poll step. There, sockets
ready together in one loop iteration cost one step: the first one's callback polls, the rest
of that iteration's see it was done (Mongoose's poll() saw them all ready already).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ._mongoose import Connection, Manager, Timer
from .socket_watches import SocketWatches

__all__ = ["AsyncManager", "LoopDriver", "new_event_loop"]

_T = TypeVar("_T")


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop when uvloop is installed, else asyncio's default."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


class LoopDriver:
    """Poll `manager` from `loop` (see the module docstring). Not thread-safe: every method
    runs on the loop's thread, except that other threads may wake it through
    `Manager.wakeup()`/`call_soon_threadsafe()` (the wakeup pipe is one of the sockets
    watched, or in the epoll set)."""

    def __init__(self, manager: Manager, loop: asyncio.AbstractEventLoop,
                 tick_ms: int = 100) -> None:
        if tick_ms <= 0:
            raise ValueError("tick_ms must be a positive number of milliseconds")
        self.manager = manager
        self.loop = loop
        self._tick_ms = tick_ms
        self._attached = False
        self._fd = -1  # Mongoose's epoll descriptor, when it has one
        self._watches: SocketWatches | None = None  # else: each socket watched
        self._stepped = False  # this loop iteration's ready sockets were polled
        self._kicked = False
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = 0.0
        self._polling = False

    @property
    def attached(self) -> bool:
        return self._attached

    def attach(self) -> None:
        if self._attached:
            return
        fd = self.manager.fileno()
        if fd >= 0:
            self.loop.add_reader(fd, self.poll)
            self._fd = fd
        else:
            try:
                changes = self.manager.watch_changes()  # the sockets already open
            except RuntimeError:
                raise RuntimeError("the Manager is closed") from None
            self._watches = SocketWatches(self.loop, self._on_socket_ready)
            self._watches.apply(changes)
        self._attached = True
        self._schedule(self._tick_ms)

    def detach(self) -> None:
        if self._fd >= 0:
            self.loop.remove_reader(self._fd)
            self._fd = -1
        if self._watches is not None:
            # Before the Manager closes its sockets (the servers detach, then close), so the
            # loop never keeps a watch on a number a new socket may take.
            self._watches.apply(self.manager.unwatch_all())
            self._watches = None
        self._attached = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def kick(self) -> None:
        """Poll soon (this loop iteration's end): data written to a connection outside a poll
        reaches the socket, and interest in writability is registered, only in a poll; a
        socket opened outside a poll is watched, without epoll, only after one."""
        if not self._kicked and self._attached:
            self._kicked = True
            self.loop.call_soon(self._on_kick)

    def _on_kick(self) -> None:
        self._kicked = False
        self.poll()

    def _on_socket_ready(self) -> None:
        if self._stepped:
            return
        self._stepped = True
        self.loop.call_soon(self._end_of_iteration)
        self.poll()

    def _end_of_iteration(self) -> None:
        self._stepped = False

    def poll(self) -> None:
        """One non-blocking iteration of the Manager, then the next wake-up set."""
        if not self._attached or self._polling:
            return
        self._polling = True
        try:
            self.manager.poll(0)
        finally:
            self._polling = False
            if self._watches is not None:  # even after a handler's exception
                self._sync_watches()
        if not self._attached:
            return
        due = self.manager.next_poll_ms(self._tick_ms)
        if due == 0:
            self.kick()
        elif self._timer is None or self.loop.time() + due / 1000 < self._timer_due - 0.001:
            self._schedule(due)

    def _sync_watches(self) -> None:
        assert self._watches is not None
        try:
            changes = self.manager.watch_changes()
        except RuntimeError:  # closed under the driver: its sockets are gone, forget them
            changes = self.manager.unwatch_all()
        self._watches.apply(changes)

    def reschedule(self) -> None:
        """A timer was added: make sure the loop wakes for it."""
        if self._attached:
            due = self.manager.next_poll_ms(self._tick_ms)
            if due == 0:
                self.kick()
            else:
                self._schedule(due)

    def _schedule(self, ms: int) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_due = self.loop.time() + ms / 1000
        self._timer = self.loop.call_at(self._timer_due, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.poll()
        if self._timer is None and self._attached:
            self._schedule(self.manager.next_poll_ms(self._tick_ms) or 1)


class AsyncManager:
    """A `Manager(enable_wakeup=True)` polled by the running asyncio loop inside
    `async with`; handlers run on the loop's thread."""

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
        self._driver: LoopDriver | None = None
        self._thread: threading.Thread | None = None  # the loop's thread
        self._tasks: set[asyncio.Task[Any]] = set()  # scheduled coroutines, kept alive

    async def __aenter__(self) -> AsyncManager:
        if self._driver is not None:
            raise RuntimeError("AsyncManager is already started")
        self._loop = asyncio.get_running_loop()
        self._thread = threading.current_thread()
        self._manager = Manager(self._handler, enable_wakeup=True,
                                error_handler=self._error_handler)
        # The poll interval bounds how late timeouts are noticed; 0 (poll continuously in
        # the thread design) maps to the shortest tick.
        self._driver = LoopDriver(self._manager, self._loop, max(1, self._poll_interval))
        self._driver.attach()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        driver, manager = self._driver, self._manager
        if driver is None or manager is None:
            return
        driver.detach()
        self._driver = None
        self._manager = None
        manager.close()

    def _started(self) -> Manager:
        if self._manager is None or self._driver is None:
            raise RuntimeError("AsyncManager is not started")
        return self._manager

    def _on_loop(self, call: Callable[[Manager], _T]) -> _T:
        manager = self._started()
        loop = self._loop
        assert loop is not None and self._driver is not None
        if threading.current_thread() is self._thread:
            result = call(manager)
            self._driver.kick()  # a connect or a listen shows up in the next poll
            return result
        # From another thread: run it on the loop, which owns the Manager, and wait.
        driver = self._driver

        async def run() -> _T:
            out = call(manager)
            driver.kick()
            return out

        return asyncio.run_coroutine_threadsafe(run(), loop).result(30)

    @property
    def manager(self) -> Manager:
        return self._started()

    @property
    def running(self) -> bool:
        return self._driver is not None and self._driver.attached

    def listen(self, url: str, handler: Any = None, *, http: bool | None = None) -> Connection:
        return self._on_loop(lambda m: m.listen(url, handler, http=http))

    def connect(self, url: str, handler: Any = None, *, http: bool | None = None) -> Connection:
        return self._on_loop(lambda m: m.connect(url, handler, http=http))

    def mqtt_connect(self, url: str, **kwargs: Any) -> Connection:
        return self._on_loop(lambda m: m.mqtt_connect(url, **kwargs))

    def mqtt_listen(self, url: str, handler: Any = None) -> Connection:
        return self._on_loop(lambda m: m.mqtt_listen(url, handler))

    def sntp_connect(self, url: str, handler: Any = None) -> Connection:
        return self._on_loop(lambda m: m.sntp_connect(url, handler))

    def wakeup(self, connection_id: int, data: bytes = b"") -> bool:
        return self._started().wakeup(connection_id, data)

    def timer_add(self, ms: int, callback: Callable[[], object], *, repeat: bool = False,
                  run_now: bool = False) -> Timer:
        def add(m: Manager) -> Timer:
            timer = m.timer_add(ms, callback, repeat=repeat, run_now=run_now)
            assert self._driver is not None
            self._driver.reschedule()
            return timer
        return self._on_loop(add)

    def schedule(self, coro_or_callback: Awaitable[Any] | Callable[[], object]) -> None:
        """From a handler (or any thread), run a coroutine or a callable on the loop."""
        loop = self._loop
        if loop is None or self._driver is None:
            raise RuntimeError("AsyncManager is not started")
        on_loop = threading.current_thread() is self._thread
        if inspect.isawaitable(coro_or_callback):
            awaitable = coro_or_callback

            async def _await() -> Any:
                return await awaitable

            if on_loop:
                task = loop.create_task(_await())
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            else:
                asyncio.run_coroutine_threadsafe(_await(), loop)
        elif callable(coro_or_callback):
            if on_loop:
                loop.call_soon(coro_or_callback)
            else:
                loop.call_soon_threadsafe(coro_or_callback)
        else:
            raise TypeError("schedule() takes a coroutine or a callable, not "
                            f"{type(coro_or_callback).__name__}")
