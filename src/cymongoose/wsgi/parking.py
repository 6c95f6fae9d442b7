"""Streamed responses parked while their client is behind, so that slow readers do not hold
the app threads (docs/wsgi.md, "Slow clients").

When more than the high mark (serving/flow_control.py) waits towards a client, the thread
sending an app's iterable does not wait: it posts OUTBOX_PARK with the iterable, its
iterator and the context it runs in (results.py) and goes back to work, its slot free. The
loop keeps the three on the exchange (`parked`) and queues the exchange again, as it queues
a new request (turns.py, resume()), once:

- its client has read below the low mark (a write event: drained()), or had already when
  the park step was written;
- its client left (MG_EV_CLOSE: the exchange's gone()), or its response was ended by the
  server meanwhile: the thread that takes it then only closes the iterable;
- its client read nothing for `stream_timeout` seconds (check(), a timer): logged as a
  write() that timed out is, the connection closed, the access log's line written.

The thread that takes it (resume_app(), results.py) goes on with the next items, on
whichever thread it is: a Python generator may be resumed on another thread, and it runs in
a context of its own (contextvars), so what it set there is still there. Thread-bound state
(threading.local, Django's database connections) is not: the `park_streams` option turns
parking off for apps that keep it across items. Everything here
runs on the loop's owner, the only thread that touches `parked`; `resumed` is handed over
through the queue of pending exchanges. Parked time counts against `stream_timeout` only:
the request deadline ends once a response has started. At close() the server closes what is
still parked or queued (close_all()).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..serving.flow_control import SEND_LOW
from .exchange import _Exchange
from .state import ServerState

# A parked response: the app's iterable, its iterator, the context its items run in.
Parked = tuple[Any, Iterator[Any], contextvars.Context]

# How often check() looks for parked responses whose client reads nothing, at most.
_CHECK_S = 0.25


def check_interval_ms(stream_timeout: float) -> int:
    """The timer's period: a quarter of stream_timeout, at most _CHECK_S."""
    return max(10, int(min(_CHECK_S, stream_timeout / 4) * 1000))


class ParkedResponses:
    """The parked responses of one WSGIServer (loop side); see the module docstring."""

    __slots__ = ("_parked", "_state", "_queue", "_abort")

    def __init__(self, state: ServerState, queue: Callable[[_Exchange], None],
                 abort: Callable[[_Exchange, BaseException], None]) -> None:
        self._state = state
        self._queue = queue  # turns.resume: run it on a thread again
        self._abort = abort  # log, close the connection, end the exchange (responses.py)
        # Each parked exchange -> [the least backlog seen, when it was first seen].
        self._parked: dict[_Exchange, list[float]] = {}

    def __len__(self) -> int:
        return len(self._parked)

    def park(self, ex: _Exchange, pair: Parked) -> None:
        """The park step, written after the response's queued pieces."""
        ex.parked = pair
        if ex.closed or ex.finished or ex.flow_ahead() <= SEND_LOW:
            self.unpark(ex)
        else:
            self._parked[ex] = [ex.backlog, time.monotonic()]

    def drained(self, ex: _Exchange) -> None:
        """A write event of a parked exchange (ex.backlog just updated)."""
        if ex.backlog <= SEND_LOW:
            self.unpark(ex)

    def unpark(self, ex: _Exchange) -> None:
        """Queue a parked exchange again (once: a second call finds nothing parked)."""
        pair = ex.parked
        if pair is None:
            return
        ex.parked = None
        self._parked.pop(ex, None)
        ex.resumed = pair
        self._queue(ex)

    def check(self) -> None:
        """Timer: end the parked responses whose client read nothing for stream_timeout."""
        if not self._parked:
            return
        now = time.monotonic()
        timeout = self._state.stream_timeout
        for ex, seen in list(self._parked.items()):
            if ex.closed or ex.finished:  # ended without a close event (413, a 504)
                self.unpark(ex)
            elif ex.backlog < seen[0]:
                seen[0], seen[1] = ex.backlog, now
            elif now - seen[1] >= timeout:
                self._abort(ex, TimeoutError(
                    f"the client read nothing for {timeout} s (stream_timeout)"))
                self.unpark(ex)

    def close_all(self, queued: Iterable[_Exchange],
                  close: Callable[[_Exchange, Parked], None]) -> None:
        """The server closes, its threads are gone: close() every iterable still parked,
        or queued (`queued`) to be resumed."""
        for ex in [*self._parked, *queued]:
            pair = ex.parked or ex.resumed
            ex.parked = ex.resumed = None
            if pair is not None:
                close(ex, pair)
        self._parked.clear()
