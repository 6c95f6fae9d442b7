"""An asyncio loop's watches on each socket of a Manager that has no epoll descriptor.

Mongoose waits with poll() where there is no epoll (macOS, the BSDs), and a kqueue cannot be
watched from inside another kqueue on macOS, so `aio.LoopDriver` then has the outer loop watch
every socket itself. After each poll step, `Manager.watch_changes()` says which watches to
add, change or drop; `SocketWatches.apply()` makes them with `add_reader()`/`add_writer()`
and their removers, which asyncio's loop and uvloop both provide.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from ._mongoose import WATCH_READ, WATCH_WRITE

__all__ = ["SocketWatches"]


class SocketWatches:
    """Applies `Manager.watch_changes()` to `loop`: every watched socket calls `on_ready`."""

    def __init__(self, loop: asyncio.AbstractEventLoop, on_ready: Callable[[], object]) -> None:
        self._loop = loop
        self._on_ready = on_ready

    def apply(self, changes: Iterable[tuple[int, int, int]] | None) -> None:
        if not changes:
            return
        loop = self._loop
        for fd, was, now in changes:
            gone = was & ~now
            if gone:
                # The socket may be closed already: Mongoose closes it in the step, before
                # its drop is listed. asyncio's epoll selector turns a half-dropped watch into
                # EPOLL_CTL_MOD, which fails on a closed descriptor (OSError); the selector
                # has forgotten the descriptor by then, which is all a drop asks.
                try:
                    if gone & WATCH_READ:
                        loop.remove_reader(fd)
                    if gone & WATCH_WRITE:
                        loop.remove_writer(fd)
                except OSError:
                    pass
            added = now & ~was
            if added & WATCH_READ:
                loop.add_reader(fd, self._on_ready)
            if added & WATCH_WRITE:
                loop.add_writer(fd, self._on_ready)
