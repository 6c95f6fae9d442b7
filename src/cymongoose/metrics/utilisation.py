"""Utilisation, the signal an autoscaler acts on: the share of the server's capacity that
requests occupied over the last WINDOW_S seconds, 0 (idle) to 1 (every slot busy all the
time). Capacity is the number of requests it can work on at once: a WSGI process's app
threads, or --limit-concurrency where one is set.

Why requests in flight over capacity, and not how busy the loop is: a WSGI app that waits on
a database fills its threads while the CPU idles, so CPU (which Kubernetes scales on
without any of this) says "plenty of room" to a server that queues every new request. The
occupied share sees that wait. An ASGI app without --limit-concurrency has no fixed
capacity: its limit is the loop's CPU, which CPU-based scaling already measures, so it gets
no utilisation gauge.

How: the mean number of requests in flight over a window is the time they spent in flight
divided by the window (Little's law), and the core already adds up each request's time in
`duration_sum`, across every worker and those gone. A sample a second, no work on the
request path. A request counts when it ends, so one that runs longer than the window counts
late, all at once: the gauge suits apps whose requests are short against WINDOW_S.
"""

from __future__ import annotations

from collections import deque

__all__ = ["WINDOW_S", "Utilisation"]

WINDOW_S = 10.0
SAMPLE_S = 1.0


class Utilisation:
    """Samples of the total request seconds, `sample()`d about once a second; `value()` is
    the share of `capacity` they occupied over the last `window` seconds (or since the
    first sample, while there is less)."""

    def __init__(self, window: float = WINDOW_S) -> None:
        self._window = window
        self._samples: deque[tuple[float, float]] = deque()

    def due(self, now: float) -> bool:
        """Whether a sample is due at `now` (one a second)."""
        return not self._samples or now - self._samples[-1][0] >= SAMPLE_S

    def sample(self, now: float, busy_seconds: float) -> None:
        self._samples.append((now, busy_seconds))
        # Keep the newest sample at least `window` old: the window's start.
        while len(self._samples) > 2 and now - self._samples[1][0] >= self._window:
            self._samples.popleft()

    def value(self, capacity: int) -> float:
        """0..1 (a little above 1 only if requests outlast their slots, which none can)."""
        if capacity <= 0 or len(self._samples) < 2:
            return 0.0
        (t0, busy0), (t1, busy1) = self._samples[0], self._samples[-1]
        if t1 <= t0:
            return 0.0
        return max(0.0, (busy1 - busy0) / (t1 - t0) / capacity)
