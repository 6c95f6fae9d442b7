"""HTTP client side: requests from a Manager to a real Python HTTP server."""

from __future__ import annotations

import base64
import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from support.waiting import wait_for

from cymongoose import MG_EV_CONNECT, MG_EV_ERROR, MG_EV_HTTP_MSG, Connection, Manager

pytestmark = pytest.mark.timeout(30)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        auth = self.headers.get("Authorization", "")
        body = f"path={self.path} auth={auth}".encode() + b"\x00end"
        self.send_response(203 if self.path == "/odd" else 200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("X-Server", "stdlib")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def stdlib_server() -> Iterator[int]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def _fetch(port: int, path: str, auth: tuple[str, str] | None = None) -> dict[str, Any]:
    got: dict[str, Any] = {}

    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_CONNECT:
            conn.send(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            if auth:
                conn.http_basic_auth(*auth)
            conn.send("\r\n")
        elif ev == MG_EV_HTTP_MSG:
            got.update(status=data.status(), method=data.method, uri=data.uri,
                       proto=data.proto, body=data.body_bytes,
                       server=data.header("x-server"),
                       charset=data.header_var("Content-Type", "charset"))
            conn.close()
        elif ev == MG_EV_ERROR:
            got["error"] = data

    with Manager() as mgr:
        client = mgr.connect(f"http://127.0.0.1:{port}{path}", handler)
        assert client.is_client
        wait_for(lambda: "status" in got or "error" in got, 5.0,
                 '"status" in got or "error" in got', manager=mgr)
    return got


def test_client_request_and_parsed_response(stdlib_server: int) -> None:
    got = _fetch(stdlib_server, "/hello?x=1")
    assert got["status"] == 200
    assert (got["method"], got["uri"], got["proto"]) == ("HTTP/1.1", "200", "OK")
    assert got["body"] == b"path=/hello?x=1 auth=\x00end"
    assert got["server"] == "stdlib" and got["charset"] == "utf-8"
    assert _fetch(stdlib_server, "/odd")["status"] == 203


def test_basic_auth_header(stdlib_server: int) -> None:
    got = _fetch(stdlib_server, "/secret", ("alice", "s3cr:t é"))
    token = base64.b64encode("alice:s3cr:t é".encode()).decode()
    assert got["body"] == f"path=/secret auth=Basic {token}".encode() + b"\x00end"


def test_basic_auth_refuses_colon_in_username(manager: Manager) -> None:
    conn = manager.listen("tcp://127.0.0.1:0")
    with pytest.raises(ValueError, match="username"):
        conn.http_basic_auth("a:b", "pw")


def test_client_against_our_own_server() -> None:
    def server(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            conn.reply(200, data.body_bytes + b"!", {"X-Echo": data.header("X-In", "")})

    got: dict[str, Any] = {}

    def client(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_CONNECT:
            conn.send(b"POST /e HTTP/1.1\r\nHost: x\r\nX-In: abc\r\nContent-Length: 3\r\n\r\n"
                      b"a\x00b")
        elif ev == MG_EV_HTTP_MSG:
            got.update(status=data.status(), body=data.body_bytes, echo=data.header("X-Echo"))

    with Manager(server) as mgr:
        port = mgr.listen("http://127.0.0.1:0").local_addr[1]
        mgr.connect(f"http://127.0.0.1:{port}", client)
        wait_for(lambda: "status" in got, 5.0, '"status" in got', manager=mgr)
    assert got == {"status": 200, "body": b"a\x00b!", "echo": "abc"}
