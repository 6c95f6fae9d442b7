"""What the WSGI and ASGI servers share: loading the app, the Date/Server header cache and
the logger names. Plain Python over the public core; no framework is imported here."""

from __future__ import annotations

import importlib
import logging
import os
import socket
import sys
import time
from email.utils import formatdate
from typing import Any

from .._mongoose import Connection, Manager, listen_fd
from ..errors import AppLoadError
from ..typedefs import AppRef

SERVER_NAME = b"cymongoose"
error_log = logging.getLogger("cymongoose.error")


def load_app(app: AppRef, factory: bool = False) -> Any:
    """`app` itself, or the object an import string ``"module:attr"`` names (``attr`` may be
    dotted); with ``factory=True``, the result of calling it with no arguments."""
    if isinstance(app, str):
        module_name, sep, attr = app.partition(":")
        if not sep or not module_name or not attr:
            raise AppLoadError(f"app {app!r} must be given as 'module:attribute'")
        try:
            obj: Any = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                raise AppLoadError(f"cannot import module {module_name!r}: {exc}") from None
            raise
        for part in attr.split("."):
            try:
                obj = getattr(obj, part)
            except AttributeError:
                raise AppLoadError(
                    f"module {module_name!r} has no attribute {attr!r}") from None
    else:
        obj = app
    if factory:
        if not callable(obj):
            raise AppLoadError(f"factory {app!r} is not callable")
        obj = obj()
    if not callable(obj):
        raise AppLoadError(f"app {app!r} is not callable")
    return obj


class DateHeader:
    """The `Date` value (RFC 9110 §5.6.7), formatted once per second, not per response."""

    __slots__ = ("_second", "_value")

    def __init__(self) -> None:
        self._second = -1
        self._value = b""

    def get(self) -> bytes:
        now = time.time()
        second = int(now)
        if second != self._second:
            self._value = formatdate(now, usegmt=True).encode("ascii")
            self._second = second
        return self._value


def report_exception(what: str, exc: BaseException | None = None) -> None:
    """Log an app failure with its traceback on `cymongoose.error`."""
    if exc is None:
        error_log.error(what, exc_info=sys.exc_info())
    else:
        error_log.error(what, exc_info=(type(exc), exc, exc.__traceback__))


def adopt_listener(manager: Manager, sock: Any, *, tls: bool, on_unix: Any, on_tls: Any,
                   on_plain: Any, **limits: Any) -> tuple[Connection, bool, Any]:
    """Serve HTTP on a listening socket (or descriptor) opened elsewhere: the handler by its
    kind (`on_unix` for AF_UNIX, else `on_tls` or `on_plain`). Returns the listener, whether
    it is a Unix socket, and its address. The caller keeps and closes `sock`."""
    fd = sock if isinstance(sock, int) else sock.fileno()
    probe = socket.socket(fileno=os.dup(fd))
    try:
        unix = probe.family == socket.AF_UNIX
        name = probe.getsockname()
    finally:
        probe.close()
    if unix and tls:
        raise ValueError("TLS on a Unix socket is not supported; terminate TLS in the proxy "
                         "in front")
    handler = on_unix if unix else on_tls if tls else on_plain
    conn = listen_fd(manager, fd, handler, http=True, tls=tls, stream_body=True, **limits)
    return conn, unix, name
