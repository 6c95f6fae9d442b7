"""Connection.http_sendfile(): file bodies of responses begun with http_begin(), sent with
sendfile(2) from the server's own duplicate of the descriptor, which is always given back."""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.http_client import HttpConnection
from support.resources import fd_count
from support.waiting import wait_for

from cymongoose import MG_EV_HTTP_HDRS, Connection

pytestmark = pytest.mark.timeout(30)

SIZE = 300 * 1024 + 7  # larger than one send burst through the send buffer (16 KiB pieces)
DATA = random.Random(7).randbytes(SIZE)


@pytest.fixture
def data_file(tmp_path: Any) -> Iterator[str]:
    path = tmp_path / "body.bin"
    path.write_bytes(DATA)
    yield str(path)


def send_file(path: str, offset: int = 0, count: int | None = None,
              length: int | None = None, after: Callable[[Connection], None] | None = None
              ) -> Callable[[Connection], None]:
    """A route sending `path` with http_sendfile(offset, count), closing its own descriptor
    at once (the server keeps a duplicate)."""
    def route(conn: Connection) -> None:
        headers = [] if length is None else [("Content-Length", str(length))]
        conn.http_begin(200, headers)
        fd = os.open(path, os.O_RDONLY)
        try:
            if count is None:
                conn.http_sendfile(fd, offset)
            else:
                conn.http_sendfile(fd, offset, count)
        finally:
            os.close(fd)
        if after is not None:
            after(conn)
        conn.http_end()
    return route


def serve(server_thread: Any, routes: dict[str, Callable[[Connection], None]]
          ) -> tuple[int, list[str]]:
    errors: list[str] = []

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_HDRS:
            try:
                routes[msg.uri](conn)
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                conn.close()

    st = server_thread(handler)
    port = st.listen(stream_body=True)
    st.start()
    return port, errors


def test_whole_file_range_and_chunked_bodies_arrive_exactly(
        server_thread: Any, data_file: str) -> None:
    port, errors = serve(server_thread, {
        "/whole": send_file(data_file, length=SIZE),
        "/default-count": send_file(data_file, offset=SIZE - 5000, length=5000),
        "/range": send_file(data_file, offset=1000, count=70000, length=70000),
        "/chunked": send_file(data_file, offset=3, count=SIZE - 3),
        "/empty": send_file(data_file, offset=10, count=0, length=0),
    })
    with HttpConnection(port) as c:
        whole = c.request("GET", "/whole")
        assert whole.header("content-length") == str(SIZE)
        assert whole.body == DATA
        assert c.request("GET", "/default-count").body == DATA[-5000:]
        assert c.request("GET", "/range").body == DATA[1000:71000]
        chunked = c.request("GET", "/chunked")
        assert chunked.header("transfer-encoding") == "chunked"
        assert chunked.body == DATA[3:]
        assert c.request("GET", "/empty").body == b""
        assert c.keep_alive
    assert errors == []


def test_writes_around_a_file_keep_their_order(server_thread: Any, data_file: str) -> None:
    def route(conn: Connection) -> None:
        conn.http_begin(200, [("Content-Length", str(3 + 100 + 4))])
        conn.http_write(b"pre")
        fd = os.open(data_file, os.O_RDONLY)
        try:
            conn.http_sendfile(fd, 50, 100)  # small: sent before the call returns
        finally:
            os.close(fd)
        conn.http_write(b"post")
        assert conn.http_end() is True

    port, errors = serve(server_thread, {"/": route})
    with HttpConnection(port) as c:
        assert c.request("GET", "/").body == b"pre" + DATA[50:150] + b"post"
    assert errors == []


def test_file_still_being_sent_refuses_writes_and_end_waits_for_it(
        server_thread: Any, data_file: str) -> None:
    seen: list[str] = []

    def after(conn: Connection) -> None:
        try:
            conn.http_write(b"x")
        except RuntimeError:
            seen.append("write refused")
        seen.append(f"started={conn.response_started}")

    port, errors = serve(server_thread, {"/": send_file(data_file, length=SIZE, after=after)})
    with HttpConnection(port) as c:
        assert c.request("GET", "/").body == DATA  # http_end() came before the file's end
        assert c.request("GET", "/").body == DATA
    assert seen == ["write refused", "started=True"] * 2
    assert errors == []


def test_misuse_is_refused(server_thread: Any, data_file: str) -> None:
    raised: list[str] = []

    def route(conn: Connection) -> None:
        fd = os.open(data_file, os.O_RDONLY)
        try:
            try:
                conn.http_sendfile(fd)
            except RuntimeError:
                raised.append("before begin")
            conn.http_begin(200, [("Content-Length", "10")])
            for kwargs, exc in (({"offset": -1, "count": 5}, ValueError),
                                ({"offset": 0, "count": 11}, ValueError),
                                ({"offset": 0, "count": -5}, ValueError)):
                try:
                    conn.http_sendfile(fd, **kwargs)
                except exc:
                    raised.append(exc.__name__)
            r, w = os.pipe()
            os.close(r)
            os.close(w)
            try:
                conn.http_sendfile(r, 0, 5)  # a closed descriptor
            except OSError:
                raised.append("OSError")
            conn.http_sendfile(fd, 0, 10)
        finally:
            os.close(fd)
        assert conn.http_end() is True

    port, errors = serve(server_thread, {"/": route})
    with HttpConnection(port) as c:
        assert c.request("GET", "/").body == DATA[:10]
    assert raised == ["before begin", "ValueError", "ValueError", "ValueError", "OSError"]
    assert errors == []


def test_file_shorter_than_promised_closes_the_connection(
        server_thread: Any, data_file: str) -> None:
    port, errors = serve(server_thread, {
        "/": send_file(data_file, offset=SIZE - 10, count=50, length=50)})
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    # The close tells the client the body is incomplete. How much of what was queued gets
    # out first is not promised (the connection is closed at once, not drained), but never
    # a byte that is not the file's.
    assert (b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n" + DATA[-10:]).startswith(got)
    assert errors == []


def test_no_descriptor_leaks_over_many_requests(server_thread: Any, data_file: str) -> None:
    port, errors = serve(server_thread, {
        "/": send_file(data_file, offset=100, count=20000, length=20000),
        "/chunked": send_file(data_file, count=SIZE)})
    with HttpConnection(port) as c:
        c.request("GET", "/")  # warm-up: anything opened once and kept is not a leak
        before = fd_count()
        for i in range(60):
            resp = c.request("GET", "/" if i % 2 else "/chunked")
            assert resp.body == (DATA[100:20100] if i % 2 else DATA)
        after = fd_count()
    assert after == before, f"{before} descriptors before, {after} after"
    assert errors == []


def test_descriptor_is_given_back_when_the_client_leaves_mid_file(
        server_thread: Any, tmp_path: Any) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(1 << 20) * 16)  # 16 MiB: far more than socket buffers hold
    def route(conn: Connection) -> None:
        send_file(str(big), length=16 << 20)(conn)

    port, errors = serve(server_thread, {"/": route})
    baseline = fd_count()
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 200 OK\r\n")
        # Our socket is closed: the server's socket and file duplicate must go too.
    wait_for(lambda: fd_count() <= baseline, 5,
             lambda: f"fd_count() <= baseline ({(baseline, fd_count())})")
    assert errors == []
