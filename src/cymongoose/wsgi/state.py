"""What the parts of one WSGI server share (uvicorn's ServerState is the model): the
exchanges, their wsgi.input and the loop's turns get this object, never the server.

It holds the outbox, the queue of response steps app threads hand to the loop, with the
wake-up that makes the loop write them, and the few settings and calls the parts need. The
server and its loop (loop.py) put their calls in as they are built; nothing here holds the
server.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any, Protocol

from .._mongoose import Manager, OutboxOp, RequestBodyTooLarge, WSGIExchange
from ..typedefs import WSGIApp

# The outbox's operations, declared once in the core (wsgi_exchange.pxi, OutboxOp).
_OP_WHOLE = OutboxOp.OUTBOX_WHOLE
_OP_BEGIN = OutboxOp.OUTBOX_BEGIN
_OP_WRITE = OutboxOp.OUTBOX_WRITE
_OP_FILE = OutboxOp.OUTBOX_FILE
_OP_END = OutboxOp.OUTBOX_END
_OP_ABORT = OutboxOp.OUTBOX_ABORT
_OP_PARK = OutboxOp.OUTBOX_PARK


class LoopOwnership(Protocol):
    """What an exchange asks of the loop's turns (turns.py's _LoopTurns, which imports this
    module: naming the protocol here keeps the two modules free of a cycle)."""

    owner: threading.Thread | None

    def owns_loop(self) -> bool: ...

    def hand_off(self) -> None: ...


def _nothing() -> None:
    pass


class _NoTurns:
    """The turns before the server made its own: nobody owns the loop yet."""

    owner: threading.Thread | None = None

    def owns_loop(self) -> bool:
        return False

    def hand_off(self) -> None:
        pass


def _not_built(*args: Any) -> None:
    raise RuntimeError("the WSGI server's loop side is not built yet (server.py, loop.py)")


class ServerState:
    """The state one WSGIServer shares with its exchanges, their wsgi.input and its turns.
    Every field exists from construction; the parts that provide the calls (the turns, the
    loop side, the server) replace the placeholders as they are built, before any request."""

    __slots__ = ("manager", "app", "stream_timeout", "poll_ms", "outbox", "turns", "run_batch",
                 "drain_outbox", "drain_in_flight", "body_too_large", "unpark")

    def __init__(self, manager: Manager, app: WSGIApp, stream_timeout: float) -> None:
        self.manager = manager
        self.app = app
        self.stream_timeout = stream_timeout
        self.poll_ms = 100  # run() sets it before the turns start
        self.outbox: collections.deque[tuple[WSGIExchange, int, Any]] = collections.deque()
        # The threads' turns at the loop (server.py sets its _LoopTurns).
        self.turns: LoopOwnership = _NoTurns()
        # The owner's batch: WSGILoop.run_batch(turns, me, app, slots[, once]) (loop.py).
        self.run_batch: Callable[..., None] = _not_built
        # Owner: write the queued response steps (server.py).
        self.drain_outbox: Callable[[], None] = _not_built
        # Owner, stopping: finish the requests in flight, then return (server.py).
        self.drain_in_flight: Callable[[], None] = _not_built
        # Loop side: an exchange's body went over max_body_size (its first argument is an
        # exchange.py _Exchange, which imports this module; loop.py).
        self.body_too_large: Callable[[Any, RequestBodyTooLarge], None] = _not_built
        # Loop side: queue a parked response again, its client drained or gone (an
        # exchange.py _Exchange; parking.py, set by server.py).
        self.unpark: Callable[[Any], None] = _not_built

    def post(self, ex: WSGIExchange, op: int, arg: Any) -> None:
        """Queue one response step for the loop: its owner writes the outbox after each
        poll and each batch; any other thread wakes it."""
        self.outbox.append((ex, op, arg))
        if self.turns.owner is not threading.current_thread():
            self.wake_loop()

    def wake_loop(self) -> None:
        """End the loop's poll wait so its owner drains the outbox. The Manager sends one
        wake datagram per burst, by a seq_cst exchange on its pending flag that the poll
        clears before the owner drains: a step posted before this call is in that drain,
        with the GIL or without (docs/internals.md, "Wakeup")."""
        try:
            self.manager._wake()
        except RuntimeError:  # closed: nothing left to do
            pass

    def interrupt_poll(self) -> None:
        """End the loop's current poll wait now, whatever is pending."""
        self.call_loop(_nothing)

    def call_loop(self, fn: Callable[[], None]) -> None:
        try:
            self.manager.call_soon_threadsafe(fn)
        except RuntimeError:  # closed: nothing left to do
            pass
