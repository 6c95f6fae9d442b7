"""The request deadline of ASGIServer (request_timeout) where it differs from WSGIServer's:
a WebSocket has none. The cases both servers share are in
tests/adapters/test_request_timeout.py."""

from __future__ import annotations

from support.http_client import get
from support.stuck_apps import StuckASGI, serving_asgi
from websockets.sync.client import connect


def test_websocket_has_no_deadline() -> None:
    app = StuckASGI()
    with serving_asgi(app) as running:
        with connect(f"ws://127.0.0.1:{running.port}/ws", open_timeout=5) as ws:
            ws.send("before")
            assert ws.recv(timeout=5) == "before"
            assert get(running.port, "/stuck").status == 504  # the deadline has passed
            ws.send("after")
            assert ws.recv(timeout=5) == "after"
