"""ASGIServer's serving options: the access log, trusted proxy headers, a listening socket
brought in (TCP and Unix), max_requests, the graceful drain of stop(), and their argument
checks."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import tempfile
import threading
import time
from typing import Any

import pytest
from support.asgi_server import running_asgi_server
from support.cli_run import unix_get
from support.http_client import HttpConnection, get
from support.ports import bound_listener
from support.waiting import wait_for
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from cymongoose.access_log import AccessLog
from cymongoose.asgi import ASGIServer
from cymongoose.proxy_headers import ProxyHeaders

pytestmark = pytest.mark.timeout(60)


async def echo_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The scope's client, scheme, host and server as JSON; /stream in two parts; /fail
    raises before answering; /slow sleeps 0.5 s first."""
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/fail":
        raise RuntimeError("the app failed on purpose")
    if path == "/slow":
        await asyncio.sleep(0.5)
    host = dict(scope["headers"]).get(b"host", b"").decode()
    server = scope["server"]
    body = json.dumps({"client": list(scope["client"]), "scheme": scope["scheme"],
                       "host": host, "server": list(server) if server else None}).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    if path == "/stream":
        await send({"type": "http.response.body", "body": body[:5], "more_body": True})
        await send({"type": "http.response.body", "body": body[5:]})
    else:
        await send({"type": "http.response.body", "body": body})


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _access_log() -> tuple[AccessLog, Lines]:
    logger = logging.getLogger(f"test.asgi.access.{id(object())}")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    lines = Lines()
    logger.addHandler(lines)
    return AccessLog(as_json=True, logger=logger), lines


def test_access_log_records_status_bytes_and_client() -> None:
    access, lines = _access_log()
    with running_asgi_server(echo_app, server_kwargs={"access_log": access}) as run:
        whole = get(run.port, "/a?x=1", [("User-Agent", "unit/1")])
        streamed = get(run.port, "/stream")
        failed = get(run.port, "/fail")
        assert (whole.status, streamed.status, failed.status) == (200, 200, 500)
        with HttpConnection(run.port) as c:
            c.request("HEAD", "/h")
        wait_for(lambda: len(lines.lines) == 4, 5, lambda: f"len(lines.lines) == 4 ({lines.lines})")
    records = [json.loads(line) for line in lines.lines]
    assert [(r["method"], r["path"], r["status"], r["bytes"]) for r in records] == [
        ("GET", "/a", 200, len(whole.body)), ("GET", "/stream", 200, len(streamed.body)),
        ("GET", "/fail", 500, len(failed.body)), ("HEAD", "/h", 200, 0)]
    assert records[0]["query"] == "x=1" and records[0]["user_agent"] == "unit/1"
    assert all(r["client"] == "127.0.0.1" and r["duration_ms"] >= 0 for r in records)


def test_access_log_records_requests_the_server_refused() -> None:
    # No app saw them, but an operator looking for bad clients should (as with nginx).
    access, lines = _access_log()
    with running_asgi_server(echo_app, server_kwargs={"access_log": access}) as run:
        with HttpConnection(run.port) as c:
            c.send_raw(b"GET /x HTTP/1.1\r\nHost: a b\r\n\r\n")
            assert c.read_response().status == 400
        wait_for(lambda: len(lines.lines) == 1, 5, lambda: f"len(lines.lines) == 1 ({lines.lines})")
    record = json.loads(lines.lines[0])
    assert (record["method"], record["path"], record["protocol"], record["status"],
            record["bytes"], record["client"]) == ("GET", "/x", "HTTP/1.1", 400, 12,
                                                   "127.0.0.1")


def _scope(port: int, headers: list[tuple[str, str]]) -> dict[str, Any]:
    resp = get(port, "/", headers)
    assert resp.status == 200, resp
    return json.loads(resp.body)  # type: ignore[no-any-return]


def test_proxy_headers_from_a_trusted_peer() -> None:
    with running_asgi_server(echo_app,
                             server_kwargs={"proxy_headers": ProxyHeaders("127.0.0.1")}) as run:
        plain = _scope(run.port, [])
        assert plain["client"][0] == "127.0.0.1" and plain["scheme"] == "http"
        # Repeated X-Forwarded-For fields are one list; the rightmost untrusted is the client.
        seen = _scope(run.port, [("X-Forwarded-For", "198.51.100.1"),
                                 ("X-Forwarded-For", "203.0.113.5:4711, 127.0.0.1"),
                                 ("X-Forwarded-Proto", "https"),
                                 ("X-Forwarded-Host", "shop.example")])
        assert (seen["client"], seen["scheme"]) == (["203.0.113.5", 4711], "https")
        # X-Forwarded-Host only with host=True (a proxy that does not set it passes a
        # client's on).
        assert seen["host"].startswith("127.0.0.1")
        # Forwarded is not this resolver's source: ignored.
        rfc = _scope(run.port, [("Forwarded", 'for="[2001:db8::1]:80";proto=https')])
        assert (rfc["client"][0], rfc["scheme"]) == ("127.0.0.1", "http")
    proxy = ProxyHeaders("127.0.0.1", source="forwarded")
    with running_asgi_server(echo_app, server_kwargs={"proxy_headers": proxy}) as run:
        rfc = _scope(run.port, [("Forwarded", 'for="[2001:db8::1]:80";proto=https'),
                                ("X-Forwarded-For", "198.51.100.1")])
        assert (rfc["client"], rfc["scheme"]) == (["2001:db8::1", 80], "https")
    proxy = ProxyHeaders("127.0.0.1", host=True)
    with running_asgi_server(echo_app, server_kwargs={"proxy_headers": proxy}) as run:
        seen = _scope(run.port, [("X-Forwarded-For", "203.0.113.5"),
                                 ("X-Forwarded-Host", "shop.example")])
        assert (seen["client"][0], seen["host"]) == ("203.0.113.5", "shop.example")


def test_proxy_headers_from_an_untrusted_peer_are_ignored() -> None:
    with running_asgi_server(echo_app,
                             server_kwargs={"proxy_headers": ProxyHeaders("10.0.0.1",
                                                                          host=True)}) as run:
        seen = _scope(run.port, [("X-Forwarded-For", "203.0.113.5"),
                                 ("X-Forwarded-Proto", "https"),
                                 ("X-Forwarded-Host", "evil.example")])
        assert seen["client"][0] == "127.0.0.1" and seen["scheme"] == "http"
        assert seen["host"].startswith("127.0.0.1")


def test_listen_socket_tcp_and_unix() -> None:
    with tempfile.TemporaryDirectory() as tmp, bound_listener() as tcp, \
            running_asgi_server(echo_app,
                                server_kwargs={"proxy_headers": ProxyHeaders()}) as run:
        path = os.path.join(tmp, "asgi.sock")
        unix = socket.socket(socket.AF_UNIX)
        unix.bind(path)
        unix.listen(16)
        try:
            run.call(lambda: run.server.listen_socket(tcp))
            run.call(lambda: run.server.listen_socket(unix.fileno()))
            port = tcp.getsockname()[1]
            over_tcp = json.loads(get(port, "/").body)
            assert over_tcp["server"] == ["127.0.0.1", port]
            body = unix_get(path, "/").partition(b"\r\n\r\n")[2]
            assert json.loads(body)["client"] == ["127.0.0.1", 0]
            assert json.loads(body)["server"] == [path, None]
            # A Unix-socket peer is the local proxy: trusted.
            body = unix_get(path, "/", "X-Forwarded-For: 203.0.113.8\r\n"
                                       "X-Forwarded-Proto: https\r\n").partition(b"\r\n\r\n")[2]
            assert json.loads(body)["client"][0] == "203.0.113.8"
            assert json.loads(body)["scheme"] == "https"
            with pytest.raises(ValueError, match="tls=True needs"):
                run.call(lambda: run.server.listen_socket(tcp, tls=True))
        finally:
            unix.close()


def test_max_requests_calls_back_once_and_closes_connections() -> None:
    calls: list[int] = []
    with running_asgi_server(echo_app, server_kwargs={"max_requests": 3}) as run:
        run.server.on_max_requests = lambda: calls.append(1)
        with HttpConnection(run.port) as c:
            first = [c.request("GET", "/") for _ in range(2)]
            assert all(r.header("connection") is None for r in first)
            third = c.request("GET", "/")
            assert third.header("connection") == "close"  # draining from now on
        get(run.port, "/")
        assert calls == [1]


def test_max_requests_without_a_callback_stops_the_server() -> None:
    with running_asgi_server(echo_app, server_kwargs={"max_requests": 1}) as run:
        assert get(run.port, "/").status == 200

        def refused() -> bool:
            try:
                socket.create_connection(("127.0.0.1", run.port), timeout=1).close()
                return False
            except OSError:
                return True

        wait_for(refused, 5, "refused")


def test_stop_finishes_in_flight_and_closes_idle_keep_alive() -> None:
    with running_asgi_server(echo_app, server_kwargs={"shutdown_timeout": 5}) as run:
        idle = HttpConnection(run.port)
        assert idle.request("GET", "/").status == 200
        answers: list[Any] = []
        busy = HttpConnection(run.port)
        reader = threading.Thread(target=lambda: answers.append(busy.request("GET", "/slow")))
        reader.start()
        wait_for(lambda: run.task_count() == 1, 5, "run.task_count() == 1")
        started = time.monotonic()
        stopping = asyncio.run_coroutine_threadsafe(run.server.stop(), run.loop)
        assert idle.server_closed(3)  # the idle keep-alive connection is closed at once
        assert time.monotonic() - started < 0.45
        reader.join(5)
        stopping.result(5)
        assert answers and answers[0].status == 200
        assert answers[0].header("connection") == "close"
        idle.close()
        busy.close()


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="max_requests"):
        ASGIServer(echo_app, max_requests=-1)
    with pytest.raises(TypeError, match="access_log must be an AccessLog"):
        ASGIServer(echo_app, access_log="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="proxy_headers must be a ProxyHeaders"):
        ASGIServer(echo_app, proxy_headers="127.0.0.1")  # type: ignore[arg-type]

    async def https_without_tls() -> None:
        server = ASGIServer(echo_app, lifespan="off")
        try:
            await server.start("https://127.0.0.1:0")
        finally:
            await server.stop()

    with pytest.raises(ValueError, match="needs ASGIServer"):
        asyncio.run(https_without_tls())



async def ws_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """/ok accepts and echoes one message; /no refuses (403); /teapot answers the handshake
    with its own HTTP response (websocket.http.response)."""
    if scope["type"] != "websocket":
        return
    await receive()  # websocket.connect
    if scope["path"] == "/ok":
        await send({"type": "websocket.accept"})
        message = await receive()
        await send({"type": "websocket.send", "text": message.get("text")})
        await send({"type": "websocket.close"})
    elif scope["path"] == "/teapot":
        await send({"type": "websocket.http.response.start", "status": 418,
                    "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "websocket.http.response.body", "body": b"short and stout"})
    else:
        await send({"type": "websocket.close"})


def test_websocket_handshakes_are_access_logged() -> None:
    access, lines = _access_log()
    with running_asgi_server(ws_app, server_kwargs={"access_log": access}) as run:
        with connect(f"ws://127.0.0.1:{run.port}/ok?q=1", open_timeout=5) as ws:
            ws.send("hi")
            assert ws.recv(timeout=5) == "hi"
        for path, status in (("/no", 403), ("/teapot", 418)):
            with pytest.raises(InvalidStatus) as refused:
                connect(f"ws://127.0.0.1:{run.port}{path}", open_timeout=5)
            assert refused.value.response.status_code == status
        wait_for(lambda: len(lines.lines) == 3, 5, lambda: f"len(lines.lines) == 3 ({lines.lines})")
    records = [json.loads(line) for line in lines.lines]
    assert [(r["method"], r["path"], r["query"], r["status"], r["bytes"]) for r in records] == [
        ("GET", "/ok", "q=1", 101, 0), ("GET", "/no", "", 403, len(b"Forbidden\n")),
        ("GET", "/teapot", "", 418, len(b"short and stout"))]
    assert all(r["client"] == "127.0.0.1" and r["duration_ms"] >= 0 for r in records)
