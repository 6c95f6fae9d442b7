"""Which interface an app speaks, told from how it is called: WSGI, ASGI or a raw handler."""

from __future__ import annotations

import inspect
from typing import Any

from ..errors import ConfigError

__all__ = ["detect_interface"]


def detect_interface(app: Any) -> str:
    """"asgi" for an async callable, "raw" for a plain callable of three positional
    parameters (conn, ev, data), "wsgi" for two (environ, start_response)."""
    call = getattr(app, "__call__", None)  # noqa: B004 - instances: their __call__
    if inspect.iscoroutinefunction(app) or inspect.iscoroutinefunction(call):
        return "asgi"
    try:
        sig = inspect.signature(app)
    except (TypeError, ValueError):
        return "wsgi"
    kinds = [p.kind for p in sig.parameters.values()]
    positional = sum(k in (inspect.Parameter.POSITIONAL_ONLY,
                           inspect.Parameter.POSITIONAL_OR_KEYWORD) for k in kinds)
    if positional == 3:
        return "raw"
    if positional == 2 or inspect.Parameter.VAR_POSITIONAL in kinds:
        return "wsgi"
    raise ConfigError(f"cannot tell how to call {app!r}: a WSGI app takes (environ, "
                      "start_response), an ASGI app is async (scope, receive, send), a raw "
                      "handler takes (conn, ev, data); pass --interface")
