"""The two connection handlers of the ASGI server besides the one waiting for a request head
(Admission): a busy connection's, whose exchange waits for more body or for the client to
read (MG_EV_READ/WRITE go to it), and an accepted WebSocket's. Each hands an event to the
object in `conn.userdata` and falls back to the waiting handler for the rest."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._mongoose import (
    MG_EV_CLOSE,
    MG_EV_HTTP_HDRS,
    MG_EV_READ,
    MG_EV_WRITE,
    MG_EV_WS_CTL,
    MG_EV_WS_MSG,
    ASGILoop,
    Connection,
    handles,
)

Handler = Callable[[Connection, int, Any], None]


def busy_handler(on_quiet: ASGILoop) -> Handler:
    """The handler of a connection whose exchange wants MG_EV_READ/WRITE."""

    @handles(MG_EV_HTTP_HDRS, MG_EV_READ, MG_EV_WRITE, MG_EV_CLOSE)
    def on_busy(conn: Connection, ev: int, msg: Any) -> None:
        cycle = conn.userdata
        if ev == MG_EV_READ:
            if cycle is not None:
                cycle.on_read()
        elif ev == MG_EV_WRITE:
            if cycle is not None:
                cycle.on_write()
        else:
            on_quiet(conn, ev, msg)

    return on_busy


def websocket_handler(unix_conns: set[int]) -> Handler:
    """The handler of an accepted WebSocket; `unix_conns` forgets it when it closes."""

    @handles(MG_EV_WS_MSG, MG_EV_WS_CTL, MG_EV_WRITE, MG_EV_CLOSE)
    def on_ws(conn: Connection, ev: int, msg: Any) -> None:
        cycle = conn.userdata
        if cycle is None:
            return
        if ev == MG_EV_WS_MSG:
            cycle.on_message(msg)
        elif ev == MG_EV_WRITE:
            cycle.on_write()
        elif ev == MG_EV_WS_CTL:
            cycle.on_control()
        else:
            cycle.gone()
            if unix_conns:
                unix_conns.discard(conn.id)

    return on_ws
