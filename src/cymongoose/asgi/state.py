"""What the ASGI server's per-request objects share, and all they get of it (uvicorn's
ServerState is the model): the default header blocks, the poll kick, the handlers a
connection switches between, the error reporter and the access-log writer. An HTTP exchange
and a WebSocket cycle hold this object, never the server; the core reads the fields declared
on its base class (ASGIServerState, _mongoose.pxd) and calls `log_access()`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .._mongoose import ASGIServerState
from ..access_log import AccessLog
from ..serving.reporting import (
    asgi_protocol,
    asgi_target,
    report_app_error,
    report_exception,
)


def _not_started() -> None:
    pass


class ServerState(ASGIServerState):
    """The state an ASGIServer shares with its exchanges and WebSocket cycles. The server
    sets the handlers once it made them, and `kick` once its LoopDriver is attached."""

    __slots__ = ("_access", "_error_handler", "ws_deflate")

    def __init__(self, access_log: AccessLog | None,
                 error_handler: Callable[[BaseException], object] | None) -> None:
        self._access = access_log
        self._error_handler = error_handler
        self.access_log_on = access_log is not None
        # Negotiate permessage-deflate with WebSocket clients that offer it (the server's
        # ws_per_message_deflate option).
        self.ws_deflate = True
        # Poll soon: what was written outside a poll reaches the socket. Called per response,
        # so it is the driver's own bound method once the loop runs, not a method calling it.
        self.kick = _not_started

    def report(self, what: str, exc: BaseException) -> None:
        """An app's failure: to the server's error_handler, else to the error log."""
        report_app_error(self._error_handler, what, exc)

    def log_access(self, cycle: Any) -> None:
        access = self._access
        assert access is not None
        scope = cycle.scope
        headers = scope["headers"]

        def lookup(name: str) -> str | None:
            key = name.encode("latin-1")
            for pair in headers:
                if pair[0] == key:
                    return pair[1].decode("latin-1")  # type: ignore[no-any-return]
            return None

        client = scope.get("client")
        method = scope.get("method", "GET")  # a WebSocket scope has none: its handshake's
        try:
            query = scope["query_string"].decode("latin-1")
            access.log(client[0] if client else "-", method, scope["path"], query,
                       asgi_protocol(scope), cycle.status,
                       0 if method == "HEAD" else cycle.sent,
                       time.perf_counter() - cycle.started, lookup,
                       target=asgi_target(scope, query))
        except Exception as exc:  # a broken handler or format must not break serving
            report_exception("access log failed", exc)
