"""The ASGI server's request deadline (`request_timeout`): an HTTP request whose app has
sent no `http.response.start` `timeout` seconds after its head arrived is answered 504 and
its app's task cancelled (`_HTTPCycle.time_out()`). One repeating loop timer looks at the
connections' exchanges, instead of a timer per request. A response that started is never
cut, however long it streams; WebSockets have no deadline."""

from __future__ import annotations

import asyncio
import time

from .._mongoose import Manager
from ..serving.reporting import asgi_protocol, asgi_target
from ..serving.request_deadline import DeadlineCounts, check_interval, log_timeout
from .http import _HTTPCycle


class ASGIDeadline:
    """The deadline of one ASGIServer, checked every `check_interval()` on its loop."""

    def __init__(self, timeout: float, counts: DeadlineCounts) -> None:
        self.timeout = timeout
        self.counts = counts
        self._interval = check_interval(timeout)
        self._manager: Manager | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None

    def start(self, loop: asyncio.AbstractEventLoop, manager: Manager) -> None:
        self._loop, self._manager = loop, manager
        self._timer = loop.call_later(self._interval, self._check)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._manager = None

    def _check(self) -> None:
        manager = self._manager
        if manager is None or self._loop is None:
            return
        now = time.perf_counter()
        oldest = now - self.timeout
        for conn in manager.connections:
            cycle = conn.userdata
            if (not isinstance(cycle, _HTTPCycle) or cycle.status or cycle.complete
                    or cycle.closed or cycle.started > oldest):
                continue
            cycle.time_out()
            self.counts.add("request_timeouts", 1)
            scope = cycle.scope
            log_timeout(scope.get("method", "GET"), asgi_target(scope),
                        asgi_protocol(scope), now - cycle.started, self.timeout,
                        "its app's task is cancelled")
        self._timer = self._loop.call_later(self._interval, self._check)
