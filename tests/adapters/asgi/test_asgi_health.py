"""The ASGI server wires the guard's options from its Config: health_path answers 200 once
the lifespan startup is done, the Manager is not ready once the server drains, and
ASGIServer.metrics() keeps the final snapshot after stop()."""

from __future__ import annotations

import asyncio

import pytest
from support.http_client import get

from cymongoose.asgi import ASGIServer
from cymongoose.config import Config

pytestmark = pytest.mark.timeout(30)


async def _app(scope: dict, receive: object, send: object) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()  # type: ignore[operator]
            kind = message["type"].rsplit(".", 1)[1]
            await send({"type": f"lifespan.{kind}.complete"})  # type: ignore[operator]
            if kind == "shutdown":
                return
    await send({"type": "http.response.start", "status": 204, "headers": []})  # type: ignore
    await send({"type": "http.response.body", "body": b""})  # type: ignore[operator]


def test_ready_after_startup_and_metrics_after_stop() -> None:
    async def main() -> None:
        server = ASGIServer(_app, config=Config(health_path="/healthz", limit_concurrency=3))
        with pytest.raises(RuntimeError):
            server.metrics()  # not started
        port = (await server.start("http://127.0.0.1:0")).local_addr[1]
        manager = server.manager
        assert (manager.ready, manager.limit_concurrency) == (True, 3)
        resp = await asyncio.to_thread(get, port, "/healthz")
        assert (resp.status, resp.body) == (200, b"ok\n")
        assert (await asyncio.to_thread(get, port, "/")).status == 204
        await server.stop()
        assert not manager.ready
        m = server.metrics()
        assert m["requests"] == {200: 1, 204: 1}
        assert m["connections_open"] == 0

    asyncio.run(main())
