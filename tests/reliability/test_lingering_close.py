"""Lingering close (RFC 9112 §9.6): a response that ends its connection reaches the client
whole, also when the client sends a byte more after the server decided to close.

The reproduction: a client with a small receive buffer sends a request that asks for the
connection to close (Connection: close, or HTTP/1.0), waits until the server's side of the
connection has sent its FIN (read from /proc/net/tcp: the server is done with it), then sends
the CRLF old clients add after a body, and only then reads. A server that closed its socket
answers that CRLF with a reset, and the client's kernel throws away the part of the response
not yet read: 4 KiB of 200 KB arrived before lingering. Then the limits: a lingering
connection still ends when the client stays quiet, keeps trickling, or floods.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest
from support.waiting import wait_for

from .support import Server, cm

pytestmark = pytest.mark.timeout(90)

BIG = 200_000
UPLOAD = 20_000

APPS = '''
import os

BIG = b"r" * BIG_SIZE
FILES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "files")


def raw(conn, ev, data):
    from cymongoose import MG_EV_HTTP_MSG
    if ev == MG_EV_HTTP_MSG:
        if data.uri.startswith("/files/"):
            conn.serve_dir(data, os.path.dirname(FILES))
        else:
            conn.reply(200, BIG)


def wsgi(environ, start_response):
    while environ["wsgi.input"].read(65536):
        pass
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(BIG)))])
    return [BIG]


async def asgi(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", str(len(BIG)).encode())]})
    await send({"type": "http.response.body", "body": BIG})
'''.replace("BIG_SIZE", str(BIG))


def _tcp_state(local_port: int, remote_port: int) -> str | None:
    """The state of the loopback socket local_port -> remote_port (/proc/net/tcp), or None
    once it is gone."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if (int(fields[1].rsplit(":", 1)[1], 16) == local_port
                and int(fields[2].rsplit(":", 1)[1], 16) == remote_port):
            return fields[3]
    return None


def _server_sent_fin(port: int, client_port: int) -> bool:
    return _tcp_state(port, client_port) in ("04", "05", "07", None)  # FIN_WAIT1/2, CLOSE


def _late_byte_exchange(port: int, request: bytes) -> bytes:
    """Send `request`, wait for the server's FIN, send a late CRLF, then read everything."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the answer waits in queues
        s.settimeout(20)
        s.connect(("127.0.0.1", port))
        s.sendall(request)
        client_port = s.getsockname()[1]
        wait_for(lambda: _server_sent_fin(port, client_port), 20,
                 "_server_sent_fin(port, client_port) (no FIN)")
        s.sendall(b"\r\n")
        got = b""
        try:
            while data := s.recv(65536):
                got += data
        except ConnectionResetError:
            got += b"<reset>"
        return got


def _post(path: str, version: str = "1.1", close: bool = True) -> bytes:
    return (f"POST {path} HTTP/{version}\r\nHost: x\r\nContent-Length: {UPLOAD}\r\n"
            + ("Connection: close\r\n" if close else "") + "\r\n").encode() + b"u" * UPLOAD


def _body_of(answer: bytes) -> bytes:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), answer[:300]
    return body


@pytest.fixture
def apps(tmp_path: Path) -> Path:
    (tmp_path / "linger_apps.py").write_text(APPS)
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "big.bin").write_bytes(bytes(range(256)) * (BIG // 256))
    return tmp_path


@pytest.mark.parametrize("interface", ["raw", "wsgi", "asgi"])
def test_the_whole_answer_arrives_despite_a_late_byte(apps: Path, interface: str) -> None:
    from support.cli_run import CLI
    from support.ports import free_port

    port = free_port()
    static = ["--static", "/s=files"] if interface == "wsgi" else []
    # The server keeps this environment: under `make asan-test` it needs the ASan preload.
    env = {k: v for k, v in os.environ.items() if not k.startswith("CYMONGOOSE_")}
    cli = CLI(apps, f"linger_apps:{interface}", "--port", str(port), *static, env=env)
    try:
        cli.wait_http(port, "/warm-up")
        big_file = (apps / "files" / "big.bin").read_bytes()
        # HTTP/1.1 with Connection: close, and HTTP/1.0 (closes without keep-alive).
        for request in (_post("/a"), _post("/b", "1.0", close=False)):
            assert _body_of(_late_byte_exchange(port, request)) == b"r" * BIG
        static_path = {"raw": "/files/big.bin", "wsgi": "/s/big.bin"}.get(interface)
        if static_path is not None:  # a static file: serve_dir(), and --static (sendfile)
            answer = _late_byte_exchange(port, f"GET {static_path} HTTP/1.1\r\nHost: x\r\n"
                                               "Connection: close\r\n\r\n".encode())
            assert _body_of(answer) == big_file
    finally:
        assert cli.stop() == 0, cli.err


def _answered_then(server: Server, port: int) -> tuple[socket.socket, float]:
    """A request that closes its connection, its whole answer read up to the server's FIN;
    the client's socket stays open."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    got = b""
    while data := s.recv(65536):
        got += data
    assert got.startswith(b"HTTP/1.1 200"), got
    return s, time.monotonic()


def _closed(server: Server) -> bool:
    return server.connection_count() == 0


def test_a_quiet_client_is_closed_after_linger_timeout() -> None:
    with Server(linger_timeout_ms=300, linger_time_ms=60_000) as server:
        s, t0 = _answered_then(server, server.port)
        with s:
            assert server.connection_count() == 1  # lingering: still counted
            wait_for(lambda: _closed(server), 10,
                     "_closed(server)")  # not the 60 s of linger_time_ms
            assert time.monotonic() - t0 >= 0.25  # and not before linger_timeout_ms


def test_a_trickling_client_is_closed_after_linger_time() -> None:
    with Server(linger_timeout_ms=2000, linger_time_ms=500) as server:
        s, _ = _answered_then(server, server.port)
        stop = threading.Event()

        def trickle() -> None:  # a byte every 20 ms: the quiet timeout never runs out
            while not stop.wait(0.02):
                try:
                    s.send(b"x")
                except OSError:
                    return

        sender = threading.Thread(target=trickle, daemon=True)
        sender.start()
        try:
            wait_for(lambda: _closed(server), 10, "_closed(server)")
        finally:
            stop.set()
            sender.join(5)
            s.close()


def test_a_flooding_client_is_closed_once_it_sent_more_than_a_request_holds() -> None:
    # 64 + 1024 bytes is the most a request may hold here: 64 KiB more is a flood.
    with Server(linger_timeout_ms=60_000, linger_time_ms=60_000, max_header_size=64,
                max_body_size=1024) as server:
        s, _ = _answered_then(server, server.port)
        with s:
            try:
                s.sendall(b"x" * 65536)
            except OSError:
                pass  # closed under the flood: what the test waits for
            wait_for(lambda: _closed(server), 10, "_closed(server)")


def test_a_client_that_closes_ends_the_linger_at_once() -> None:
    with Server(linger_timeout_ms=60_000, linger_time_ms=60_000) as server:
        s, _ = _answered_then(server, server.port)
        s.close()
        wait_for(lambda: _closed(server), 10, "_closed(server)")


def test_lingering_can_be_turned_off() -> None:
    with Server(linger_timeout_ms=0) as server:
        s, _ = _answered_then(server, server.port)
        with s:
            wait_for(lambda: _closed(server), 10, "_closed(server)")
        assert cm.Manager().http_limits["linger_time_ms"] == 30_000  # the default stays


def test_a_refused_client_that_keeps_trickling_is_closed_within_linger_timeout() -> None:
    # A client trickling a request head gets its 408 after header_timeout_ms; lingering after
    # a refusal then ends linger_timeout_ms after the 408 is out, however it keeps trickling
    # (it held its slot for linger_time_ms, here 60 s, before).
    with Server(header_timeout_ms=500, linger_timeout_ms=1000, linger_time_ms=60_000) as server:
        s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        stop = threading.Event()

        def trickle() -> None:  # a byte every 50 ms: neither quiet nor a flood
            while not stop.wait(0.05):
                try:
                    s.send(b"x")
                except OSError:
                    return

        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        sender = threading.Thread(target=trickle, daemon=True)
        sender.start()
        try:
            got = b""
            while b"\r\n\r\n" not in got:
                data = s.recv(4096)
                assert data, got
                got += data
            assert got.startswith(b"HTTP/1.1 408"), got
            # Lingering with the client still sending, then closed: not after 60 s.
            wait_for(lambda: _closed(server), 10, "_closed(server) (still lingering)")
        finally:
            stop.set()
            sender.join(5)
            s.close()
