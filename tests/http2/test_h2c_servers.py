"""The WSGI and ASGI servers over HTTP/2 with prior knowledge: the same apps, each stream a
request, bodies streamed both ways, files sent, and requests of one connection served at
once (threads for WSGI, tasks for ASGI)."""

from __future__ import annotations

import asyncio
import logging
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

import hpack
import pytest
from flask import Flask, Response, request
from support.asgi_server import running_asgi_server
from support.h2_peer import FrameReader, H2Peer, frame, raw_connection
from support.subprocess_env import tool_env
from support.waiting import wait_for
from support.wsgi_server import running_wsgi_server

from cymongoose._mongoose import HTTP2_LIBRARY
from cymongoose.access_log import AccessLog

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(HTTP2_LIBRARY is None, reason="built without HTTP/2")]

BODY = bytes(range(256)) * 2048  # 512 KiB: eight stream windows


def flask_app(file: Path, together: int) -> Flask:
    app = Flask(__name__)
    barrier = threading.Barrier(together, timeout=20)

    @app.route("/")
    def index() -> str:
        return request.environ["SERVER_PROTOCOL"]

    @app.route("/upload", methods=["POST"])
    def upload() -> str:
        return f"{len(request.get_data())} {request.get_data() == BODY}"

    @app.route("/stream")
    def stream() -> Response:
        return Response((b"y" * 1000 for _ in range(1000)), mimetype="text/plain")

    @app.route("/file")
    def send() -> Response:
        wrapper = request.environ["wsgi.file_wrapper"]
        return Response(wrapper(file.open("rb")), mimetype="application/octet-stream",
                        direct_passthrough=True)

    @app.route("/together")
    def meet() -> str:
        return f"met {barrier.wait()}"  # every one of `together` requests in flight at once

    return app


def access_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "cymongoose.access"]


def test_wsgi_app_over_h2c(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "cymongoose.access")
    file = tmp_path / "blob"
    file.write_bytes(BODY)
    with running_wsgi_server(flask_app(file, 4), threads=4,
                             server_kwargs={"access_log": AccessLog()}) as srv, \
            H2Peer(srv.port) as peer:
        index = peer.request("/")
        up = peer.request("/upload", "POST", [("content-length", str(len(BODY)))],
                          end=False)
        peer.send_all(up, BODY)
        stream = peer.request("/stream")
        sent = peer.request("/file")
        a, b, c, d = peer.wait_answers(index, up, stream, sent, timeout=30)
        assert (a.status, a.body) == (200, b"HTTP/2.0")
        assert b.body == f"{len(BODY)} True".encode()
        assert c.body == b"y" * 1_000_000
        assert d.body == BODY
        meet = [peer.request("/together") for _ in range(4)]
        answers = peer.wait_answers(*meet, timeout=30)
    assert sorted(x.body for x in answers) == [b"met 0", b"met 1", b"met 2", b"met 3"]
    wait_for(lambda: len(access_lines(caplog)) >= 8, 10, "eight access-log lines")
    assert any('"POST /upload HTTP/2.0" 200' in line for line in access_lines(caplog))


async def asgi_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/together":
        state = asgi_app.__dict__.setdefault("state", {"n": 0, "event": asyncio.Event()})
        state["n"] += 1
        if state["n"] == 10:
            state["event"].set()
        await asyncio.wait_for(state["event"].wait(), 20)
    size = 0
    while True:
        message = await receive()
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain")]})
    if path == "/stream":
        for _ in range(100):
            await send({"type": "http.response.body", "body": b"z" * 10_000,
                        "more_body": True})
    await send({"type": "http.response.body",
                "body": f"{scope['http_version']} {size}".encode()})


def test_asgi_app_over_h2c(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "cymongoose.access")
    asgi_app.__dict__.pop("state", None)
    with running_asgi_server(asgi_app, server_kwargs={"access_log": AccessLog()}) as srv, \
            H2Peer(srv.port) as peer:
        index = peer.request("/")
        up = peer.request("/upload", "POST", end=False)  # no content-length: chunked
        peer.send_all(up, BODY)
        stream = peer.request("/stream")
        a, b, c = peer.wait_answers(index, up, stream, timeout=30)
        assert (a.status, a.body) == (200, b"2 0")
        assert b.body == f"2 {len(BODY)}".encode()
        assert c.body == b"z" * 1_000_000 + b"2 0"
        together = [peer.request("/together") for _ in range(10)]
        answers = peer.wait_answers(*together, timeout=30)
    assert [x.body for x in answers] == [b"2 0"] * 10
    wait_for(lambda: len(access_lines(caplog)) >= 13, 10, "13 access-log lines")
    assert any('"GET /stream HTTP/2.0" 200' in line for line in access_lines(caplog))


def test_a_reset_stream_is_http_disconnect_for_its_asgi_app_only() -> None:
    seen: list[str] = []
    waiting = asyncio.Event()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/wait":
            await receive()  # the (empty) body
            waiting.set()
            seen.append((await receive())["type"])  # blocks until the client goes
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"still here"})

    with running_asgi_server(app) as srv, H2Peer(srv.port) as peer:
        sid = peer.request("/wait")
        wait_for(lambda: srv.call(waiting.is_set), 10, "the app waiting on receive()")
        peer.reset(sid)
        wait_for(lambda: srv.call(lambda: list(seen)), 10, "http.disconnect")
        other = peer.request("/other")
        (a,) = peer.wait_answers(other)
    assert seen == ["http.disconnect"]
    assert a.body == b"still here"


def test_no_http2_in_the_config_serves_http11_only() -> None:
    from cymongoose.config import Config

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [environ["SERVER_PROTOCOL"].encode()]

    with running_wsgi_server(app, server_kwargs={"config": Config(http2=False)}) as srv:
        with H2Peer(srv.port) as peer:
            peer.sock.settimeout(10)
            data = peer.sock.recv(4096)
        assert data.startswith(b"HTTP/1.1 505 ")  # "PRI * HTTP/2.0" read as HTTP/1.1


def test_a_stop_lets_streams_in_flight_finish_after_goaway() -> None:
    started = threading.Event()
    release = threading.Event()

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        if environ["PATH_INFO"] == "/slow":
            started.set()
            release.wait(20)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"finished"]

    head = hpack.Encoder().encode([(":method", "GET"), (":path", "/slow"),
                                   (":scheme", "http"), (":authority", "localhost")])
    with running_wsgi_server(app, threads=2) as srv, raw_connection(srv.port) as sock:
        sock.sendall(frame(1, 5, 1, head))  # HEADERS, END_STREAM | END_HEADERS, stream 1
        frames = FrameReader(sock)
        assert started.wait(10)
        srv.server.stop()
        # The GOAWAY comes while the request is still in the app: NO_ERROR, and the last
        # stream taken is ours, so the client knows it will be answered.
        frames.read_until(lambda fs: any(f[0] == 7 for f in fs))
        goaway = next(f for f in frames.frames if f[0] == 7)
        assert goaway[3][:8] == (1).to_bytes(4, "big") + (0).to_bytes(4, "big")
        release.set()
        frames.until_closed()
    data = [f for f in frames.frames if f[0] == 0 and f[2] == 1]
    assert b"".join(f[3] for f in data) == b"finished" and data[-1][1] & 1  # END_STREAM


async def trailers_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    assert "http.response.trailers" in scope["extensions"]
    await receive()
    await send({"type": "http.response.start", "status": 200, "trailers": True,
                "headers": [(b"content-type", b"application/grpc")]})
    await send({"type": "http.response.body", "body": b"part one, ", "more_body": True})
    await send({"type": "http.response.body", "body": b"part two"})
    await send({"type": "http.response.trailers", "headers": [(b"grpc-status", b"0")],
                "more_trailers": True})
    await send({"type": "http.response.trailers", "headers": [(b"grpc-message", b"ok")]})


def test_asgi_trailers_on_h2_and_on_chunked_http11() -> None:
    with running_asgi_server(trailers_app) as srv:
        with H2Peer(srv.port) as peer:
            (a,) = peer.wait_answers(peer.request("/", headers=[("te", "trailers")]))
        assert (a.status, a.body, a.ended) == (200, b"part one, part two", True)
        assert a.trailers == [(b"grpc-status", b"0"), (b"grpc-message", b"ok")]
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nTE: trailers\r\n\r\n")
            data = b""
            while not data.endswith(b"grpc-message: ok\r\n\r\n"):
                chunk = sock.recv(4096)
                assert chunk, data
                data += chunk
    assert data.startswith(b"HTTP/1.1 200 ") and b"Transfer-Encoding: chunked" in data
    assert data.endswith(b"0\r\ngrpc-status: 0\r\ngrpc-message: ok\r\n\r\n")


def test_h2c_over_a_unix_socket_is_a_local_client(tmp_path: Path) -> None:
    # A stream has an id of its own; the servers know its connection's from MG_EV_ACCEPT.
    def wsgi(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [f"{environ['REMOTE_ADDR']} {environ['SERVER_PROTOCOL']}".encode()]

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body",
                    "body": f"{scope['client'][0]} {scope['http_version']}".encode()})

    for kind in ("wsgi", "asgi"):
        path = tmp_path / f"{kind}.sock"
        unix = socket.socket(socket.AF_UNIX)
        unix.bind(str(path))
        unix.listen(16)
        try:
            fd = unix.fileno()
            if kind == "wsgi":
                out = wsgi_over(wsgi, fd, path)
            else:
                with running_asgi_server(asgi) as run:
                    run.call(lambda fd=fd: run.server.listen_socket(fd))
                    out = curl_unix(path)
        finally:
            unix.close()
        assert out == ("127.0.0.1 HTTP/2.0" if kind == "wsgi" else "127.0.0.1 2"), kind


def curl_unix(path: Path) -> str:
    return subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "--unix-socket",
                           str(path), "http://localhost/"], capture_output=True, text=True,
                          timeout=20, check=True, env=tool_env()).stdout


def wsgi_over(app: Any, fd: int, path: Path) -> str:
    """curl_unix() against a WSGIServer listening on the Unix socket `fd` only."""
    from cymongoose.wsgi import WSGIServer

    server = WSGIServer(app, threads=2)
    server.listen_socket(fd)
    thread = threading.Thread(target=server.run, kwargs={"poll_ms": 20}, daemon=True)
    thread.start()
    try:
        return curl_unix(path)
    finally:
        server.stop()
        thread.join(15)
        server.close()
