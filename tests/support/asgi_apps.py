"""ASGI apps the ASGI tests serve, on our ASGIServer and on uvicorn (the reference) alike.

- ``raw_app``: a plain ASGI callable, routed by path, for the protocol's corners: the scope
  as JSON, bodies and disconnects, app errors and broken messages, WebSocket handshakes and
  closes. Cases that must be observed after the fact (what `send()` raised once the client
  left) record it under a token, read back with ``GET /_ctl/state?token=...``.
- ``starlette_app`` (and ``asgi_fastapi.app``): real framework apps (JSON, forms, uploads,
  streaming, server-sent events, a WebSocket chat, lifespan state).
- ``failing_startup_app``: its lifespan startup fails with a message.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs

from .patterns import pattern_chunks

STATE: dict[str, Any] = {}  # token -> what a case recorded
FILE_BODY = bytes(range(256)) * 1024  # 256 KiB served by http.response.pathsend
# One file for every test process, named by its content: each server process used to write
# its own and remove it at exit, and those killed (SIGKILL, os._exit) left theirs behind.
_FILE = os.path.join(tempfile.gettempdir(),
                     f"cymongoose-asgi-file-{hashlib.sha256(FILE_BODY).hexdigest()[:16]}.bin")


def served_file() -> str:
    """The path of a file holding FILE_BODY, written when missing (atomically: processes
    may race to write it) and left for the next run."""
    try:
        if os.path.getsize(_FILE) == len(FILE_BODY):
            return _FILE
    except OSError:
        pass
    partial = f"{_FILE}.{os.getpid()}"
    with open(partial, "wb") as f:
        f.write(FILE_BODY)
    os.replace(partial, _FILE)
    return _FILE


def _query(scope: dict[str, Any]) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(scope["query_string"].decode("latin-1")).items()}


async def _lifespan(scope: dict[str, Any], receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            scope["state"]["greeting"] = "hello from lifespan"
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _read_body(receive: Any) -> tuple[bytes, int]:
    body = b""
    messages = 0
    while True:
        message = await receive()
        assert message["type"] == "http.request", message
        body += message.get("body", b"")
        messages += 1
        if not message.get("more_body", False):
            return body, messages


async def _respond(send: Any, status: int, body: bytes,
                   headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": headers or [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


def _scope_json(scope: dict[str, Any]) -> bytes:
    return json.dumps({
        "type": scope["type"],
        "http_version": scope.get("http_version"),
        "method": scope.get("method"),
        "scheme": scope["scheme"],
        "path": scope["path"],
        "raw_path": scope["raw_path"].decode("latin-1"),
        "query_string": scope["query_string"].decode("latin-1"),
        "root_path": scope["root_path"],
        "headers": [[n.decode("latin-1"), v.decode("latin-1")] for n, v in scope["headers"]],
        "client": list(scope["client"]),
        "server": list(scope["server"]),
        "port_types": [type(scope["client"][1]).__name__, type(scope["server"][1]).__name__],
        "state": dict(scope.get("state", {})),
        "asgi": scope["asgi"],
    }).encode()


async def _http(scope: dict[str, Any], receive: Any, send: Any) -> None:
    path = scope["path"]
    if scope["root_path"] and path.startswith(scope["root_path"]):
        path = path[len(scope["root_path"]):]  # the route within the mount (as Starlette)
    q = _query(scope)
    if path == "/_ctl/ping":
        await _respond(send, 200, b"pong", [(b"content-type", b"text/plain")])
    elif path == "/_ctl/state":
        await _respond(send, 200, json.dumps(STATE.get(q["token"])).encode())
    elif path.startswith("/scope"):
        await _respond(send, 200, _scope_json(scope))
    elif path == "/echo":
        body, messages = await _read_body(receive)
        await _respond(send, 200, body, [(b"content-type", b"application/octet-stream"),
                                         (b"x-messages", b"%d" % messages)])
    elif path == "/hash":
        h = hashlib.sha256()
        length = 0
        while True:
            message = await receive()
            chunk = message.get("body", b"")
            h.update(chunk)
            length += len(chunk)
            if not message.get("more_body", False):
                break
        await _respond(send, 200, json.dumps({"length": length,
                                              "sha256": h.hexdigest()}).encode())
    elif path == "/stream":
        size, chunk = int(q.get("size", "65536")), int(q.get("chunk", "8192"))
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/octet-stream")]})
        for piece in pattern_chunks(size, chunk):
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    elif path == "/headers-out":
        await _respond(send, 200, b"ok", [(b"content-type", b"text/plain"),
                                          (b"set-cookie", b"a=1"), (b"set-cookie", b"b=2"),
                                          (b"x-custom", b"\xe9t\xe9")])
    elif path == "/wait-disconnect":
        # Respond only after the client is gone, and record what send() does then.
        token = q["token"]
        STATE[token] = {"received": None}
        message = await receive()
        while message["type"] == "http.request" and message.get("more_body"):
            message = await receive()
        message = await receive()
        STATE[token]["received"] = message["type"]
        try:
            await _respond(send, 200, b"too late")
            STATE[token]["send"] = "returned"
        except OSError as exc:
            STATE[token]["send"] = f"OSError:{type(exc).__name__}"
        except Exception as exc:  # a non-OSError is what the test must catch
            STATE[token]["send"] = f"other:{type(exc).__name__}"
    elif path == "/receive-log":
        # Records the type of every message receive() gives, up to the body's end or a
        # disconnect.
        types = STATE.setdefault(q["token"], {"types": []})["types"]
        while True:
            message = await receive()
            types.append(message["type"])
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        if types[-1] == "http.request":
            await _respond(send, 200, b"read it all")
    elif path == "/after-response":
        token = q["token"]
        await _respond(send, 200, b"done")
        STATE[token] = {"received": (await receive())["type"]}
    elif path == "/file":
        served_file()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/octet-stream")]})
        if "http.response.pathsend" in scope.get("extensions", {}):
            await send({"type": "http.response.pathsend", "path": served_file()})
        else:
            await send({"type": "http.response.body", "body": FILE_BODY})
    elif path == "/raise-before":
        raise RuntimeError("boom before the response")
    elif path == "/raise-after":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"partial", "more_body": True})
        raise RuntimeError("boom after the response started")
    elif path == "/unknown-type":
        await send({"type": "http.response.nonsense"})
    elif path == "/body-before-start":
        await send({"type": "http.response.body", "body": b"x"})
    elif path == "/str-body":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": "text, not bytes"})
    elif path == "/crlf-header":
        await _respond(send, 200, b"x", [(b"x-evil", b"a\r\nInjected: yes")])
    elif path == "/nul-header":
        await _respond(send, 200, b"x", [(b"x-evil", b"a\x00b")])
    elif path == "/cl-more":
        await _respond(send, 200, b"0123456789", [(b"content-length", b"5")])
    elif path == "/cl-less":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"100")]})
        await send({"type": "http.response.body", "body": b"short", "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    elif path == "/no-response":
        return
    else:
        await _respond(send, 404, b"not found", [(b"content-type", b"text/plain")])


async def _websocket(scope: dict[str, Any], receive: Any, send: Any) -> None:
    path = scope["path"]
    message = await receive()
    assert message["type"] == "websocket.connect", message
    if path == "/ws/reject":
        await send({"type": "websocket.close"})
        return
    if path == "/ws/return":
        return
    if path == "/ws/raise":
        raise RuntimeError("boom in a WebSocket app before accept")
    if path == "/ws/http-response":
        await send({"type": "websocket.http.response.start", "status": 418,
                    "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "websocket.http.response.body", "body": b"I'm a teapot"})
        return
    if path == "/ws/lazy":
        # Receives nothing for a while (the server must stop reading), then counts.
        await send({"type": "websocket.accept"})
        await asyncio.sleep(float(_query(scope).get("sleep", "2")))
        total = 0
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect" or message.get("text") == "end":
                break
            total += len(message.get("bytes") or b"")
        await send({"type": "websocket.send", "text": str(total)})
        return
    accept: dict[str, Any] = {"type": "websocket.accept",
                              "headers": [(b"x-extra", b"yes")]}
    if scope["subprotocols"]:
        accept["subprotocol"] = scope["subprotocols"][-1]
    await send(accept)
    token = _query(scope).get("token")
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            if token:
                STATE[token] = {"code": message["code"], "reason": message.get("reason", "")}
            return
        text = message.get("text")
        if text is not None and text.startswith("close:"):
            _, code, reason = text.split(":", 2)
            await send({"type": "websocket.close", "code": int(code), "reason": reason})
            return
        if text == "scope":
            await send({"type": "websocket.send", "text": json.dumps({
                "path": scope["path"], "scheme": scope["scheme"],
                "subprotocols": scope["subprotocols"], "state": dict(scope["state"]),
                "query_string": scope["query_string"].decode()})})
        elif text is not None:
            await send({"type": "websocket.send", "text": text})
        else:
            await send({"type": "websocket.send", "bytes": message["bytes"]})


async def raw_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await _lifespan(scope, receive, send)
    elif scope["type"] == "http":
        await _http(scope, receive, send)
    else:
        await _websocket(scope, receive, send)


async def no_lifespan_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An app that refuses the lifespan scope, as many minimal apps do."""
    if scope["type"] != "http":
        raise ValueError(f"unsupported scope {scope['type']}")
    await _respond(send, 200, b"served without lifespan", [(b"content-type", b"text/plain")])


async def failing_startup_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await receive()
        await send({"type": "lifespan.startup.failed", "message": "database unreachable"})
        return
    await _respond(send, 200, b"never", [(b"content-type", b"text/plain")])


def make_raw_app() -> Any:
    """A factory, for the server's factory=True."""
    return raw_app


# Framework apps, made on first access so the raw cases never import the frameworks.
def _make_starlette_app() -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse, StreamingResponse
    from starlette.routing import Route, WebSocketRoute
    from starlette.websockets import WebSocket

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        yield {"greeting": "hello from Starlette lifespan"}

    async def json_echo(request: Request) -> JSONResponse:
        return JSONResponse({"got": await request.json(), "method": request.method})

    async def form(request: Request) -> JSONResponse:
        async with request.form() as data:
            out: dict[str, Any] = {}
            for key, value in data.multi_items():
                if hasattr(value, "read"):
                    content = await value.read()
                    out[key] = {"filename": value.filename, "size": len(content)}
                else:
                    out[key] = value
        return JSONResponse(out)

    async def stream(request: Request) -> StreamingResponse:
        async def parts() -> AsyncIterator[bytes]:
            for i in range(int(request.query_params.get("n", "4"))):
                yield b"chunk %d\n" % i
        return StreamingResponse(parts(), media_type="text/plain")

    async def sse(request: Request) -> StreamingResponse:
        async def events() -> AsyncIterator[bytes]:
            for i in range(3):
                yield b"data: %d\n\n" % i
        return StreamingResponse(events(), media_type="text/event-stream")

    async def state(request: Request) -> PlainTextResponse:
        return PlainTextResponse(request.state.greeting)

    async def echo(ws: WebSocket) -> None:
        await ws.accept()
        async for text in ws.iter_text():
            await ws.send_text(text.upper())

    return Starlette(lifespan=lifespan, routes=[
        Route("/json", json_echo, methods=["POST"]),
        Route("/form", form, methods=["POST"]),
        Route("/stream", stream),
        Route("/sse", sse),
        Route("/state", state),
        WebSocketRoute("/ws", echo),
    ])


def __getattr__(name: str) -> Any:
    # Module attributes made on first access (PEP 562), then ordinary globals.
    makers = {"starlette_app": _make_starlette_app}
    if name in makers:
        app = globals()[name] = makers[name]()
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
