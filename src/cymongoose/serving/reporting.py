"""Where a server says that an app failed: the `cymongoose.error` logger, or the user's own
error handler, and the body of the 500 it answers with; and how a log line names the request
it is about."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping
from typing import Any

from .._mongoose import log_escape

__all__ = ["RESPONSE_500", "asgi_target", "error_log", "report_app_error",
           "report_exception", "request_text", "wsgi_target"]

error_log = logging.getLogger("cymongoose.error")

# The body of the answer to a request whose app failed before its response started.
RESPONSE_500 = b"Internal Server Error\n"


def report_exception(what: str, exc: BaseException | None = None) -> None:
    """Log an app failure with its traceback on `cymongoose.error`."""
    if exc is None:
        error_log.error(what, exc_info=sys.exc_info())
    else:
        error_log.error(what, exc_info=(type(exc), exc, exc.__traceback__))


def report_app_error(error_handler: Callable[[BaseException], object] | None, what: str,
                     exc: BaseException) -> None:
    """The user's `error_handler(exc)` when one was given and it works; else the log."""
    if error_handler is not None:
        try:
            error_handler(exc)
            return
        except BaseException:
            pass  # a broken handler must not hide the app's failure: log it instead
    report_exception(what, exc)


def request_text(method: str, target: str) -> str:
    """`METHOD target` for a log line: the target as the client sent it (undecoded, as the
    access log's request line), escaped by log_escape() so that no byte a client chose can
    start a line of its own or pass for the server's words."""
    return log_escape(f"{method} {target}")


def wsgi_target(environ: Mapping[str, Any]) -> str:
    """The request target as the client sent it (RAW_URI); rebuilt from the decoded path
    when an app removed it."""
    target = environ.get("RAW_URI")
    if isinstance(target, str):
        return target
    query = environ.get("QUERY_STRING", "")
    path = f"{environ.get('SCRIPT_NAME', '')}{environ.get('PATH_INFO', '')}"
    return f"{path}?{query}" if query else path


def asgi_protocol(scope: Mapping[str, Any]) -> str:
    """The request's protocol as the access log and WSGI's SERVER_PROTOCOL spell it
    ("HTTP/1.1", "HTTP/2.0"), from ASGI's http_version ("1.1", "2")."""
    version = scope.get("http_version", "1.1")
    return "HTTP/2.0" if version == "2" else f"HTTP/{version}"


def asgi_target(scope: Mapping[str, Any], query: str | None = None) -> str:
    """The request target as the client sent it: `raw_path` and the query string (latin-1,
    one character per byte); `query` when the caller decoded it already."""
    raw = scope.get("raw_path")
    path = raw.decode("latin-1") if isinstance(raw, bytes) else scope.get("path", "")
    if query is None:
        query = scope.get("query_string", b"").decode("latin-1")
    return f"{path}?{query}" if query else path
