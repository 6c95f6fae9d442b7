"""The ASGI app hypercorn serves in tests/proxy/test_proxy_upgrades.py: a backend with a
public and a private part that speaks HTTP/1.1, h2c (HTTP/2 after an `Upgrade: h2c`) and
WebSocket. Each HTTP request is recorded with the protocol it came in; GET /_seen (not
recorded) returns the record as JSON, so a test asks the backend itself what reached it."""

from __future__ import annotations

import json
from typing import Any

Scope = dict[str, Any]

seen: list[dict[str, Any]] = []


async def app(scope: Scope, receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
    elif scope["type"] == "websocket":
        await _echo(receive, send)
    elif scope["type"] == "http":
        await _http(scope, receive, send)


async def _http(scope: Scope, receive: Any, send: Any) -> None:
    while (await receive()).get("more_body"):
        pass
    if scope["path"] == "/_seen":
        body = json.dumps(seen).encode()
    else:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        seen.append({"path": scope["path"], "http_version": scope["http_version"],
                     "x-forwarded-for": headers.get("x-forwarded-for")})
        body = f"{scope['path']} over HTTP/{scope['http_version']}\n".encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def _echo(receive: Any, send: Any) -> None:
    while True:
        event = await receive()
        if event["type"] == "websocket.connect":
            await send({"type": "websocket.accept"})
        elif event["type"] == "websocket.receive":
            if event.get("bytes") is not None:
                await send({"type": "websocket.send", "bytes": event["bytes"]})
            else:
                await send({"type": "websocket.send", "text": event["text"]})
        else:
            return
