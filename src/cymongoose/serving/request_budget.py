"""The --max-requests count of one serving process: how many requests it still admits before
it is recycled. A server counts into one of its own; the loop threads of one process
(process/loop_threads.py) share one, so the process is recycled after N requests in all,
whichever loop admitted them."""

from __future__ import annotations

import threading

__all__ = ["RequestBudget"]


class RequestBudget:
    """`limit` admissions; `take()` is True for the one that uses the last of them.
    Thread-safe: with free threading the loops admit requests at the same time, and a
    count they share without a lock would lose decrements (and the recycle with them)."""

    __slots__ = ("_left", "_lock")

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, not {limit!r}")
        self._left = limit
        self._lock = threading.Lock()

    @property
    def left(self) -> int:
        return self._left

    def take(self) -> bool:
        """Count one admitted request; True exactly once, for the last one. Requests past
        the limit (admitted while the server drains) are not counted."""
        with self._lock:
            if self._left <= 0:
                return False
            self._left -= 1
            return self._left == 0
