"""The reverse proxy in front of apps: a Flask app (WSGI) and an ASGI app with /api answered
by another service, and a routing hook choosing per request."""

from __future__ import annotations

from typing import Any

import pytest
from support.asgi_server import running_asgi_server
from support.http_client import HttpConnection
from support.wsgi_server import running_wsgi_server

from cymongoose.config import Config

pytestmark = pytest.mark.timeout(60)


def test_a_flask_app_with_api_proxied_to_another_service(upstream: Any) -> None:
    from support.flask_app import app

    api = upstream("api")
    config = Config(proxy=(f"/api={api.url}",), access_log=False)
    with running_wsgi_server(app, server_kwargs={"config": config}) as srv:
        with HttpConnection(srv.port) as client:
            assert client.request("GET", "/_ctl/ping").body == b"pong"
            assert client.request("GET", "/api/users?id=7").body == b"api GET /api/users?id=7\n"
            assert client.request("POST", "/api/x", body=b"data").status == 200
            assert client.request("GET", "/_ctl/ping").body == b"pong"
    assert [(s.method, s.target, s.body) for s in api.seen] == [
        ("GET", "/api/users?id=7", b""), ("POST", "/api/x", b"data")]


async def asgi_hello(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"asgi " + scope["path"].encode()})


def test_an_asgi_app_with_api_proxied_to_another_service(upstream: Any) -> None:
    api = upstream("api")
    config = Config(proxy=(f"/api={api.url}",))
    with running_asgi_server(asgi_hello, server_kwargs={"config": config}) as srv:
        with HttpConnection(srv.port) as client:
            assert client.request("GET", "/page").body == b"asgi /page"
            assert client.request("GET", "/api/v").body == b"api GET /api/v\n"
    assert [s.target for s in api.seen] == ["/api/v"]


def test_a_routing_hook_picks_the_upstream_or_leaves_the_request_to_the_app(
        upstream: Any, proxy: Any) -> None:
    blue, green = upstream("blue"), upstream("green")
    asked: list[tuple[str, str]] = []

    def route(method: str, path: str, headers: list[tuple[str, str]]) -> str | None:
        asked.append((method, path))
        chosen = dict((k.lower(), v) for k, v in headers).get("x-color")
        return {"blue": blue.url, "green": green.url}.get(chosen or "")

    p = proxy({"/": blue.url}, upstreams=[green.url], route=route)
    with HttpConnection(p.port) as client:
        assert client.request("GET", "/a", headers=[("X-Color", "green")]).body.startswith(
            b"green")
        assert client.request("GET", "/b", headers=[("X-Color", "blue")]).body.startswith(
            b"blue")
        assert client.request("GET", "/c").body == b"app 404\n"  # None: the app answers
    assert asked == [("GET", "/a"), ("GET", "/b"), ("GET", "/c")]


def test_a_routing_hook_that_raises_leaves_the_request_to_the_app(
        upstream: Any, proxy: Any) -> None:
    up = upstream()

    def route(method: str, path: str, headers: list[tuple[str, str]]) -> str | None:
        raise RuntimeError("no routing today")

    p = proxy({"/": up.url}, route=route)
    with HttpConnection(p.port) as client:
        assert client.request("GET", "/a").body == b"app 404\n"
    assert up.seen == []
