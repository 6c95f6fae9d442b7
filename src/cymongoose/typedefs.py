"""Runtime type aliases shared by the `.pyi` contract and every adapter."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from types import TracebackType
from typing import Any

#: A raw event handler: ``handler(conn, ev, data)``.
Handler = Callable[[Any, int, Any], None]

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]
#: PEP 3333 ``start_response(status, headers, exc_info=None) -> write``.
StartResponse = Callable[..., Callable[[bytes], object]]
#: A PEP 3333 application.
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]

ASGIScope = MutableMapping[str, Any]
ASGIMessage = MutableMapping[str, Any]
ASGIReceive = Callable[[], Awaitable[ASGIMessage]]
ASGISend = Callable[[ASGIMessage], Awaitable[None]]
#: An ASGI 3 application.
ASGIApp = Callable[[ASGIScope, ASGIReceive, ASGISend], Awaitable[None]]

#: What the servers accept as an app: the object, or an import string "module:attr".
AppRef = str | Callable[..., Any]
