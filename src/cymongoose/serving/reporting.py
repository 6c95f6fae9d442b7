"""Where a server says that an app failed: the `cymongoose.error` logger, or the user's own
error handler, and the body of the 500 it answers with."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

__all__ = ["RESPONSE_500", "error_log", "report_app_error", "report_exception"]

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
