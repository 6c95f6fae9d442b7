"""Apps that do not answer until released, served with a short request_timeout: the request
deadline's tests for WSGIServer and ASGIServer (tests/adapters/*request_timeout*.py)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from cymongoose.errors import ClientDisconnected

from .asgi_server import RunningASGI, running_asgi_server
from .http_client import Response, get
from .wsgi_server import RunningServer, running_wsgi_server

TIMEOUT = 0.4


class StuckWSGI:
    """/stuck?<what> waits for `release`, then does <what>: answer, write, raise or return
    an iterable; /stream starts its response at once and finishes after `release`; anything
    else is answered at once. `events` records what the app saw."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.events: list[str] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        path, what = environ["PATH_INFO"], environ["QUERY_STRING"]
        if path == "/stream":
            write = start_response("200 OK", [("Content-Type", "text/plain")])
            write(b"first;")
            self.release.wait(10)
            return [b"rest"]
        if path != "/stuck":
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"fast"]
        self.release.wait(10)
        try:
            write = start_response("200 OK", [("Content-Type", "text/plain")])
            if what == "write":
                write(b"late")
            elif what == "raise":
                raise ValueError("late failure")
            elif what == "iterable":
                return _Body(self.events)
            return [b"late"]
        except ClientDisconnected:
            self.events.append("write refused")
            raise
        finally:
            self.events.append("returned")


class _Body:
    """An app's iterable that records its close()."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def __iter__(self) -> Iterator[bytes]:
        yield b"late"

    def close(self) -> None:
        self.events.append("closed")


class StuckASGI:
    """/stuck never starts its response (until cancelled); /stream starts at once and ends
    after `release`; a WebSocket echoes; anything else is answered at once."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.release: asyncio.Event | None = None  # made on the server's loop

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":
            await self._echo(receive, send)
            return
        if scope["type"] != "http":
            return
        if self.release is None:
            self.release = asyncio.Event()
        start = {"type": "http.response.start", "status": 200, "headers": []}
        if scope["path"] == "/stuck":
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.events.append("cancelled")
                raise
        elif scope["path"] == "/stream":
            await send(start)
            await send({"type": "http.response.body", "body": b"first;", "more_body": True})
            await self.release.wait()
            await send({"type": "http.response.body", "body": b"rest"})
            return
        await send(start)
        await send({"type": "http.response.body", "body": b"fast"})

    async def _echo(self, receive: Any, send: Any) -> None:
        await receive()  # websocket.connect
        await send({"type": "websocket.accept"})
        while True:
            message = await receive()
            if message["type"] != "websocket.receive":
                return
            await send({"type": "websocket.send", "text": message.get("text")})


@contextmanager
def serving_wsgi(app: StuckWSGI, threads: int = 2, **kwargs: Any) -> Iterator[RunningServer]:
    with running_wsgi_server(app, threads=threads,
                             server_kwargs={"request_timeout": TIMEOUT, **kwargs}) as running:
        try:
            yield running
        finally:
            app.release.set()  # the stuck apps return before the server stops


@contextmanager
def serving_asgi(app: StuckASGI, **kwargs: Any) -> Iterator[RunningASGI]:
    with running_asgi_server(app, server_kwargs={"request_timeout": TIMEOUT,
                                                 "lifespan": "off", **kwargs}) as running:
        try:
            yield running
        finally:
            if app.release is not None:
                running.call(app.release.set)


@dataclass
class Stuck:
    """One server of either kind running a stuck app: what the shared cases need."""

    kind: str
    port: int
    app: StuckWSGI | StuckASGI
    wsgi: RunningServer | None = None
    asgi: RunningASGI | None = None

    def release(self) -> None:
        if isinstance(self.app, StuckWSGI):
            self.app.release.set()
        else:
            assert self.asgi is not None and self.app.release is not None
            self.asgi.call(self.app.release.set)

    def request_timeouts(self) -> int:
        if self.wsgi is not None:
            return int(self.wsgi.server.request_timeouts)
        assert self.asgi is not None
        asgi = self.asgi
        return int(asgi.call(lambda: asgi.server.request_timeouts))


@contextmanager
def serving_stuck(kind: str, **kwargs: Any) -> Iterator[Stuck]:
    """A stuck app of `kind` ("wsgi" or "asgi") served with request_timeout TIMEOUT."""
    if kind == "wsgi":
        wsgi_app = StuckWSGI()
        with serving_wsgi(wsgi_app, **kwargs) as running:
            yield Stuck(kind, running.port, wsgi_app, wsgi=running)
    else:
        asgi_app = StuckASGI()
        with serving_asgi(asgi_app, **kwargs) as running_asgi:
            yield Stuck(kind, running_asgi.port, asgi_app, asgi=running_asgi)


def in_background(port: int, target: str) -> tuple[threading.Thread, list[Response]]:
    """GET `target` on a thread of its own; the list gets the response."""
    out: list[Response] = []
    thread = threading.Thread(target=lambda: out.append(get(port, target)), daemon=True)
    thread.start()
    return thread, out
