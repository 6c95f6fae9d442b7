"""SIGINT/SIGTERM as a stop request that does not depend on which thread the kernel picks.

A Python signal handler runs only on the main thread, between two bytecodes. A server whose
main thread is one of several that take turns at the loop can be blocked on a lock when the
signal arrives; if the kernel delivered the signal to another thread, nothing interrupts that
wait and the handler never runs (a SIGTERM was lost that way). And a handler that takes the
server's locks can run while the main thread already holds them.

So the handler does nothing itself: `signal.set_wakeup_fd()` has the C-level handler, on
whatever thread it runs, write the signal number to a socket, and a watcher thread that only
reads that socket makes the stop request. The stop callback runs on the watcher thread, never
inside a signal handler.
"""

from __future__ import annotations

import signal
import socket
import threading
from collections.abc import Callable
from types import TracebackType

from .drain_delay import DelayedStop

__all__ = ["StopSignals"]

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _ignore(signum: int, frame: object) -> None:
    """The Python-level handler: the watcher acts (see the module docstring)."""


class StopSignals:
    """`with StopSignals(stop):` calls `stop()` once, on a thread of its own, at the first
    SIGINT or SIGTERM; further signals are logged. With `delay` (--drain-delay) the first
    signal calls `unready()` and `stop()` follows after `delay` seconds or at the second
    signal (drain_delay.py). Outside the main thread (where Python cannot install
    handlers) it does nothing. The previous handlers and wakeup descriptor are restored on
    exit."""

    def __init__(self, stop: Callable[[], object], *, delay: float = 0.0,
                 unready: Callable[[], object] = lambda: None) -> None:
        self._stops = DelayedStop(stop, delay=delay, unready=unready)
        self._reader: socket.socket | None = None
        self._writer: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._previous: dict[int, object] = {}
        self._previous_fd = -1
        self.received: int | None = None  # the first stop signal, once one came

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is not threading.main_thread():
            return self
        self._reader, self._writer = socket.socketpair()
        self._writer.setblocking(False)  # the C handler must never block on it
        self._previous_fd = signal.set_wakeup_fd(self._writer.fileno(),
                                                 warn_on_full_buffer=False)
        for signum in _STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, _ignore)
        self._thread = threading.Thread(target=self._watch, args=(self._reader,),
                                        name="cymongoose-stop-signals", daemon=True)
        self._thread.start()
        return self

    def _watch(self, reader: socket.socket) -> None:
        while True:
            try:
                data = reader.recv(64)
            except OSError:
                return
            if not data:  # __exit__ closed the writer
                return
            for signum in data:
                if signum not in _STOP_SIGNALS:
                    continue  # another signal with a Python handler: not ours to act on
                if self.received is None:
                    self.received = signum
                self._stops.signal(signal.Signals(signum).name)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stops.cancel()  # the server stopped: a delay still running ends here
        if self._writer is None:
            return
        for signum, old in self._previous.items():
            signal.signal(signum, old)  # type: ignore[arg-type]
        signal.set_wakeup_fd(self._previous_fd)
        self._writer.close()  # the watcher reads end-of-file and returns
        if self._thread is not None:
            self._thread.join(5.0)
        if self._reader is not None:
            self._reader.close()
        self._writer = self._reader = self._thread = None
