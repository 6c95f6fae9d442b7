"""The ASGI lifespan protocol: the app's startup before the first listener opens, its
shutdown when the server stops, and the state it leaves for every request's scope."""

from __future__ import annotations

import asyncio
from typing import Any

from ..errors import LifespanFailure
from ..serving.reporting import error_log, report_exception
from ..typedefs import ASGIApp, ASGIMessage


class _Lifespan:
    """The lifespan protocol: startup before the first listener, shutdown at stop(). `state`
    is the dict the app may fill in at startup; mode is the server's lifespan option."""

    def __init__(self, app: ASGIApp, state: dict[str, Any], mode: str) -> None:
        self._app = app
        self._state = state
        self._mode = mode
        self._inbox: asyncio.Queue[ASGIMessage] = asyncio.Queue()
        self._started = asyncio.Event()
        self._shut = asyncio.Event()
        self._failure: str | None = None
        self._task: asyncio.Task[None] | None = None
        self.supported = True

    async def startup(self) -> None:
        if self._mode == "off":
            self.supported = False
            return
        self._task = asyncio.get_running_loop().create_task(self._run())
        await self._inbox.put({"type": "lifespan.startup"})
        waiter = asyncio.ensure_future(self._started.wait())
        await asyncio.wait({waiter, self._task}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if self._failure is not None:
            # Its last line: the whole of it (a traceback, as Starlette sends) is logged.
            lines = [line for line in self._failure.splitlines() if line.strip()]
            raise LifespanFailure(lines[-1].strip() if lines else self._failure)
        if not self._started.is_set():  # the app returned or raised without an answer
            self.supported = False
            if self._mode == "on":
                raise LifespanFailure("the app does not support the lifespan protocol")

    async def shutdown(self, timeout: float) -> None:
        task = self._task
        if task is None or not self.supported or task.done():
            return
        await self._inbox.put({"type": "lifespan.shutdown"})
        waiter = asyncio.ensure_future(self._shut.wait())
        await asyncio.wait({waiter, task}, timeout=timeout,
                           return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if self._failure is not None:
            error_log.error("ASGI lifespan shutdown failed: %s", self._failure)
        if not task.done():
            task.cancel()

    async def _run(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"},
                 "state": self._state}
        try:
            await self._app(scope, self._receive, self._send)
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                raise
            if self._failure is not None:
                # It said lifespan.startup.failed (logged in _send) and raised after: its
                # message already holds the failure (Starlette's, its traceback), so the
                # traceback is not logged a second time; uvicorn does the same.
                return
            if self._started.is_set() or self._mode == "on":
                self._failure = f"{type(exc).__name__}: {exc}"
                report_exception("ASGI lifespan failed", exc)
            else:
                error_log.info("ASGI lifespan protocol unsupported by the app (it raised %s); "
                               "serving without it", type(exc).__name__)

    async def _receive(self) -> ASGIMessage:
        return await self._inbox.get()

    async def _send(self, message: ASGIMessage) -> None:
        kind = message["type"]
        if kind == "lifespan.startup.complete":
            self._started.set()
        elif kind == "lifespan.startup.failed":
            self._failure = str(message.get("message", "")) or "lifespan startup failed"
            error_log.error("ASGI lifespan startup failed: %s", self._failure)
            self._started.set()
        elif kind == "lifespan.shutdown.complete":
            self._shut.set()
        elif kind == "lifespan.shutdown.failed":
            self._failure = str(message.get("message", "")) or "lifespan shutdown failed"
            self._shut.set()
        else:
            raise ValueError(f"unexpected ASGI lifespan message type {kind!r}")
