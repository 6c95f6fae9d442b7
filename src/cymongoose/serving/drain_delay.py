"""--drain-delay: the first stop signal fails the health checks at once, the server serves on
normally for the delay, and only then does it drain (serving/drain.py).

Why: a load balancer (an ingress, a mesh, Kubernetes' endpoints) learns that a server is going
only from its health checks, or from an endpoint update that races with the stop signal.
A server that stops accepting at the signal refuses the requests the balancer still sends
it; one that says "draining" on its health path and goes on serving lets the balancer take
it out of rotation first. Every answer during the delay carries `Connection: close` (the
core does that once Manager.ready is False), so clients with keep-alive connections move to
new ones while this server still answers them.

A second stop signal skips the rest of the delay, unless it comes within a second of the
first: a signal sent to a whole process group (a terminal's Ctrl-C, systemd stopping a
unit's cgroup) reaches a worker both directly and through its supervisor, and that is one
stop request, not two.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["DelayedStop", "thread_timer"]

log = logging.getLogger("cymongoose.error")

# Signals this close to the first one are the same stop request (see the top).
SAME_STOP_S = 1.0


class Cancellable(Protocol):
    def cancel(self) -> object: ...


#: `call_later(seconds, fn)`: run fn once after `seconds`, from whatever runs timers (a
#: thread, an event loop); returns what cancels it.
CallLater = Callable[[float, Callable[[], object]], Cancellable]


def thread_timer(seconds: float, fn: Callable[[], object]) -> Cancellable:
    """CallLater on a daemon thread of its own, for servers whose loop polls."""
    timer = threading.Timer(seconds, fn)
    timer.daemon = True
    timer.name = "cymongoose-drain-delay"
    timer.start()
    return timer


class DelayedStop:
    """Turns stop signals into one `stop()`: with `delay` > 0 the first signal calls
    `unready()` (the health path answers 503) and `stop()` follows after `delay` seconds, or
    at the next signal if that comes first. Without a delay the first signal stops at
    once. Each method may be called from any thread; `stop()` runs once."""

    def __init__(self, stop: Callable[[], object], *, delay: float,
                 unready: Callable[[], object], call_later: CallLater = thread_timer) -> None:
        self._stop = stop
        self._delay = delay
        self._unready = unready
        self._call_later = call_later
        self._lock = threading.Lock()
        self._signals = 0
        self._first_at = 0.0
        self._stopped = False
        self._timer: Cancellable | None = None

    def signal(self, name: str) -> None:
        """A stop signal called `name` arrived."""
        now = time.monotonic()
        with self._lock:
            self._signals += 1
            first = self._signals == 1
            if first:
                self._first_at = now
            elif now - self._first_at < SAME_STOP_S:
                return
            waiting = not self._stopped  # a later signal during the delay
        if first and self._delay > 0:
            self._unready()  # before the line: a reader of the log may count on it
            log.info("%s: failing health checks, serving on for --drain-delay %g s, then "
                     "stopping (a second signal stops now)", name, self._delay)
            timer = self._call_later(self._delay, self._end_of_delay)
            with self._lock:
                self._timer = timer
        elif first:
            log.info("%s: stopping, finishing the requests in flight", name)
            self._fire()
        elif waiting:
            log.info("%s again: skipping the rest of --drain-delay, stopping now", name)
            self._fire()
        else:
            log.info("%s: already stopping", name)

    def _end_of_delay(self) -> None:
        log.info("--drain-delay over: stopping, finishing the requests in flight")
        self._fire()

    def _fire(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        try:
            self._stop()
        except Exception:
            log.exception("stopping failed")

    def cancel(self) -> None:
        """The server stopped some other way: no stop() after the delay."""
        with self._lock:
            self._stopped = True
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
