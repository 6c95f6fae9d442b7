"""The FastAPI app of the ASGI tests (JSON, forms, uploads, streaming, server-sent events,
a WebSocket chat, lifespan state). Its own module, without postponed annotations: FastAPI
reads the route signatures' annotations at import time."""

import asyncio
import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Form, Request, UploadFile, WebSocket, WebSocketDisconnect
from fastapi.responses import FileResponse, StreamingResponse

from .asgi_apps import served_file


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
    yield {"greeting": "hello from FastAPI lifespan"}


app = FastAPI(lifespan=lifespan)
room: set[WebSocket] = set()


@app.get("/json")
async def get_json(name: str = "world") -> dict[str, Any]:
    return {"hello": name, "numbers": [1, 2, 3]}


@app.post("/json")
async def post_json(request: Request) -> dict[str, Any]:
    data = await request.json()
    return {"got": data, "keys": sorted(data)}


@app.post("/form")
async def form(a: str = Form(), b: int = Form()) -> dict[str, Any]:
    return {"a": a, "b": b}


@app.post("/upload")
async def upload(file: UploadFile, note: str = Form("")) -> dict[str, Any]:
    data = await file.read()
    return {"filename": file.filename, "size": len(data), "note": note,
            "sha256": hashlib.sha256(data).hexdigest()}


@app.get("/stream")
async def stream(n: int = 5) -> StreamingResponse:
    async def parts() -> AsyncIterator[bytes]:
        for i in range(n):
            yield b"part %d\n" % i
            await asyncio.sleep(0)
    return StreamingResponse(parts(), media_type="text/plain")


@app.get("/sse")
async def sse(n: int = 3) -> StreamingResponse:
    async def events() -> AsyncIterator[str]:
        for i in range(n):
            yield f"event: tick\ndata: {i}\n\n"
            await asyncio.sleep(0.01)
    return StreamingResponse(events(), media_type="text/event-stream")


@app.get("/state")
async def state(request: Request) -> dict[str, Any]:
    return {"greeting": request.state.greeting}


@app.get("/file")
async def file() -> FileResponse:
    return FileResponse(served_file(), media_type="application/octet-stream")


@app.websocket("/chat")
async def chat(ws: WebSocket, name: str = "anon") -> None:
    await ws.accept()
    room.add(ws)
    try:
        while True:
            text = await ws.receive_text()
            for peer in list(room):
                await peer.send_json({"from": name, "text": text})
    except WebSocketDisconnect:
        pass
    finally:
        room.discard(ws)
