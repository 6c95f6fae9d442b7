"""The request deadline of ASGIServer (request_timeout): 504 and a cancelled task for an app
that sent no http.response.start in time, while other requests are served; a started
response and WebSockets are never cut."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from support.asgi_server import RunningASGI, running_asgi_server
from support.http_client import HttpConnection, Response, get
from websockets.sync.client import connect

from cymongoose.access_log import AccessLog

TIMEOUT = 0.4


class StuckApp:
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
def serving(app: StuckApp, **kwargs: Any) -> Iterator[RunningASGI]:
    with running_asgi_server(app, server_kwargs={"request_timeout": TIMEOUT,
                                                 "lifespan": "off", **kwargs}) as running:
        try:
            yield running
        finally:
            if app.release is not None:
                running.call(app.release.set)


def in_background(port: int, target: str) -> tuple[threading.Thread, list[Response]]:
    out: list[Response] = []
    thread = threading.Thread(target=lambda: out.append(get(port, target)), daemon=True)
    thread.start()
    return thread, out


def test_stuck_app_gets_504_and_its_task_is_cancelled(
        caplog: pytest.LogCaptureFixture) -> None:
    app = StuckApp()
    caplog.set_level(logging.INFO)
    with serving(app, access_log=AccessLog()) as running:
        thread, out = in_background(running.port, "/stuck?q=1")
        answered = 0
        while thread.is_alive():  # served meanwhile
            assert get(running.port, "/fast").body == b"fast"
            answered += 1
        assert answered >= 2
        resp = out[0]
        assert resp.status == 504 and resp.header("connection") == "close"
        assert b"Gateway Timeout" in resp.body
        assert app.events == ["cancelled"]
        assert running.call(lambda: running.server.request_timeouts) == 1
        assert running.task_count() == 0
    errors = [r for r in caplog.records if r.name == "cymongoose.error"]
    assert [r.levelname for r in errors] == ["WARNING"], caplog.text
    assert "GET /stuck?q=1 HTTP/1.1: no response after " in errors[0].getMessage()
    access = [r.getMessage() for r in caplog.records if r.name == "cymongoose.access"]
    assert any('"GET /stuck?q=1 HTTP/1.1" 504' in line for line in access), access


def test_started_response_is_not_cut() -> None:
    app = StuckApp()
    with serving(app) as running:
        with HttpConnection(running.port) as c:
            c.sock.sendall(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            seen = b""
            while b"first;" not in seen:
                seen += c.sock.recv(4096)
            # A request admitted later timing out shows the deadline has passed for this one.
            assert get(running.port, "/stuck").status == 504
            assert app.release is not None
            running.call(app.release.set)
            while not seen.endswith(b"0\r\n\r\n"):
                seen += c.sock.recv(4096)
        assert seen.startswith(b"HTTP/1.1 200 OK") and b"rest" in seen
        assert app.events == ["cancelled"]  # /stuck's, not /stream's


def test_websocket_has_no_deadline() -> None:
    app = StuckApp()
    with serving(app) as running:
        with connect(f"ws://127.0.0.1:{running.port}/ws", open_timeout=5) as ws:
            ws.send("before")
            assert ws.recv(timeout=5) == "before"
            assert get(running.port, "/stuck").status == 504  # the deadline has passed
            ws.send("after")
            assert ws.recv(timeout=5) == "after"
