"""Fields the proxy vouches for, whatever a client names: forwarding fields spelt with `_`
never reach a backend that would read them as the proxy's (gunicorn with `--header-map
dangerous` merges `X_Forwarded_For` into HTTP_X_FORWARDED_FOR, as CGI-style backends do),
and Connection cannot name away Host, the framing or the forwarding fields."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.gunicorn_server import GunicornServer
from support.http_client import HttpConnection
from support.nginx import start_nginx, stop_nginx
from support.ports import HOST, free_port
from support.subprocess_env import tool_env

pytestmark = pytest.mark.timeout(60)

UNDERSCORED = [("X_Forwarded_For", "6.6.6.6"), ("X-Forwarded_For", "6.6.6.7"),
               ("x_forwarded_proto", "https"), ("X_Forwarded_Host", "evil.example"),
               ("X_Real_IP", "6.6.6.8"), ("X-Real_Ip", "6.6.6.9"),
               ("X_Forwarded_Port", "1")]


@pytest.fixture(scope="module")
def cgi_style() -> Iterator[GunicornServer]:
    with GunicornServer("support.wsgi_apps:app", threads=2,
                        options=("--header-map", "dangerous")) as server:
        yield server


def environ(port: int, headers: list[tuple[str, str]]) -> dict[str, Any]:
    with HttpConnection(port, timeout=10) as client:
        resp = client.request("GET", "/environ", [("Host", "h.example"), *headers])
    assert resp.status == 200, resp
    result: dict[str, Any] = json.loads(resp.body)
    return result


def test_the_backend_merges_underscored_names(cgi_style: GunicornServer) -> None:
    # What the proxy guards against: straight to it, the client's name is the proxy's.
    env = environ(cgi_style.port, [("X_Forwarded_For", "6.6.6.6")])
    assert env["HTTP_X_FORWARDED_FOR"] == "6.6.6.6"


@pytest.mark.parametrize("trusted", ["10.0.0.0/8", "127.0.0.1"], ids=["untrusted", "trusted"])
def test_underscored_forwarding_fields_never_reach_the_backend(
        cgi_style: GunicornServer, proxy: Any, trusted: str) -> None:
    p = proxy({"/": f"http://127.0.0.1:{cgi_style.port}"}, forwarded_allow_ips=trusted)
    env = environ(p.port, [*UNDERSCORED, ("X_Api_Key", "k1")])
    assert env["HTTP_X_FORWARDED_FOR"] == "127.0.0.1"
    assert env["HTTP_X_FORWARDED_PROTO"] == "http"
    assert env["HTTP_X_FORWARDED_HOST"] == "h.example"
    assert "HTTP_X_REAL_IP" not in env and "HTTP_X_FORWARDED_PORT" not in env
    # Other names with `_` are the client's own and pass (nginx would drop them too).
    assert env["HTTP_X_API_KEY"] == "k1"


def test_connection_cannot_name_away_host_framing_or_forwarding(upstream: Any,
                                                                proxy: Any) -> None:
    up = upstream()
    p = proxy({"/": up.url}, via=True)
    nominated = ("Host, Content-Length, Transfer-Encoding, X-Forwarded-For, "
                 "X-Forwarded-Proto, X-Forwarded-Host, Via, X-Hop")
    with HttpConnection(p.port) as client:
        resp = client.request("POST", "/a", [("Host", "shop.example"), ("X-Hop", "1"),
                                             ("Connection", nominated)], body=b"hello")
        assert resp.status == 200, resp
    seen = up.seen[0]
    assert seen.header("Host") == "shop.example"
    assert seen.header("Content-Length") == "5" and seen.body == b"hello"
    assert seen.header("X-Forwarded-For") == "127.0.0.1"
    assert seen.header("X-Forwarded-Proto") == "http"
    assert seen.header("X-Forwarded-Host") == "shop.example"
    assert seen.header("Via") == "1.1 cymongoose"
    assert seen.header("X-Hop") is None  # the client's own field: removed as named


NGINX_FRONT = """
    access_log off;
    server {{
        listen {host}:{port};
        location / {{
            proxy_pass {upstream};
            proxy_http_version 1.1;
            proxy_set_header Host $host;
        }}
    }}
"""


@pytest.mark.parametrize("front", ["nginx", "cymongoose"])
def test_a_request_naming_host_in_connection_is_served_as_nginx_serves_it(
        upstream: Any, proxy: Any, tmp_path: Path, front: str) -> None:
    # The reference: nginx (its usual proxy recipe) ignores what Connection names and drops
    # names with `_`; the upstream gets Host either way.
    up = upstream()
    nginx = None
    if front == "nginx":
        port = free_port()
        nginx = start_nginx(tmp_path, NGINX_FRONT.format(host=HOST, port=port,
                                                         upstream=up.url), port, tool_env())
    else:
        port = proxy({"/": up.url}).port
    try:
        with HttpConnection(port) as client:
            resp = client.request("GET", "/a", [("Host", "shop.example"),
                                                ("Connection", "Host"),
                                                ("X_Forwarded_For", "6.6.6.6")])
        assert resp.status == 200, resp
    finally:
        stop_nginx(nginx)
    assert up.seen[0].header("Host") == "shop.example"
    assert up.seen[0].header("X_Forwarded_For") is None


def test_an_upstream_cannot_name_away_its_content_length(raw_upstream: Any,
                                                         proxy: Any) -> None:
    up = raw_upstream(lambda head: b"HTTP/1.1 200 OK\r\nConnection: Content-Length, X-Hop\r\n"
                      b"X-Hop: 1\r\nContent-Length: 5\r\n\r\nhello", close_after=False)
    p = proxy({"/": up.url})
    with HttpConnection(p.port) as client:
        for _ in range(2):  # the connection stays in step: the body was delimited
            resp = client.request("GET", "/a")
            assert (resp.status, resp.body) == (200, b"hello")
            assert resp.header("content-length") == "5" and resp.header("x-hop") is None
