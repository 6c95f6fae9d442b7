"""The app side of the WSGI server's responses: what an app returned (any iterable, a
FileWrapper) or raised, turned into response steps for the loop's outbox. These are the
hooks WSGILoop.run_batch() calls when the answer is not the one-item list it queues itself;
they run on the thread that ran the app."""

from __future__ import annotations

import contextvars
import os
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from .._mongoose import WSGILoop, missing_default_headers
from ..errors import ClientDisconnected
from ..serving.reporting import RESPONSE_500, report_app_error, request_text, wsgi_target
from .bodies import FileWrapper
from .exchange import _Exchange
from .parking import Parked
from .state import _OP_ABORT, _OP_BEGIN, _OP_END, _OP_FILE, _OP_PARK, _OP_WHOLE, ServerState

if TYPE_CHECKING:
    from .deadline import WSGIDeadline


class AppResults(WSGILoop, partial=True):
    """WSGILoop's app-side hooks: finish_app(), resume_app(), app_failed() and
    timed_out_app_returned(). `partial=True`: see ResponseWriter."""

    __slots__ = ()
    state: ServerState
    _error_handler: Callable[[BaseException], object] | None
    _deadline: WSGIDeadline | None
    _park: bool  # park iterables whose client is behind (parking.py), else wait

    def finish_app(self, ex: _Exchange, result: Any) -> None:
        """Send what the app returned (any iterable), then close() it. An iterable whose
        client falls behind is parked instead (parking.py), and closed once it ends."""
        try:
            if ex.timed_out:
                pass  # answered 504 (deadline.py): the result is only closed
            elif not ex.head_queued and type(result) in (list, tuple):
                self._respond_whole(ex, result)
            elif not (isinstance(result, FileWrapper) and not ex.head_queued
                      and self._respond_file(ex, result)):
                items = iter(result)
                if self._park:
                    # The iterable may go on on another thread: from its first item it
                    # runs in a context of its own (a copy of the app's), so the context
                    # variables it sets stay its own. From the first: Flask's
                    # stream_with_context sets its request there and resets it at the end,
                    # which only works in the Context that set it (the Flask tests fail
                    # when the first item is taken outside).
                    ctx = contextvars.copy_context()
                    ctx.run(self._send_items, ex, result, items, ctx)
                else:
                    self._send_items(ex, result, items, None)
                return  # _send_items() closed or parked `result`
        except BaseException as exc:
            self.app_failed(ex, exc)
        self._close(ex, result)

    def resume_app(self, ex: _Exchange) -> None:
        """Take the next items of a parked response whose client drained (or went away:
        then its iterable is only closed), in the iterable's own context."""
        parked: Parked | None = ex.resumed
        assert parked is not None  # run_batch() calls this for a resumed exchange only
        result, items, ctx = parked
        ex.resumed = None
        if ex.closed or ex.finished:
            ctx.run(self._close, ex, result)
        else:
            ctx.run(self._send_items, ex, result, items, ctx)

    def _send_items(self, ex: _Exchange, result: Any, items: Iterator[Any],
                    ctx: contextvars.Context | None) -> None:
        """Stream the app's items until they end, then close() `result`. Once more than
        the high mark is queued towards the client, park them (with `ctx`, their context)
        and return: a thread takes the next items once the client drained (parking.py).
        Without `ctx` (parking is off) wait for the client here, as write() does."""
        whole = False
        try:
            for chunk in items:
                if not chunk:
                    continue
                if (not ex.head_queued and len(chunk) == ex.declared
                        and type(chunk) is bytes):
                    # The first piece is the whole declared body (Flask's and Django's
                    # responses): one write, as for a list. Any more is an app error.
                    whole = True
                    ex.sent = len(chunk)
                    ex.head_sent = ex.head_queued = True
                    self.state.post(ex, _OP_WHOLE, chunk)
                    continue
                if ex.post_piece(chunk):
                    if ctx is None:
                        ex.wait_for_client()
                        continue
                    self.state.post(ex, _OP_PARK, (result, items, ctx))
                    return  # the loop holds them now
            if ex.status is None:
                raise AssertionError("the app returned without calling start_response()")
            if not whole:
                self._end_stream(ex)
        except BaseException as exc:
            self.app_failed(ex, exc)
        self._close(ex, result)

    def _end_stream(self, ex: _Exchange) -> None:
        """The app's items ended: queue the end of its response."""
        if not ex.head_queued and (ex.declared <= 0 or ex.is_head):
            # No body at all: one write too.
            ex.head_sent = ex.head_queued = True
            self.state.post(ex, _OP_WHOLE, b"")
            return
        if not ex.head_queued:
            ex.stream(b"")
        if 0 <= ex.declared != ex.sent and not ex.is_head:
            if ex.sent > ex.declared:
                raise ValueError("the app sent more than its Content-Length")
        self.state.post(ex, _OP_END, None)

    def _close(self, ex: _Exchange, result: Any) -> None:
        """PEP 3333: close() of what the app returned, exactly once, whatever happened."""
        if result is not None and hasattr(result, "close"):
            try:
                result.close()
            except BaseException as exc:
                self._report(ex, "close() of the app's iterable failed", exc)

    def close_parked(self, ex: _Exchange, parked: Parked) -> None:
        """The server closes: close() a parked iterable no thread will resume."""
        parked[2].run(self._close, ex, parked[0])

    def _respond_whole(self, ex: _Exchange, result: Any) -> None:
        if ex.status is None:
            raise AssertionError("the app returned without calling start_response()")
        if len(result) == 1:
            body = result[0]  # bytes-like; http_respond refuses anything else
        else:
            for item in result:
                if type(item) is not bytes:
                    raise TypeError(
                        f"response body items must be bytes, not {type(item).__name__}")
            body = b"".join(result)
        ex.sent = len(body)
        ex.head_sent = ex.head_queued = True
        self.state.post(ex, _OP_WHOLE, body)

    def _respond_file(self, ex: _Exchange, wrapper: FileWrapper) -> bool:
        """Send a regular file with sendfile(2); False: it is not one, iterate it."""
        fd = wrapper.fileno_for_sendfile()
        if fd is None or ex.status is None:
            return False
        offset = os.lseek(fd, 0, os.SEEK_CUR)
        count = max(0, os.fstat(fd).st_size - offset)
        if ex.declared >= 0:
            count = min(count, ex.declared)
        ex.sent = count
        ex.head_sent = ex.head_queued = True
        self.state.post(ex, _OP_BEGIN, None)
        self.state.post(ex, _OP_FILE, (os.dup(fd), offset, count))
        self.state.post(ex, _OP_END, None)
        return True

    def app_failed(self, ex: _Exchange, exc: BaseException) -> None:
        if ex.timed_out:
            return  # answered 504 (deadline.py): what the app does next is dropped
        if isinstance(exc, ClientDisconnected) or (ex.closed and isinstance(exc, OSError)):
            return  # the client left: nothing to answer, nothing to log
        what = request_text(ex.environ.get("REQUEST_METHOD", "-"), wsgi_target(ex.environ))
        if ex.head_sent:
            self._report(ex, f"{what}: the app failed after its response started; "
                             "the connection is closed", exc)
            self.state.post(ex, _OP_ABORT, None)
            return
        self._report(ex, f"{what}: the app failed; answered 500", exc)
        ex.head_sent = ex.head_queued = True
        ex.status = (500, None)
        ex.headers = [("Content-Type", "text/plain; charset=utf-8"), ("Connection", "close")]
        ex.declared = -1
        ex.stock = missing_default_headers(ex.headers)
        self._respond_whole(ex, [RESPONSE_500])

    def _report(self, ex: _Exchange, what: str, exc: BaseException) -> None:
        report_app_error(self._error_handler, what, exc)

    def timed_out_app_returned(self, ex: _Exchange, slots: deque[None]) -> None:
        assert self._deadline is not None  # only a server with a deadline times out
        self._deadline.returned(ex, slots)

    # Lifecycle.
