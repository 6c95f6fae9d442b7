"""What the ASGI server's HTTP and WebSocket cycles share: the server's own answers, the
header checks of a response start and the waiter their coroutines park on."""

from __future__ import annotations

import asyncio
from typing import Any

from .._mongoose import ASGIWaiter

# Most body bytes one http.request message carries.
_RECEIVE_MAX = 1 << 20

_HEADERS_500 = [(b"content-type", b"text/plain; charset=utf-8"), (b"connection", b"close")]
_HEADERS_504 = _HEADERS_500  # a timed-out request's connection closes too
_RESPONSE_403 = b"Forbidden\n"
_HEADERS_TEXT = [(b"content-type", b"text/plain; charset=utf-8")]


def _has_header(headers: Any, lower: bytes) -> bool:
    n = len(lower)
    return any(len(p[0]) == n and p[0].lower() == lower for p in headers)


class _Waiter(ASGIWaiter):
    """Wake-ups for coroutines waiting on the loop's thread. Several may wait at once (an
    app may call receive() from two tasks); each awaits a future of its own, so cancelling
    one waiter never disturbs the others. `wake()` is the hook the C code calls (an
    exchange that completes wakes a receive() waiting for the disconnect)."""

    __slots__ = ("_futures",)

    def __init__(self) -> None:
        self._futures: list[asyncio.Future[None]] = []

    async def wait(self) -> None:
        fut = asyncio.get_running_loop().create_future()
        self._futures.append(fut)
        try:
            await fut
        finally:
            if fut in self._futures:
                self._futures.remove(fut)

    def wake(self) -> None:
        futures = self._futures
        if futures:
            for fut in futures:
                if not fut.done():
                    fut.set_result(None)
            futures.clear()
