"""Apps for the embedded server's tests (tests/adapters/embedding): each records what the
server did to it, so a test can wait on the record instead of on time."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any


class RecordingASGI:
    """An ASGI app: lifespan startup and shutdown recorded in `events`; GET /slow holds its
    answer until `release` is set (`in_flight` counts the requests holding), any other path
    answers its path at once."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.in_flight = 0
        self.release: Any = None  # an asyncio.Event, made on the loop that serves

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                kind = message["type"].rpartition(".")[2]  # startup / shutdown
                self.events.append(kind)
                await send({"type": f"lifespan.{kind}.complete"})
                if kind == "shutdown":
                    return
        if scope["path"] == "/slow":
            import asyncio

            if self.release is None:
                self.release = asyncio.Event()
            self.in_flight += 1
            await self.release.wait()
            self.in_flight -= 1
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": scope["path"].encode()})


class HoldingWSGI:
    """A WSGI app: GET /slow blocks its thread until `release` is set (`entered` is set
    once it blocks); any other path answers the name of the thread that ran it."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if environ["PATH_INFO"] == "/slow":
            self.entered.set()
            self.release.wait(30)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [threading.current_thread().name.encode()]


async def lifespan_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An ASGI app that prints its lifespan events (a child process's output shows them)."""
    if scope["type"] == "lifespan":
        while True:
            kind = (await receive())["type"].rpartition(".")[2]
            print(f"lifespan {kind}", flush=True)
            await send({"type": f"lifespan.{kind}.complete"})
            if kind == "shutdown":
                return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})
