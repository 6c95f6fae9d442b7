"""The condition the WSGI server's threads wait on for a turn (turns.py): threading.Condition's
wait and notify, over the turns' lock, with the app threads asleep on a ThreadWake each.

threading.Condition puts each waiter to sleep on a new threading.Lock. On free-threaded
CPython a blocked acquire() spins through 40 sched_yield() calls before it sleeps. With 32
app threads on one CPU serving an app that waits 2 ms per request (the threads phase of the
benchmarks), most waits spun: the server spent 1.3x the CPU per request of the GIL build,
and with this class about the same as the GIL build. A ThreadWake sleeps at once. It does
not wake for a signal, so the main thread, which must run the stop signals' handlers, still
waits on a lock (it is one thread; its spinning costs little).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any

from .._mongoose import ThreadWake

_own = threading.local()  # the ThreadWake of each app thread, made on its first wait


class TurnCondition:
    """wait(), notify(n) and notify_all() as threading.Condition's over `lock`, which the
    caller holds around each (`with` on this object takes it). A wait may end without a
    notify (a post left from a wait an exception ended): callers wait in a loop on their
    predicate, as Condition's callers must anyway."""

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self._waiters: collections.deque[Callable[[], None]] = collections.deque()

    def __enter__(self) -> bool:
        return self._lock.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._lock.__exit__(*exc)

    def wait(self) -> None:
        if threading.current_thread() is threading.main_thread():
            sleeper = threading.Lock()
            sleeper.acquire()
            post, sleep = sleeper.release, sleeper.acquire
        else:
            wake = getattr(_own, "wake", None)
            if wake is None:
                wake = _own.wake = ThreadWake()
            post, sleep = wake.post, wake.wait
        self._waiters.append(post)
        self._lock.release()
        try:
            sleep()
        finally:
            self._lock.acquire()
            try:
                self._waiters.remove(post)  # still there: not notified (an exception)
            except ValueError:
                pass

    def notify(self, n: int = 1) -> None:
        waiters = self._waiters
        while n > 0 and waiters:
            waiters.popleft()()
            n -= 1

    def notify_all(self) -> None:
        self.notify(len(self._waiters))
