"""The WSGI server's request deadline (`request_timeout`): a request whose app has queued
none of its response `timeout` seconds after its head arrived is answered 504 by the loop.

- One repeating Manager timer looks at the requests in flight. It runs on the loop's owner,
  the only thread that writes responses, so a 504 never follows bytes of the app's own
  response, and a response the app queued before the check is never cut.
- A request still waiting for a free slot is answered and its app never runs.
- A running app cannot be stopped: its thread is abandoned. What the app does next is
  dropped quietly: start_response() changes nothing, write() and wsgi.input raise
  ClientDisconnected (as for a client gone), what it returns is closed unread, what it
  raises is not logged. A new thread and slot replace it, so `threads` apps can still run;
  when the app returns, its thread takes turns again and a follower thread ends.
- At most `bound` threads are abandoned at once. Past it a timed-out app keeps its slot
  (fewer apps run at once until one returns), which the error log says once.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Protocol

from ..errors import ClientDisconnected
from ..serving.reporting import error_log, wsgi_target
from ..serving.request_deadline import DeadlineCounts, log_timeout
from .exchange import _Exchange
from .turns import _LoopTurns

_QUEUED, _RUNNING, _RETURNED = 0, 1, 2  # WSGIExchange.time_out()'s answers


class TimeoutWriter(Protocol):
    """What answers a timed-out exchange (responses.py's ResponseWriter)."""

    def answer_timeout(self, ex: _Exchange) -> None: ...


class WSGIDeadline:
    """The deadline of one WSGIServer: `check()` is its timer's callback (loop side),
    `returned()` is called by an abandoned app's thread when the app finally returns."""

    def __init__(self, timeout: float, turns: _LoopTurns, live: set[_Exchange],
                 writer: TimeoutWriter, counts: DeadlineCounts, bound: int) -> None:
        self.timeout = timeout
        self._turns = turns
        self._live = live
        self._writer = writer
        self.counts = counts
        self._bound = bound
        # Guards _replaced against the two threads: the loop replacing a thread, the
        # abandoned thread returning.
        self._lock = threading.Lock()
        self._replaced: set[_Exchange] = set()
        self._bound_logged = False

    def check(self) -> None:
        now = time.perf_counter()
        oldest = now - self.timeout
        for ex in list(self._live):
            if ex.started > oldest or ex.head_queued or ex.finished or ex.closed:
                continue
            phase = ex.time_out()
            if phase == _RETURNED:
                continue  # its response is in the outbox: never cut
            self._stop_app(ex)
            self._writer.answer_timeout(ex)
            self.counts.add("request_timeouts", 1)
            what = ("its app never ran" if phase == _QUEUED else self._abandon(ex))
            env = ex.environ
            log_timeout(env.get("REQUEST_METHOD", "-"), wsgi_target(env),
                        env.get("SERVER_PROTOCOL", "-"), now - ex.started, self.timeout, what)

    def _stop_app(self, ex: _Exchange) -> None:
        """The app's next write or read raises ClientDisconnected, a waiting one now."""
        waiting = ex.flow_closed()
        if ex.input is not None:
            ex.input.fail(ClientDisconnected("the request timed out (request_timeout)"))
        if waiting:
            ex.notify_writer()

    def _abandon(self, ex: _Exchange) -> str:
        with self._lock:
            if ex.app_phase == _RETURNED:
                return "its app returned meanwhile"  # and gave its slot back
            if self.counts.threads_abandoned >= self._bound:
                if not self._bound_logged:
                    self._bound_logged = True
                    error_log.error(
                        "request_timeout: %d app threads are abandoned, the most allowed; "
                        "timed-out apps now keep their slot, so fewer requests run at once "
                        "until they return", self._bound)
                return "its thread keeps its slot (too many threads abandoned)"
            self._replaced.add(ex)
            self.counts.add("threads_abandoned", 1)
        self._turns.add_thread()
        return "its thread is abandoned and replaced"

    def returned(self, ex: _Exchange, slots: deque[None]) -> None:
        """App side: the app of timed-out `ex` returned; a replaced thread's slot stays
        with its replacement, any other is given back."""
        with self._lock:
            replaced = ex in self._replaced
            if replaced:
                self._replaced.discard(ex)
                if self.counts.add("threads_abandoned", -1) == 0:
                    self._bound_logged = False
        if replaced:
            self._turns.retire_thread()
        else:
            slots.append(None)
