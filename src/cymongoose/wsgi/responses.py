"""The loop side of the WSGI server's responses: the hooks WSGILoop.drain() calls for
what it does not write in C (a streamed response's steps, a response the core refused, the
access log's line) and the end of an exchange, including one whose body went over
max_body_size."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from .._mongoose import HeaderBlock, RequestBodyTooLarge, WSGILoop
from ..access_log import AccessLog
from ..serving.flow_control import SEND_LOW
from ..serving.reporting import (
    RESPONSE_500,
    error_log,
    report_app_error,
    report_exception,
    request_text,
    wsgi_target,
)
from ..serving.request_body import body_refusal
from ..serving.request_deadline import RESPONSE_504
from .exchange import _Exchange
from .parking import ParkedResponses
from .state import _OP_ABORT, _OP_BEGIN, _OP_END, _OP_FILE, _OP_PARK, _OP_WRITE, ServerState


class _EnvironKeys(dict[str, str]):
    """Header name -> its environ key ("user-agent" -> "HTTP_USER_AGENT"), made once."""

    def __missing__(self, name: str) -> str:
        key = self[name] = "HTTP_" + name.upper().replace("-", "_")
        return key


_ENVIRON_KEYS = _EnvironKeys()
_HEADERS_504 = [(b"Content-Type", b"text/plain; charset=utf-8"), (b"Connection", b"close")]


class ResponseWriter(WSGILoop, partial=True):
    """WSGILoop's loop-side hooks: write_step(), protocol_error() and log_access(); the
    request deadline's 504 (answer_timeout()) and a parked response's end (abort_parked()).
    `partial=True`: the core checks that ServerLoop, which adds AppResults' hooks, overrides
    them all."""

    __slots__ = ()
    state: ServerState
    _access: AccessLog | None
    _error_handler: Callable[[BaseException], object] | None
    _parking: ParkedResponses
    # The server's Date/Server header blocks, indexed by an exchange's `stock`
    # (serving/default_headers.py: updated in place once a second).
    _default_headers: list[HeaderBlock | None]

    def write_step(self, ex: _Exchange, op: int, arg: Any) -> None:
        """Write one queued step of a streamed response (drain() writes whole responses,
        _OP_WHOLE, itself)."""
        conn = ex.conn
        if op == _OP_WRITE:
            conn.http_write(arg)
            waiting = ex.flow_wrote(len(arg), conn.send_len)
            if ex.backlog >= SEND_LOW and not ex.busy:
                ex.busy = True
                conn.set_handler(self.busy_handler)  # be told when the client reads
            elif waiting:
                ex.notify_writer()
        elif op == _OP_BEGIN:
            code, reason = ex.status or (500, "")
            conn.http_begin(code, ex.headers, reason=reason,
                            more_headers=self._default_headers[ex.stock])
        elif op == _OP_FILE:
            fd, offset, count = arg
            try:
                conn.http_sendfile(fd, offset, count)
            finally:
                os.close(fd)
        elif op == _OP_END:
            if not conn.http_end():
                error_log.error(
                    "%s: the app sent %d bytes, fewer than its Content-Length of %d; "
                    "the connection was closed", _request_text(ex.environ), ex.sent,
                    ex.declared)
            self._finish(ex)
        elif op == _OP_ABORT:
            conn.close()
            self._finish(ex)
        elif op == _OP_PARK:
            self._parking.park(ex, arg)

    def abort_parked(self, ex: _Exchange, exc: BaseException) -> None:
        """Loop side: a parked response cannot go on (parking.py): logged as a failed
        write() is, and ended with its connection closed."""
        report_app_error(self._error_handler, f"{_request_text(ex.environ)}: the response "
                         "could not be completed; the connection is closed", exc)
        self.write_step(ex, _OP_ABORT, None)

    def _finish(self, ex: _Exchange) -> None:
        """As drain() ends a whole response."""
        ex.finished = True
        self.live.discard(ex)
        if self._access is not None:
            self.log_access(ex)
        conn = ex.conn
        if conn.userdata is ex:
            conn.userdata = None
            if ex.busy and not conn.is_closing:
                conn.set_handler(self.quiet_handler)

    def protocol_error(self, ex: _Exchange, exc: BaseException) -> None:
        """The app's response could not be sent as given (a bad header, too many bytes)."""
        if self._body_refused(ex):
            return  # not the app's fault: the core had answered 413 while it was busy
        report_exception(f"{_request_text(ex.environ)}: invalid response from the app", exc)
        conn = ex.conn
        try:
            if conn.response_started:
                conn.close()
            else:
                conn.http_begin(500, [(b"Content-Type", b"text/plain; charset=utf-8"),
                                      (b"Content-Length", b"%d" % len(RESPONSE_500)),
                                      (b"Connection", b"close")],
                                  more_headers=self._default_headers[3])
                conn.http_write(RESPONSE_500)
                conn.http_end()
        except RuntimeError:
            pass
        self._finish(ex)

    def answer_timeout(self, ex: _Exchange) -> None:
        """Loop side: answer 504 for an exchange past its deadline (deadline.py), which
        ends here, with its access-log line; the app keeps its own status and byte count."""
        conn = ex.conn
        try:
            conn.http_respond(504, _HEADERS_504, RESPONSE_504,
                              more_headers=self._default_headers[3])
        except RuntimeError:  # closed under us
            pass
        ex.finished = True
        self.live.discard(ex)
        if self._access is not None:
            self._log_line(ex, 504, len(RESPONSE_504))
        if conn.userdata is ex:
            conn.userdata = None
            if ex.busy and not conn.is_closing:
                conn.set_handler(self.quiet_handler)

    def _body_too_large(self, ex: _Exchange, exc: RequestBodyTooLarge) -> None:
        """Loop side: the request body went over max_body_size while the app had the
        request. The core answered 413 (or closed, once the response had started): the
        exchange ends here, with one access-log line; wsgi.input.read() raises `exc`, which
        names the limit, and whatever the app sends after is dropped."""
        if ex.closed or ex.finished:
            return
        waiting = ex.flow_closed()
        if ex.input is not None:
            ex.input.fail(exc)
        if waiting:
            ex.notify_writer()
        env = ex.environ
        error_log.info("%s: %s", _request_text(env), exc)
        ex.finished = True
        self.live.discard(ex)
        if self._access is not None:
            if exc.answered:
                ex.status, ex.sent = (413, None), 0
            self.log_access(ex)

    def _body_refused(self, ex: _Exchange) -> bool:
        """Whether the core refused this request's body (then handled as such): the app
        may answer before its reads would have told it."""
        refusal = body_refusal(ex.conn)
        if refusal is None:
            return False
        self._body_too_large(ex, refusal)
        return True

    def log_access(self, ex: _Exchange) -> None:
        self._log_line(ex, ex.status[0] if ex.status is not None else 0, ex.sent)

    def _log_line(self, ex: _Exchange, status: int, sent: int) -> None:
        access = self._access
        assert access is not None
        env = ex.environ
        try:
            access.log(env["REMOTE_ADDR"], env["REQUEST_METHOD"],
                       env["SCRIPT_NAME"] + env["PATH_INFO"], env["QUERY_STRING"],
                       env["SERVER_PROTOCOL"], status, 0 if ex.is_head else sent,
                       time.perf_counter() - ex.started,
                       lambda name: env.get(_ENVIRON_KEYS[name]),
                       env.get("REMOTE_USER"), env.get("RAW_URI"))
        except Exception as exc:  # a broken handler or format must not break serving
            report_exception("access log failed", exc)


def _request_text(environ: dict[str, Any]) -> str:
    """`METHOD target` of a WSGI request for an error-log line, escaped."""
    return request_text(environ.get("REQUEST_METHOD", "-"), wsgi_target(environ))
