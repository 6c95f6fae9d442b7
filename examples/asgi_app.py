"""A plain ASGI app (no framework) served by the `cymongoose` command line: HTTP, a
WebSocket echo and the lifespan protocol. FastAPI and Starlette apps are served the same way.

From this directory:

    cymongoose asgi_app:app --port 8000

    curl http://127.0.0.1:8000/
    curl --data-binary @asgi_app.py http://127.0.0.1:8000/upload

and a WebSocket at ws://127.0.0.1:8000/ws echoes every message. On a server: every
interface, two worker processes, one access-log line per request:

    cymongoose asgi_app:app --host 0.0.0.0 --port 8000 --workers 2 --access-log

Ctrl-C or SIGTERM stops it once the requests in flight are answered; WebSockets still open
are closed with 1012. docs/deployment.md has every option.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        await lifespan(scope, receive, send)
    elif scope["type"] == "websocket":
        await echo(receive, send)
    elif scope["path"] == "/":
        started = scope.get("state", {}).get("started", time.time())
        await _json(send, 200, {"message": "hello", "client": scope["client"][0],
                                "pid": os.getpid(), "up_s": round(time.time() - started, 3)})
    elif scope["path"] == "/upload" and scope["method"] == "POST":
        size = 0
        more = True
        while more:  # streamed: each message holds what has arrived
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            size += len(message.get("body", b""))
            more = message.get("more_body", False)
        await _json(send, 201, {"received": size})
    else:
        await _json(send, 404, {"error": f"no route for {scope['path']}"})


async def lifespan(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """Startup and shutdown; what startup puts in `state` reaches every request's scope."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            scope.get("state", {})["started"] = time.time()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def echo(receive: Receive, send: Send) -> None:
    """Accept the WebSocket, then send every message back as it came."""
    while True:
        message = await receive()
        if message["type"] == "websocket.connect":
            await send({"type": "websocket.accept"})
        elif message["type"] == "websocket.receive":
            if message.get("text") is not None:
                await send({"type": "websocket.send", "text": message["text"]})
            else:
                await send({"type": "websocket.send", "bytes": message.get("bytes") or b""})
        else:  # websocket.disconnect
            return


async def _json(send: Send, status: int, value: object) -> None:
    body = json.dumps(value).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
