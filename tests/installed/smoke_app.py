"""The app the installed-wheel smoke test serves, with nothing but cymongoose installed: an
ASGI app (no framework) that says which cymongoose answered and echoes WebSocket messages."""

from __future__ import annotations

import json
from typing import Any

import cymongoose


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "http":
        body = json.dumps({"file": cymongoose.__file__, "version": cymongoose.__version__,
                           "tls": cymongoose.TLS_ENGINE, "scheme": scope["scheme"]}).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})
    elif scope["type"] == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.accept"})
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                return
            await send({"type": "websocket.send", "text": message.get("text"),
                        "bytes": message.get("bytes")})
