"""How a server stops: it keeps accepting for a moment, answers the requests in flight, closes
its idle keep-alive connections, and gives up at its graceful timeout. The rules are here
once; each server runs the steps from its own loop (the WSGI server polls between them, the
ASGI server awaits)."""

from __future__ import annotations

from collections.abc import Callable

from .._mongoose import Connection, Manager

__all__ = ["IDLE_GRACE_S", "Drain"]

# A client that connected just before the stop may still wait in the accept queue, and one
# whose request is on its way has a connection that looks idle: the listeners keep accepting
# this long, and an idle connection is closed only once it has been idle this long.
IDLE_GRACE_S = 0.1


def _nothing() -> None:
    pass


class Drain:
    """One stop of one server, started at `now` (a monotonic clock) with `timeout` seconds.
    `step()` after each turn of the loop; `min_steps`: turns the listeners stay open at
    least (a loop that polls between steps lets the accept queue empty first). `on_close` is
    called after the drain closed something (a loop that waits for events wakes up)."""

    __slots__ = ("_manager", "_listeners", "_accept_until", "_idle_since", "_steps",
                 "_min_steps", "_on_close", "deadline")

    def __init__(self, manager: Manager, listeners: list[Connection], timeout: float,
                 now: float, *, min_steps: int = 0,
                 on_close: Callable[[], object] = _nothing) -> None:
        self._manager = manager
        self._listeners = listeners  # the server's own list: emptied once they are closed
        self.deadline = now + timeout
        self._accept_until = now + min(IDLE_GRACE_S, timeout)
        self._idle_since: dict[int, float] = {}
        self._steps = 0
        self._min_steps = min_steps
        self._on_close = on_close

    def expired(self, now: float) -> bool:
        return now >= self.deadline

    def step(self, now: float, apps_busy: bool) -> bool:
        """Close what may be closed now. True once every answer is on its way out and
        every connection is closing: the server may stop."""
        busy = apps_busy
        if self._listeners:
            if now >= self._accept_until and self._steps >= self._min_steps:
                for listener in self._listeners:
                    try:
                        listener.close()
                    except RuntimeError:  # closed already
                        pass
                self._listeners.clear()
                self._on_close()
            else:
                busy = True
        self._steps += 1
        conns = [c for c in self._manager.connections if not c.is_listening]
        idle_since = self._idle_since
        for c in conns:
            if (c.userdata is None and not c.send_len and not c.recv_len
                    and not c.is_proxied):
                if not c.is_closing and now - idle_since.setdefault(c.id, now) >= IDLE_GRACE_S:
                    c.close()
                    self._on_close()
            elif not c.is_closing:
                busy = True
                idle_since.pop(c.id, None)
            elif c.send_len:
                busy = True  # an answer still on its way out
        return not busy and all(c.is_closing for c in conns)
