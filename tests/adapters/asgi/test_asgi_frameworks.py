"""Real apps: FastAPI and Starlette (JSON, forms, file uploads, streaming, server-sent events,
a WebSocket chat, lifespan state), on our ASGIServer and on uvicorn."""

from __future__ import annotations

import hashlib
import json
import os

import httpx
import pytest
from support.asgi_apps import FILE_BODY
from support.asgi_fixtures import ServeASGI
from support.served import Served
from websockets.sync.client import connect

pytestmark = pytest.mark.timeout(60)

FASTAPI = "support.asgi_fastapi:app"
STARLETTE = "support.asgi_apps:starlette_app"


@pytest.fixture
def fastapi_served(serve_asgi: ServeASGI) -> Served:
    return serve_asgi(FASTAPI)


@pytest.fixture
def starlette_served(serve_asgi: ServeASGI) -> Served:
    return serve_asgi(STARLETTE)


def client(served: Served) -> httpx.Client:
    return httpx.Client(base_url=f"http://127.0.0.1:{served.port}", timeout=10)


def test_fastapi_json_form_upload_and_state(fastapi_served: Served) -> None:
    with client(fastapi_served) as c:
        assert c.get("/json", params={"name": "cymongoose"}).json() == {
            "hello": "cymongoose", "numbers": [1, 2, 3]}
        assert c.post("/json", json={"b": 2, "a": [1]}).json() == {
            "got": {"b": 2, "a": [1]}, "keys": ["a", "b"]}
        assert c.post("/form", data={"a": "x y", "b": "42"}).json() == {"a": "x y", "b": 42}
        assert c.post("/form", data={"a": "x"}).status_code == 422
        blob = os.urandom(3 << 20)
        resp = c.post("/upload", files={"file": ("blob.bin", blob)}, data={"note": "hi"})
        assert resp.json() == {"filename": "blob.bin", "size": len(blob), "note": "hi",
                               "sha256": hashlib.sha256(blob).hexdigest()}
        assert c.get("/state").json() == {"greeting": "hello from FastAPI lifespan"}
        assert c.get("/missing").status_code == 404


def test_fastapi_streaming_sse_and_file(fastapi_served: Served) -> None:
    with client(fastapi_served) as c:
        assert c.get("/stream", params={"n": 50}).text == "".join(
            f"part {i}\n" for i in range(50))
        with c.stream("GET", "/sse") as resp:
            assert resp.headers["content-type"].startswith("text/event-stream")
            events = [line for line in resp.iter_lines() if line.startswith("data:")]
        assert events == ["data: 0", "data: 1", "data: 2"]
        resp = c.get("/file")
        assert resp.content == FILE_BODY
        assert resp.headers["content-length"] == str(len(FILE_BODY))


def test_fastapi_websocket_chat(fastapi_served: Served) -> None:
    base = f"ws://127.0.0.1:{fastapi_served.port}/chat"
    with connect(f"{base}?name=ann", open_timeout=5) as ann, \
            connect(f"{base}?name=bob", open_timeout=5) as bob:
        ann.send("hello bob")
        assert json.loads(bob.recv(5)) == {"from": "ann", "text": "hello bob"}
        assert json.loads(ann.recv(5)) == {"from": "ann", "text": "hello bob"}
        bob.send("hi ann")
        assert json.loads(ann.recv(5)) == {"from": "bob", "text": "hi ann"}


def test_starlette_json_form_stream_sse_state(starlette_served: Served) -> None:
    with client(starlette_served) as c:
        assert c.post("/json", json=[1, "two"]).json() == {"got": [1, "two"],
                                                          "method": "POST"}
        resp = c.post("/form", data={"field": "v"}, files={"up": ("a.txt", b"abc" * 1000)})
        assert resp.json() == {"field": "v", "up": {"filename": "a.txt", "size": 3000}}
        assert c.get("/stream", params={"n": 3}).text == "chunk 0\nchunk 1\nchunk 2\n"
        assert c.get("/sse").text == "data: 0\n\ndata: 1\n\ndata: 2\n\n"
        assert c.get("/state").text == "hello from Starlette lifespan"


def test_starlette_websocket(starlette_served: Served) -> None:
    with connect(f"ws://127.0.0.1:{starlette_served.port}/ws", open_timeout=5) as ws:
        for word in ("a", "bc", "déf"):
            ws.send(word)
            assert ws.recv(5) == word.upper()
