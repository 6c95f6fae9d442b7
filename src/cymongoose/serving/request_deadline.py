"""What both servers share of the request deadline (`Config.request_timeout`): how often
they look for requests past it, the 504 they answer with, the error-log line, and the
counters a metrics exporter reads."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from .reporting import error_log, request_text

__all__ = ["RESPONSE_504", "DeadlineCounts", "check_interval", "log_timeout"]

# The body of the answer to a request whose app did not start its response in time.
RESPONSE_504 = b"Gateway Timeout: the app did not start its response in time\n"


def check_interval(timeout: float) -> float:
    """Seconds between two looks at the requests in flight: one periodic check per server
    instead of a timer per request, so a 504 leaves at most this much past the deadline."""
    return min(0.1, max(0.01, timeout / 4))


def log_timeout(method: str, target: str, protocol: str, elapsed: float, timeout: float,
                what: str) -> None:
    """The warning on `cymongoose.error` for one request past its deadline; `target` as the
    client sent it (written escaped)."""
    error_log.warning("%s %s: no response after %.3f s (request_timeout %g s): "
                      "answered 504, %s", request_text(method, target), protocol, elapsed,
                      timeout, what)


class DeadlineCounts:
    """The request deadline's counters of one server: `request_timeouts` (504s sent) and
    `threads_abandoned` (WSGI app threads timed out, replaced, and still in their app)."""

    __slots__ = ("_lock", "request_timeouts", "threads_abandoned", "metrics")

    def __init__(self) -> None:
        # The loop counts up, an app thread counts an abandoned thread down when it returns.
        self._lock = threading.Lock()
        self.request_timeouts = 0
        self.threads_abandoned = 0
        # The server's Manager.add_metric once it has a Manager: the core's metrics (and a
        # supervisor's) count these too.
        self.metrics: Callable[[str, int], None] | None = None

    def add(self, name: str, delta: int) -> int:
        """The one place the counters change; the new value."""
        with self._lock:
            value: int = getattr(self, name) + delta
            setattr(self, name, value)
            if self.metrics is not None:
                self.metrics(name, delta)
        return value

    def __repr__(self) -> str:
        fields: dict[str, Any] = {"request_timeouts": self.request_timeouts,
                                  "threads_abandoned": self.threads_abandoned}
        return f"DeadlineCounts({fields})"
