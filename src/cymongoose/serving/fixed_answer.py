"""A handler that gives every request one fixed answer, starting TLS on the connections it
accepts: the pure proxy's 404 beside its routes (the core answers those before any handler)
and the start-up responder's 503 while the app loads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._mongoose import MG_EV_ACCEPT, MG_EV_HTTP_MSG, Connection, TlsOpts, handles

__all__ = ["fixed_answer_handler"]


def fixed_answer_handler(tls: TlsOpts | None, status: int, body: str | bytes,
                         headers: Callable[[], dict[str, str]]) -> Any:
    """The handler: `status` with `body` and `headers()` (called per answer, so a Date
    can be fresh) to every request; `tls_init(tls)` on each accepted connection when
    `tls` is given (the listener must be opened with `tls=True`)."""

    @handles(MG_EV_ACCEPT, MG_EV_HTTP_MSG)
    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_ACCEPT:
            if tls is not None:
                conn.tls_init(tls)
        else:
            conn.reply(status, body, headers())

    return handler
