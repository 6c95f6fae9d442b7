"""The WSGI server's WSGILoop: the C per-request work (wsgi_exchange.pxi) with its fields
filled in and its hooks implemented, the loop side's in responses.py and the app side's in
results.py."""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

from .._mongoose import HeaderBlock
from ..access_log import AccessLog
from .bodies import _NO_BODY, _StreamInput
from .exchange import _Exchange
from .parking import ParkedResponses
from .responses import ResponseWriter
from .results import AppResults
from .state import ServerState


class ServerLoop(ResponseWriter, AppResults):
    """Calling it is the handler of a connection waiting for a request head; run_batch() and
    drain() are the turns' (see WSGILoop). The hooks come straight from both parents, two
    subclasses of WSGILoop with no fields of their own: a hook that delegated to a separate
    object would cost a Python frame more per request."""

    __slots__ = ("_access", "_deadline", "_default_headers", "_error_handler", "_park",
                 "_parking")

    def __init__(self, state: ServerState, *, pending: collections.deque[_Exchange],
                 live: set[_Exchange], bases: dict[int, dict[str, Any]], root_path: str,
                 busy_handler: Any, access_log: AccessLog | None,
                 default_headers: list[HeaderBlock | None],
                 error_handler: Callable[[BaseException], object] | None,
                 queue: Callable[[_Exchange], None], park: bool) -> None:
        self.state = state
        self.exchange_type = _Exchange
        self.stream_input_type = _StreamInput
        self.no_body = _NO_BODY
        self.pending = pending
        self.live = live
        self.bases = bases
        self.base_default = {}  # the server sets it with each listener it adds
        self.root_path = root_path
        self.outbox = state.outbox
        self.busy_handler = busy_handler
        self.access_log_on = access_log is not None
        self._deadline = None  # the server sets its WSGIDeadline, with request_timeout
        self._access = access_log
        self._default_headers = default_headers
        self._error_handler = error_handler
        self._park = park
        self._parking = ParkedResponses(state, queue, self.abort_parked)
        state.run_batch = self.run_batch
        state.body_too_large = self._body_too_large
        state.unpark = self._parking.unpark

    @property
    def parking(self) -> ParkedResponses:
        """The responses parked while their client is behind (parking.py)."""
        return self._parking
