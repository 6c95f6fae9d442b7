"""Manager.set_static_mounts(): the guard answers requests under a mount itself, in C, with
no handler call (the answers' HTTP is static_file_response()'s, compared with nginx in
tests/adapters/cli/test_static_answers.py). Here: the arguments, HEAD, keep-alive with
several requests on one connection, pipelining (a large file pumped by sendfile between two
small ones and an app request), HTTP/1.0, the path rules, compression of a file without a
sibling, and the metrics and refusal_handler reports."""

from __future__ import annotations

import gzip
import mimetypes
import os
import socket
from pathlib import Path
from typing import Any

import pytest
from support.http_client import HttpConnection, get, get_as_sent
from support.poll_thread import ServerThread
from support.waiting import wait_for

from cymongoose import (
    MG_EV_CLOSE,
    MG_EV_HTTP_MSG,
    MG_EV_POLL,
    MG_EV_READ,
    MG_EV_WRITE,
    Connection,
    Manager,
)
from cymongoose._mongoose import HeaderBlock

pytestmark = pytest.mark.timeout(60)

BIG = bytes(range(256)) * 1200  # 300 KiB: past the inline size, pumped by sendfile(2)


class Handler:
    """Answers /app; records every event it gets for a connection (no MG_EV_POLL)."""

    def __init__(self) -> None:
        self.events: list[int] = []
        self.uris: list[str] = []

    def __call__(self, conn: Connection, ev: int, data: Any) -> None:
        if ev != MG_EV_POLL:
            self.events.append(ev)
        if ev == MG_EV_HTTP_MSG:
            self.uris.append(data.uri)
            conn.reply(200, b"app:" + data.uri.encode())


@pytest.fixture
def root(tmp_path: Path) -> Path:
    pub = tmp_path / "pub"
    (pub / "dir").mkdir(parents=True)
    (pub / "empty").mkdir()
    (pub / "a.txt").write_bytes(b"hello static\n")
    (pub / "a b.txt").write_bytes(b"with a space\n")
    (pub / "big.png").write_bytes(BIG)
    (pub / "dir" / "index.html").write_bytes(b"<p>index</p>\n")
    (pub / "page.txt").write_bytes(b"compress me " * 200)
    (tmp_path / "secret.txt").write_bytes(b"outside\n")
    (pub / "out.txt").symlink_to(tmp_path / "secret.txt")
    return pub


@pytest.fixture
def served(server_thread: Any, root: Path) -> tuple[ServerThread, int, Handler]:
    handler = Handler()
    st = server_thread(handler)
    st.manager.set_static_mounts([("/s/", str(root))], headers=[("X-Static", "yes")])
    port = st.listen()
    st.start()
    return st, port, handler


def test_arguments_are_checked(root: Path) -> None:
    m = Manager(None)
    try:
        assert m.static_mounts == ()
        with pytest.raises(TypeError, match="list of"):
            m.set_static_mounts("/s=" + str(root))
        with pytest.raises(TypeError, match="pair"):
            m.set_static_mounts([("/s",)])
        with pytest.raises(TypeError, match="url_prefix must be a str"):
            m.set_static_mounts([(b"/s", str(root))])
        with pytest.raises(TypeError, match="directory must be"):
            m.set_static_mounts([("/s", 3)])
        for bad in ("s", "/a?b", "/a b", "/a#b", "/a%20"):
            with pytest.raises(ValueError, match="url_prefix"):
                m.set_static_mounts([(bad, str(root))])
        with pytest.raises(ValueError, match="not a directory"):
            m.set_static_mounts([("/s", str(root / "a.txt"))])
        with pytest.raises(ValueError, match="not a directory"):
            m.set_static_mounts([("/s", str(root / "missing"))])
        with pytest.raises(ValueError, match="twice"):
            m.set_static_mounts([("/s", str(root)), ("/s/", str(root / "dir"))])
        with pytest.raises(ValueError, match="Connection"):
            m.set_static_mounts([("/s", str(root))], headers=[("Connection", "close")])
        with pytest.raises(ValueError, match="framing"):
            m.set_static_mounts([("/s", str(root))], headers=[("Content-Length", "1")])
        assert m.static_mounts == ()  # nothing was set by a refused call
        m.set_static_mounts([("/s/", root), ("/", root / "dir")],
                            headers=HeaderBlock([("Server", "x")]))
        assert m.static_mounts == (("/s", os.path.realpath(root)),
                                   ("/", os.path.realpath(root / "dir")))
        m.set_static_mounts(None)
        assert m.static_mounts == ()
        m.set_static_mounts([("/s", root)])
        m.set_static_mounts([])
        assert m.static_mounts == ()
    finally:
        m.close()


def test_no_handler_call_and_keep_alive(served: tuple[ServerThread, int, Handler]) -> None:
    st, port, handler = served
    with HttpConnection(port) as c:
        for _ in range(5):
            r = c.request("GET", "/s/a.txt")
            assert r.status == 200 and r.body == b"hello static\n"
            assert r.header("x-static") == "yes" and r.header("date")
            assert r.header("content-type") == "text/plain; charset=utf-8"
            assert c.keep_alive
        r = c.request("HEAD", "/s/big.png")
        assert r.status == 200 and r.body == b"" and r.header("content-length") == str(len(BIG))
        r = c.request("GET", "/s/big.png")
        assert r.body == BIG
        r = c.request("GET", "/s/big.png", [("Range", "bytes=1000-1999")])
        assert r.status == 206 and r.body == BIG[1000:2000]
    wait_for(lambda: MG_EV_CLOSE in handler.events, 10, "the connection's close")
    # The handler saw the connection open and close, and nothing of its requests.
    assert not {MG_EV_HTTP_MSG, MG_EV_READ, MG_EV_WRITE} & set(handler.events), handler.events
    assert handler.uris == []
    assert get(port, "/app").body == b"app:/app"  # other paths are the handler's


def test_pipelined_with_an_app_request(served: tuple[ServerThread, int, Handler]) -> None:
    _, port, handler = served
    with HttpConnection(port) as c:
        c.send_raw(b"GET /s/a.txt HTTP/1.1\r\nHost: x\r\n\r\n"
                   b"GET /s/big.png HTTP/1.1\r\nHost: x\r\n\r\n"
                   b"GET /app HTTP/1.1\r\nHost: x\r\n\r\n"
                   b"HEAD /s/dir/ HTTP/1.1\r\nHost: x\r\n\r\n"
                   b"GET /s/dir HTTP/1.1\r\nHost: x\r\n\r\n")
        bodies = []
        for method in ("GET", "GET", "GET", "HEAD", "GET"):
            r = c.read_response(method, "1.1")
            bodies.append((r.status, r.body))
        assert bodies == [(200, b"hello static\n"), (200, BIG), (200, b"app:/app"),
                          (200, b""), (301, b"Moved Permanently\n")]
        r = c.request("GET", "/s/a.txt")  # and the connection goes on
        assert r.body == b"hello static\n"
    assert handler.uris == ["/app"]


def _raw_exchange(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data)
        out = b""
        while True:
            piece = s.recv(1 << 16)
            if not piece:
                return out
            out += piece


def test_http10(served: tuple[ServerThread, int, Handler]) -> None:
    _, port, _ = served
    # Without keep-alive: the answer, then the server closes (the read ends).
    out = _raw_exchange(port, b"GET /s/big.png HTTP/1.0\r\n\r\n")
    head, _, body = out.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and b"Connection: close" in head
    assert body == BIG
    with HttpConnection(port) as c:
        c.send_raw(b"GET /s/a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        r = c.read_response("GET", "1.0", [("Connection", "keep-alive")])
        assert r.body == b"hello static\n" and r.header("connection") == "keep-alive"
        c.send_raw(b"GET /s/a.txt HTTP/1.0\r\n\r\n")
        r = c.read_response("GET", "1.0")
        assert r.body == b"hello static\n" and r.header("connection") == "close"
        assert c.server_closed()


def test_paths(served: tuple[ServerThread, int, Handler], root: Path) -> None:
    _, port, _ = served
    assert get_as_sent(port, "/s/a%20b.txt").body == b"with a space\n"
    assert get_as_sent(port, "/s/%61.txt").body == b"hello static\n"
    for target in ("/s/out.txt", "/s/../secret.txt", "/s/%2e%2e/secret.txt", "/s/empty/",
                   "/s/a.txt/", "/s/missing", "/s/dir/index.html/"):
        r = get_as_sent(port, target)
        assert r.status == 404 and b"outside" not in r.body, target
    r = get_as_sent(port, "/s/empty?x=1")
    assert r.status == 301 and r.header("location") == "/s/empty/?x=1"
    r = get_as_sent(port, "/s/a%20b%C3%A9")  # a missing name, still decoded
    assert r.status == 404
    (root / "d é").mkdir()
    r = get_as_sent(port, "/s/d%20%C3%A9")
    assert r.status == 301 and r.header("location") == "/s/d%20%C3%A9/"
    assert get_as_sent(port, "/s").status == 301
    with HttpConnection(port) as c:
        r = c.request("DELETE", "/s/a.txt")
        assert r.status == 405 and r.header("allow") == "GET, HEAD"
        r = c.request("POST", "/s/a.txt", body=b"data")  # a body: answered, then closed
        assert r.status == 405 and r.header("connection") == "close"


def test_compression_of_a_file_without_sibling(server_thread: Any, root: Path) -> None:
    handler = Handler()
    st = server_thread(handler)
    st.manager.set_static_mounts([("/s", str(root))])
    st.manager.set_compression("gzip", min_length=100)
    port = st.listen()
    st.start()
    plain = (root / "page.txt").read_bytes()
    with HttpConnection(port) as c:
        r = c.request("GET", "/s/page.txt", [("Accept-Encoding", "gzip")])
        assert r.status == 200 and r.header("content-encoding") == "gzip"
        assert r.header("vary") == "Accept-Encoding"
        assert (r.header("etag") or "").startswith('W/"')
        assert r.header("content-length") is None and gzip.decompress(r.body) == plain
        r = c.request("GET", "/s/page.txt")
        assert r.body == plain and r.header("vary") == "Accept-Encoding"
        r = c.request("HEAD", "/s/page.txt", [("Accept-Encoding", "gzip")])
        assert r.header("content-encoding") is None
        r = c.request("GET", "/s/a.txt", [("Accept-Encoding", "gzip")])  # under min_length
        assert r.body == b"hello static\n" and r.header("content-encoding") is None
        # image/png is not on the list of types compressed
        r = c.request("GET", "/s/big.png", [("Accept-Encoding", "gzip")])
        assert r.body == BIG and r.header("content-encoding") is None
    # HTTP/1.0: compressed, ended by the close.
    out = _raw_exchange(port, b"GET /s/page.txt HTTP/1.0\r\nAccept-Encoding: gzip\r\n\r\n")
    head, _, body = out.partition(b"\r\n\r\n")
    assert b"Content-Encoding: gzip" in head and b"chunked" not in head
    assert gzip.decompress(body) == plain
    assert handler.uris == []


def test_metrics_and_refusal_handler(server_thread: Any, root: Path) -> None:
    reported: list[tuple[int, str, str, int]] = []
    st = server_thread(Handler())
    st.manager.set_static_mounts([("/s", str(root))])
    st.manager.refusal_handler = lambda conn, status, reason, line, size: reported.append(
        (status, reason, line, size))
    port = st.listen()
    st.start()
    assert get(port, "/s/a.txt").status == 200
    assert get(port, "/s/nope").status == 404
    wait_for(lambda: len(reported) == 2, 10, "both answers reported")
    assert reported == [(200, "static file", "GET /s/a.txt HTTP/1.1", 13),
                        (404, "static file", "GET /s/nope HTTP/1.1", 10)]
    requests = st.manager.metrics()["requests"]
    assert requests[200] >= 1 and requests[404] >= 1


def test_content_types(served: tuple[ServerThread, int, Handler], root: Path) -> None:
    _, port, _ = served
    xml = mimetypes.guess_type("x.xml")[0] or "application/octet-stream"
    xml += "; charset=utf-8" if xml.startswith("text/") else ""
    # Mongoose's table first (serve_dir's), then Python's mimetypes table for what it does
    # not know (as the --static middleware had it), else application/octet-stream.
    for name, ctype in (("x.html", "text/html; charset=utf-8"), ("x.png", "image/png"),
                        ("x.ico", "image/x-icon"), ("x.TXT", "text/plain; charset=utf-8"),
                        ("x.xml", xml), ("x.zzq", "application/octet-stream"),
                        ("noext", "application/octet-stream")):
        (root / name).write_bytes(b"x")
        assert get(port, f"/s/{name}").header("content-type") == ctype, name
