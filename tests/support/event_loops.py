"""The event loops a test may run a coroutine on: asyncio's own and uvloop's."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from importlib.util import find_spec
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

# For pytest.mark.parametrize: uvloop's only where it is installed (it has no build for a
# free-threaded 3.13, whose leg of make test runs these tests too).
LOOP_KINDS: tuple[Any, ...] = (
    "asyncio",
    pytest.param("uvloop", marks=pytest.mark.skipif(
        find_spec("uvloop") is None, reason="uvloop is not installed for this Python")))


def run_on(kind: str, main: Callable[[], Awaitable[T]], timeout: float = 30.0) -> T:
    """Run `main()` to its end on a new loop of `kind` (closed after), failing with
    TimeoutError after `timeout` seconds."""
    if kind == "uvloop":
        import uvloop

        loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()

    async def bounded() -> T:
        return await asyncio.wait_for(main(), timeout)

    try:
        return loop.run_until_complete(bounded())
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


class Ticker:
    """A task of the program's own on the running loop, counting its turns in `ticks`:
    while it counts, the loop is not blocked by whatever else runs on it."""

    def __init__(self) -> None:
        self.ticks = 0
        self.task: asyncio.Task[None] = asyncio.ensure_future(self._tick())

    async def _tick(self) -> None:
        while True:
            self.ticks += 1
            await asyncio.sleep(0.005)
