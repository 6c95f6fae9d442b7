"""A server that runs its own Mongoose loop (WSGIServer, RawServer) on a thread of its own,
its end reported to an asyncio loop: how `cymongoose.Server.serve()` serves a WSGI app or a
raw handler from inside a caller's running loop.

Why a thread and not the caller's loop: a WSGI app blocks (a database call, a file read)
and a raw handler runs inside Mongoose's events, so neither may run on a loop that other
coroutines share; and the WSGI server's app threads take turns owning its Manager
(wsgi/turns.py), which a loop that polls it from a callback could not join. On its thread
the server runs exactly as `run()` runs it, minus the signal handlers (only the main thread
takes signals; the embedding program stops it through `stop()`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Protocol

__all__ = ["ServerThread"]


class _LoopServer(Protocol):
    """What ServerThread asks of a server: WSGIServer and RawServer have it."""

    on_ready: Callable[[], object] | None

    def run(self) -> None: ...

    def stop(self) -> None: ...


class ServerThread:
    """`server.run()` on a thread named `name`, from `start()`; `ended` (a future of
    `loop`) is done once run() has returned, with run()'s exception if it raised."""

    def __init__(self, server: _LoopServer, loop: asyncio.AbstractEventLoop,
                 name: str) -> None:
        self._server = server
        self._loop = loop
        self.ended: asyncio.Future[None] = loop.create_future()
        # A daemon: a program that gave up waiting for the drain can still exit.
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Make the server drain and return from run() (any thread; idempotent)."""
        self._server.stop()

    def _run(self) -> None:
        error: BaseException | None = None
        try:
            self._server.run()
        except BaseException as exc:
            error = exc
        try:
            self._loop.call_soon_threadsafe(self._end, error)
        except RuntimeError:
            pass  # the loop is closed: nobody waits for this end any more

    def _end(self, error: BaseException | None) -> None:
        if self.ended.done():
            return
        if error is None:
            self.ended.set_result(None)
        else:
            self.ended.set_exception(error)
