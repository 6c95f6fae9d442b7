"""Streamed request bodies (`listen(..., stream_body=True)`): MG_EV_HTTP_HDRS as soon as the
head is in, `body_read()`/`body_pending`/`body_complete`, de-chunking, back-pressure, and
what happens to bodies nobody reads, malformed framing and the limits."""

from __future__ import annotations

import hashlib
import re
import socket
import threading
import time
from typing import Any

import pytest
from support.http_client import HttpConnection
from support.patterns import pattern_chunks, pattern_sha256
from support.waiting import recv_polling, wait_for

from cymongoose import (
    MG_EV_CLOSE,
    MG_EV_HTTP_HDRS,
    MG_EV_HTTP_MSG,
    MG_EV_POLL,
    MG_EV_READ,
    Connection,
    Manager,
    RequestBodyTooLarge,
)

pytestmark = pytest.mark.timeout(30)

# Reads pause at 256 KiB buffered (http_stream.pxi); one socket read may overshoot it.
BUFFER_BOUND = 384 * 1024


def port_of(listener: Connection) -> int:
    addr = listener.local_addr
    assert addr is not None
    return addr[1]


def listen_stream(mgr: Manager, handler: Any, **limits: Any) -> int:
    return port_of(mgr.listen("http://127.0.0.1:0", handler, stream_body=True, **limits))


def connect(port: int) -> socket.socket:
    """A non-blocking client socket, for tests that poll the server in this thread."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.setblocking(False)
    return s


def answer(conn: Connection, body: bytes) -> None:
    conn.http_begin(200, [("Content-Length", str(len(body)))])
    conn.http_write(body)
    assert conn.http_end() is True


def ok(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def ok_close(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (
        len(body), body)


def closed_by_server(mgr: Manager, sock: socket.socket, timeout: float = 5.0) -> bytes | None:
    """Poll mgr until the server closes `sock`; returns what arrived first (None: still open
    after `timeout`)."""
    got = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        mgr.poll(5)
        try:
            chunk = sock.recv(65536)
        except BlockingIOError:
            continue
        except ConnectionResetError:
            return got
        if not chunk:
            return got
        got += chunk
    return None


class Echo:
    """Handler that reads each streamed body as it arrives (on HDRS, READ and POLL) and
    answers with `<uri>:<body>` once the body is complete; it records every event kind."""

    def __init__(self) -> None:
        self.events: list[int] = []
        self.heads: list[tuple[str, bytes, bool, int]] = []

    def __call__(self, conn: Connection, ev: int, msg: Any) -> None:
        if ev in (MG_EV_HTTP_HDRS, MG_EV_HTTP_MSG):
            self.events.append(ev)
        if ev == MG_EV_HTTP_HDRS:
            self.heads.append((msg.method, msg.uri_bytes, conn.body_complete, conn.body_pending))
            conn.userdata = [msg.uri_bytes]
        if conn.userdata and ev in (MG_EV_HTTP_HDRS, MG_EV_READ, MG_EV_POLL):
            conn.userdata.append(conn.body_read())
            if conn.body_complete and conn.body_pending == 0:
                parts, conn.userdata = conn.userdata, None
                answer(conn, parts[0] + b":" + b"".join(parts[1:]))


def test_hdrs_delivered_before_the_body_and_body_read_takes_what_arrived(
        manager: Manager) -> None:
    events: list[tuple[int, Any]] = []
    box: dict[str, Connection] = {}

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_HDRS:
            box["conn"] = conn
            events.append((ev, (msg.method, msg.uri_bytes, conn.body_complete,
                                conn.body_pending)))
        elif ev == MG_EV_HTTP_MSG:
            events.append((ev, None))

    port = listen_stream(manager, handler)
    with connect(port) as s:
        s.sendall(b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabcde")
        wait_for(lambda: bool(events), 5, "MG_EV_HTTP_HDRS", manager=manager)
        # The head is delivered with half the body: nothing waited for the rest.
        assert events == [(MG_EV_HTTP_HDRS, ("POST", b"/up", False, 5))]
        conn = box["conn"]
        assert conn.body_read(2) == b"ab"
        assert conn.body_pending == 3
        assert conn.body_read(0) == b""
        assert conn.body_read() == b"cde"
        assert (conn.body_pending, conn.body_complete) == (0, False)
        assert conn.body_read() == b""

        s.sendall(b"fghij")
        wait_for(lambda: conn.body_pending == 5, 5, "the rest of the body", manager=manager)
        assert conn.body_complete
        assert conn.body_read(-1) == b"fghij"
        assert conn.body_read() == b""
        answer(conn, b"got 10")
        assert recv_polling(manager, s, ok(b"got 10")) == ok(b"got 10")
    assert [ev for ev, _ in events] == [MG_EV_HTTP_HDRS]  # never MG_EV_HTTP_MSG


def test_request_without_body_is_complete_at_hdrs(manager: Manager) -> None:
    echo = Echo()
    port = listen_stream(manager, echo)
    with connect(port) as s:
        s.sendall(b"GET /q?a=1 HTTP/1.1\r\nHost: x\r\n\r\n"
                  b"POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        want = ok(b"/q:") + ok(b"/e:")
        assert recv_polling(manager, s, want) == want
    assert echo.heads == [("GET", b"/q", True, 0), ("POST", b"/e", True, 0)]
    assert echo.events == [MG_EV_HTTP_HDRS, MG_EV_HTTP_HDRS]


def test_body_read_on_a_buffered_listener_returns_nothing(manager: Manager) -> None:
    seen: list[tuple[bytes, int, bool, bytes]] = []

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            seen.append((conn.body_read(), conn.body_pending, conn.body_complete,
                         msg.body_bytes))
            conn.reply(200, b"ok")

    port = port_of(manager.listen("http://127.0.0.1:0", handler))
    with connect(port) as s:
        s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nxyz")
        wait_for(lambda: bool(seen), 5, "the request", manager=manager)
    # Without stream_body the body is in the message, not behind body_read().
    assert seen == [(b"", 0, True, b"xyz")]


CHUNKED_WIRE = (b"4;name=value\r\nWiki\r\n"
                b"5;flag\r\npedia\r\n"
                b"E;q=\"quoted value\"\r\n in\r\n\r\nchunks.\r\n"
                b"0\r\nX-Trailer: yes\r\nX-Other: \xe9\r\n\r\n")
CHUNKED_BODY = b"Wikipedia in\r\n\r\nchunks."


def test_chunked_body_is_dechunked_extensions_ignored_trailers_dropped(
        manager: Manager) -> None:
    echo = Echo()
    port = listen_stream(manager, echo)
    with connect(port) as s:
        # A pipelined request right after the trailers: they must be consumed exactly.
        s.sendall(b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                  + CHUNKED_WIRE + b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
        want = ok(b"/c:" + CHUNKED_BODY) + ok(b"/next:")
        assert recv_polling(manager, s, want) == want


def test_chunked_body_sent_one_byte_at_a_time(manager: Manager) -> None:
    """Every framing element split at every position: the decoder keeps its state across
    reads, and body_pending never counts framing bytes."""
    echo = Echo()
    pending_seen: list[int] = []

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        pending_seen.append(conn.body_pending)
        echo(conn, ev, msg)

    port = listen_stream(manager, handler)
    with connect(port) as s:
        s.sendall(b"PUT /slow HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        for i in range(len(CHUNKED_WIRE)):
            s.sendall(CHUNKED_WIRE[i:i + 1])
            manager.poll(1)
            manager.poll(0)
        want = ok(b"/slow:" + CHUNKED_BODY)
        assert recv_polling(manager, s, want) == want
    assert max(pending_seen) <= 14  # the largest chunk, never its framing


class Uploader(threading.Thread):
    """Client thread: sends `head` then `size` pattern bytes (plain or chunked), counting
    what sendall() accepted, then reads the response until the server closes."""

    def __init__(self, port: int, size: int, chunked: bool, extra_headers: bytes = b"",
                 piece: int = 1 << 20) -> None:
        super().__init__(name="uploader", daemon=True)
        self.port = port
        self.size = size
        self.chunked = chunked
        self.extra = extra_headers
        self.piece = piece
        self.sent = 0
        self.response = b""
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
                framing = (b"Transfer-Encoding: chunked" if self.chunked
                           else b"Content-Length: %d" % self.size)
                s.sendall(b"POST /big HTTP/1.1\r\nHost: x\r\n%s\r\n%s"
                          b"Connection: close\r\n\r\n" % (framing, self.extra))
                for part in pattern_chunks(self.size, self.piece):
                    s.sendall(b"%x\r\n%s\r\n" % (len(part), part) if self.chunked else part)
                    self.sent += len(part)
                if self.chunked:
                    s.sendall(b"0\r\n\r\n")
                while chunk := s.recv(65536):
                    self.response += chunk
        except BaseException as exc:  # reported by the test
            self.error = exc


@pytest.mark.parametrize("chunked,size", [(False, 64 << 20), (True, 16 << 20)],
                         ids=["content-length-64MiB", "chunked-16MiB"])
def test_large_body_read_slowly_is_bounded_by_back_pressure(
        manager: Manager, chunked: bool, size: int) -> None:
    state: dict[str, Any] = {"conn": None, "reading": False, "max_buffered": 0}
    digest = hashlib.sha256()
    received = [0]

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_HDRS:
            state["conn"] = conn
        if conn is not state["conn"] or ev not in (MG_EV_HTTP_HDRS, MG_EV_READ, MG_EV_POLL):
            return
        state["max_buffered"] = max(state["max_buffered"], conn.recv_len, conn.body_pending)
        if not state["reading"]:
            return
        data = conn.body_read(64 * 1024)  # slow consumer: at most 64 KiB per event
        digest.update(data)
        received[0] += len(data)
        if conn.body_complete and conn.body_pending == 0:
            state["conn"] = None
            answer(conn, digest.hexdigest().encode())

    port = listen_stream(manager, handler, max_body_size=size)
    client = Uploader(port, size, chunked)
    client.start()
    try:
        wait_for(lambda: state["conn"] is not None, 5, "the upload's head", manager=manager)
        # The app does not read at all for a while: the server must stop reading too, so
        # the client blocks instead of our buffer growing.
        stall_end = time.monotonic() + 0.3
        while time.monotonic() < stall_end:
            manager.poll(5)
        sent_during_stall = client.sent
        stall_end = time.monotonic() + 0.1
        while time.monotonic() < stall_end:
            manager.poll(5)
        assert client.sent == sent_during_stall < size, "the client was never held back"
        assert state["max_buffered"] <= BUFFER_BOUND

        state["reading"] = True
        wait_for(lambda: not client.is_alive(), 20, "the upload to finish", manager=manager,
                 poll_ms=0)
    finally:
        client.join(10)
    assert client.error is None, client.error
    assert received[0] == size
    assert state["max_buffered"] <= BUFFER_BOUND, state["max_buffered"]
    want = pattern_sha256(size).encode()
    assert client.response == ok_close(want)


def test_back_pressure_pause_does_not_count_against_body_timeout(manager: Manager) -> None:
    """The app's lag is not the client's fault: a paused body outlives body_timeout_ms."""
    size = 2 << 20
    state: dict[str, Any] = {"conn": None, "reading": False}
    digest = hashlib.sha256()

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_HDRS:
            state["conn"] = conn
        if conn is state["conn"] and state["reading"] and ev in (MG_EV_READ, MG_EV_POLL):
            digest.update(conn.body_read())
            if conn.body_complete and conn.body_pending == 0:
                state["conn"] = None
                answer(conn, digest.hexdigest().encode())

    port = listen_stream(manager, handler, max_body_size=size, body_timeout_ms=150)
    client = Uploader(port, size, chunked=False)
    client.start()
    try:
        wait_for(lambda: state["conn"] is not None, 5, "the upload's head", manager=manager)
        stall_end = time.monotonic() + 0.6  # four body timeouts without reading
        while time.monotonic() < stall_end:
            manager.poll(5)
        assert state["conn"] is not None and not state["conn"].is_closing
        state["reading"] = True
        wait_for(lambda: not client.is_alive(), 10, "the upload to finish", manager=manager)
    finally:
        client.join(10)
    assert client.error is None, client.error
    assert client.response == ok_close(pattern_sha256(size).encode())


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize("size", [10, 1 << 20], ids=["small", "1MiB"])
@pytest.mark.parametrize("read_first", [0, 3], ids=["unread", "partly-read"])
def test_unread_body_is_discarded_and_keep_alive_goes_on(
        server_thread: Any, chunked: bool, size: int, read_first: int) -> None:
    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev != MG_EV_HTTP_HDRS:
            return
        taken = conn.body_read(read_first) if read_first and conn.body_pending else b""
        answer(conn, msg.uri_bytes + b":" + taken)

    st = server_thread(handler)
    port = st.listen(stream_body=True, max_body_size=size)
    st.start()
    body = b"".join(pattern_chunks(size))
    with HttpConnection(port) as c:
        # bytes → Content-Length; a list of pieces → chunked.
        upload: bytes | list[bytes] = [body[:size // 2], body[size // 2:]] if chunked else body
        first = c.request("POST", "/first", body=upload)
        assert first.status == 200
        assert first.body.startswith(b"/first:")
        assert body.startswith(first.body[len(b"/first:"):])
        second = c.request("GET", "/second")
        assert (second.status, second.body) == (200, b"/second:")
        assert c.keep_alive


def test_body_left_unread_while_reads_are_paused_is_discarded_after_the_response(
        manager: Manager) -> None:
    """A response finished while the connection is paused for back-pressure (its app never
    read) must resume reading to discard the rest; the next request is then answered."""
    size = 1 << 20
    box: dict[str, Connection] = {}

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_HDRS:
            if msg.uri == "/ignored":
                box["conn"] = conn  # answered later, body never read
            else:
                answer(conn, b"next")

    port = listen_stream(manager, handler, max_body_size=size)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        done = threading.Event()
        result: list[bytes] = []

        def client() -> None:
            s.sendall(b"POST /ignored HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % size)
            s.sendall(b"\0" * size + b"GET /n HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
            result.append(data)
            done.set()

        th = threading.Thread(target=client, daemon=True)
        th.start()
        wait_for(lambda: "conn" in box and box["conn"].recv_len >= 256 * 1024, 5, "reads to pause",
                 manager=manager)
        answer(box["conn"], b"ignored")
        wait_for(done.is_set, 5, "both responses", manager=manager)
        th.join(5)
    assert result == [ok(b"ignored") + b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n"
                      b"Connection: close\r\n\r\nnext"]


def test_pipelined_requests_with_bodies_are_answered_in_order(server_thread: Any) -> None:
    st = server_thread(Echo())
    port = st.listen(stream_body=True)
    st.start()
    with HttpConnection(port) as c:
        c.send_raw(b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nfirst"
                   b"POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                   b"3;x=y\r\nsec\r\n3\r\nond\r\n0\r\n\r\n"
                   b"PUT /c HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nthird"
                   b"GET /d HTTP/1.1\r\nHost: x\r\n\r\n")
        got = [c.read_response(m, "1.1").body for m in ("POST", "POST", "PUT", "GET")]
    assert got == [b"/a:first", b"/b:second", b"/c:third", b"/d:"]


@pytest.mark.parametrize("bad", [
    b"zz\r\n",  # not a chunk size
    b"5\r\nhelloXX",  # chunk data not followed by CRLF
    b"5\nhello\r\n",  # bare LF
    b"5;\x01\r\nhello\r\n",  # control character in an extension
    b"5 x\r\nhello\r\n",  # junk after the size
    b"10000000000000000\r\n",  # 17 hex digits
    b"0\r\nno colon here\r\n\r\n",  # malformed trailer
    b"0\r\nX-T: a\x00b\r\n\r\n",  # NUL in a trailer
], ids=["size", "data-crlf", "bare-lf", "ext-ctl", "size-junk", "size-long", "trailer",
        "trailer-nul"])
def test_malformed_chunked_framing_mid_stream_closes_only_that_connection(
        manager: Manager, bad: bytes) -> None:
    echo = Echo()
    closed: list[int] = []

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_CLOSE and not conn.is_listening:
            closed.append(conn.id)
        echo(conn, ev, msg)

    port = listen_stream(manager, handler)
    with connect(port) as bad_client, connect(port) as good_client:
        bad_client.sendall(b"POST /bad HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                           b"3\r\nabc\r\n")
        wait_for(lambda: len(echo.heads) == 1, 5, "the head", manager=manager)
        bad_client.sendall(bad)
        # The head was delivered already: no status can be sent any more, only a close.
        assert closed_by_server(manager, bad_client) == b""
        assert len(closed) == 1
        good_client.sendall(b"POST /good HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok")
        want = ok(b"/good:ok")
        assert recv_polling(manager, good_client, want) == want


@pytest.mark.parametrize("bad", [b"zz\r\nhello\r\n0\r\n\r\n", b"5\r\nhelloXX0\r\n\r\n",
                                 b"5\nhello\r\n"], ids=["size", "data-crlf", "bare-lf"])
def test_malformed_chunked_framing_with_the_head_is_400_before_the_handler(
        manager: Manager, bad: bytes) -> None:
    # The broken framing arrives in the head's own read: no handler has seen the request,
    # so it is refused as the buffered path refuses it, and the server goes on.
    echo = Echo()
    port = listen_stream(manager, echo)
    with connect(port) as s:
        s.sendall(b"POST /bad HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + bad)
        answer = closed_by_server(manager, s)
    assert answer.startswith(b"HTTP/1.1 400 "), answer
    assert echo.heads == []
    with connect(port) as s:
        s.sendall(b"POST /good HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok")
        want = ok(b"/good:ok")
        assert recv_polling(manager, s, want) == want


def test_body_read_after_broken_framing_raises(manager: Manager) -> None:
    raised: list[BaseException] = []
    box: dict[str, Connection] = {}

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_HDRS:
            box["conn"] = conn
        elif ev == MG_EV_READ and conn is box.get("conn") and conn.is_closing:
            try:
                conn.body_read()
            except ConnectionResetError as exc:
                raised.append(exc)

    port = listen_stream(manager, handler)
    with connect(port) as s:
        s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        wait_for(lambda: "conn" in box, 5, "the head", manager=manager)
        s.sendall(b"xyz\r\n")
        assert closed_by_server(manager, s) == b""
    assert len(raised) == 1


def test_content_length_over_max_body_size_is_413_before_the_handler(
        manager: Manager) -> None:
    echo = Echo()
    port = listen_stream(manager, echo, max_body_size=100)
    with connect(port) as s:
        s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n")
        got = closed_by_server(manager, s)
    assert got is not None and got.startswith(b"HTTP/1.1 413 ")
    assert b"Connection: close\r\n" in got
    assert echo.events == []
    # A body of exactly the limit is allowed.
    with connect(port) as s:
        s.sendall(b"POST /max HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + b"m" * 100)
        want = ok(b"/max:" + b"m" * 100)
        assert recv_polling(manager, s, want) == want
    assert echo.events == [MG_EV_HTTP_HDRS]


class BodyReader:
    """Reads each streamed body as it arrives and keeps what body_read() raised; with
    `begin`, starts its response as soon as it has the head."""

    def __init__(self, begin: bool = False) -> None:
        self.begin = begin
        self.conns: list[Connection] = []
        self.raised: list[Exception] = []

    def __call__(self, conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_HDRS:
            self.conns.append(conn)
            if self.begin:
                conn.http_begin(200, [("Content-Type", "text/plain")])
                conn.http_write(b"started")
        if ev in (MG_EV_HTTP_HDRS, MG_EV_READ) and conn in self.conns:
            try:
                conn.body_read()
            except ConnectionResetError as exc:
                self.raised.append(exc)


def test_chunked_body_over_max_body_size_is_413_while_no_response_went_out(
        manager: Manager) -> None:
    reader = BodyReader()
    port = listen_stream(manager, reader, max_body_size=8)
    with connect(port) as s:
        s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"5\r\nabcde\r\n")
        wait_for(lambda: len(reader.conns) == 1, 5, "the head", manager=manager)
        s.sendall(b"4\r\nfghi\r\n0\r\n\r\n")  # 9 bytes in all: one over
        got = closed_by_server(manager, s)
    assert got is not None and got.startswith(b"HTTP/1.1 413 "), got
    assert b"Connection: close\r\n" in got
    exc = reader.raised[0]
    assert isinstance(exc, RequestBodyTooLarge) and exc.answered and exc.limit == 8
    assert "max_body_size (8 bytes)" in str(exc) and "answered 413" in str(exc)
    with pytest.raises(RuntimeError):  # the handler's own answer can no longer go out
        reader.conns[0].http_begin(200, [])


def test_chunked_body_over_max_body_size_closes_once_the_response_started(
        manager: Manager) -> None:
    reader = BodyReader(begin=True)
    port = listen_stream(manager, reader, max_body_size=8)
    with connect(port) as s:
        s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"5\r\nabcde\r\n")
        wait_for(lambda: len(reader.conns) == 1, 5, "the head", manager=manager)
        s.sendall(b"4\r\nfghi\r\n0\r\n\r\n")
        got = closed_by_server(manager, s)
    assert got is not None and got.startswith(b"HTTP/1.1 200 ") and b"413" not in got
    exc = reader.raised[0]
    assert isinstance(exc, RequestBodyTooLarge) and not exc.answered
    assert "max_body_size (8 bytes)" in str(exc) and "connection is closed" in str(exc)


def test_chunked_body_over_max_body_size_with_the_head_is_413(manager: Manager) -> None:
    echo = Echo()
    port = listen_stream(manager, echo, max_body_size=8)
    with connect(port) as s:
        s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"9\r\nabcdefghi\r\n0\r\n\r\n")
        got = closed_by_server(manager, s)
    assert got is not None and got.startswith(b"HTTP/1.1 413 "), got
    assert echo.events == []  # no handler saw it


def test_stalled_streamed_body_is_closed_after_body_timeout(manager: Manager) -> None:
    echo = Echo()
    port = listen_stream(manager, echo, body_timeout_ms=200)
    with connect(port) as s:
        s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
        t0 = time.monotonic()
        wait_for(lambda: len(echo.heads) == 1, 5, "the head", manager=manager)
        assert closed_by_server(manager, s, timeout=3) == b""
        elapsed = time.monotonic() - t0
    assert 0.15 <= elapsed < 1.5, elapsed


def test_trickled_streamed_body_is_closed_after_body_timeout(manager: Manager) -> None:
    """Progress means 1 KiB per window: a few bytes now and then do not keep it open."""
    echo = Echo()
    port = listen_stream(manager, echo, body_timeout_ms=200)
    with connect(port) as s:
        s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
        wait_for(lambda: len(echo.heads) == 1, 5, "the head", manager=manager)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 3:
            try:
                s.sendall(b"x")
            except OSError:
                break
            if closed_by_server(manager, s, timeout=0.05) is not None:
                break
        elapsed = time.monotonic() - t0
    assert elapsed >= 0.15
    assert elapsed < 1.5, "a trickled body kept the connection open"


def test_expect_100_continue_is_answered_when_the_body_streams(manager: Manager) -> None:
    echo = Echo()
    port = listen_stream(manager, echo)
    with connect(port) as s:
        s.sendall(b"PUT /e HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
                  b"Expect: 100-continue\r\n\r\n")
        cont = b"HTTP/1.1 100 Continue\r\n\r\n"
        assert recv_polling(manager, s, cont) == cont
        s.sendall(b"data")
        assert recv_polling(manager, s, ok(b"/e:data")) == ok(b"/e:data")


def test_repeated_cookie_fields_are_accepted_on_stream_listeners_only(
        manager: Manager) -> None:
    seen: list[list[tuple[bytes, bytes]]] = []

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev in (MG_EV_HTTP_HDRS, MG_EV_HTTP_MSG) and not conn.response_started:
            seen.append(msg.headers_bytes())
            answer(conn, b"ok")

    request = (b"GET / HTTP/1.1\r\nHost: x\r\nCookie: a=1\r\nCookie: b=2\r\n"
               b"Connection: close\r\n\r\n")
    port = listen_stream(manager, handler)
    with connect(port) as s:
        s.sendall(request)
        assert closed_by_server(manager, s) == (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                                                b"Connection: close\r\n\r\nok")
    assert seen == [[(b"Host", b"x"), (b"Cookie", b"a=1"), (b"Cookie", b"b=2"),
                     (b"Connection", b"close")]]

    buffered = port_of(manager.listen("http://127.0.0.1:0", handler))
    with connect(buffered) as s:
        s.sendall(request)
        got = closed_by_server(manager, s)
    assert got is not None and got.startswith(b"HTTP/1.1 400 ")
    assert len(seen) == 1


def test_latin1_octets_in_header_values_reach_headers_bytes(manager: Manager) -> None:
    seen: list[list[tuple[bytes, bytes]]] = []

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_HDRS:
            seen.append(msg.headers_bytes())
            answer(conn, b"ok")

    port = listen_stream(manager, handler)
    with connect(port) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Name: caf\xe9\r\n"
                  b"X-High: \x80\xff \t\xe9\r\n\r\n")
        assert recv_polling(manager, s, ok(b"ok")) == ok(b"ok")
    assert seen == [[(b"Host", b"x"), (b"X-Name", b"caf\xe9"), (b"X-High", b"\x80\xff \t\xe9")]]


@pytest.mark.parametrize("version", ["1.1", "1.0"])
def test_early_answer_with_close_reaches_a_client_still_uploading(
        server_thread: Any, version: str) -> None:
    """An app that answers without reading the body, on a connection that then closes: a
    close with the upload still arriving would make the kernel reset the connection and
    destroy the answer before a client that sends first, reads later, sees it."""
    size = 4 << 20

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_HDRS:
            conn.http_begin(401, [("Content-Length", "6")])
            conn.http_write(b"denied")
            conn.http_end()

    st = server_thread(handler)
    port = st.listen(stream_body=True, max_body_size=size)
    st.start()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        close = b"Connection: close\r\n" if version == "1.1" else b""
        s.sendall(b"PUT /up HTTP/%s\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n"
                  % (version.encode(), close, size))
        for part in pattern_chunks(size):
            s.sendall(part)  # would raise ConnectionResetError after a reset
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    assert got == (b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 6\r\n"
                   b"Connection: close\r\n\r\ndenied")


def test_body_read_stops_at_the_end_of_the_body(manager: Manager) -> None:
    """Pipelined requests arrive in the same read as the body before them: body_read()
    hands out that body only, and the next head waits until the response is done."""
    heads: list[bytes] = []
    box: dict[str, Connection] = {}

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_HDRS:
            heads.append(msg.uri_bytes)
            box["conn"] = conn

    port = listen_stream(manager, handler)
    with connect(port) as s:
        s.sendall(b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nfirst"
                  b"POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"6\r\nsecond\r\n0\r\n\r\n"
                  b"GET /c HTTP/1.1\r\nHost: x\r\n\r\n")
        for n, (path, body) in enumerate(((b"/a", b"first"), (b"/b", b"second"),
                                          (b"/c", b""))):
            wait_for(lambda: "conn" in box, 5, "a head", manager=manager)
            manager.poll(20)  # the rest of the pipeline is buffered: nothing may surface
            assert heads[n:] == [path]
            conn = box.pop("conn")
            assert (conn.body_complete, conn.body_pending) == (True, len(body))
            assert conn.body_read() == body
            assert conn.body_read() == b""
            answer(conn, path)
        want = ok(b"/a") + ok(b"/b") + ok(b"/c")
        assert recv_polling(manager, s, want) == want
    assert heads == [b"/a", b"/b", b"/c"]


def test_malformed_chunk_in_the_first_read_is_never_answered_2xx(manager: Manager) -> None:
    echo = Echo()
    port = listen_stream(manager, echo)
    with connect(port) as s:
        s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"3\r\nabcXY0\r\n\r\n")
        got = closed_by_server(manager, s)
    assert got is not None, "the connection stayed open"
    assert got == b"" or got.startswith(b"HTTP/1.1 400 "), got


def test_handler_exception_at_hdrs_is_answered_500_and_closed() -> None:
    errors: list[BaseException] = []

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_HDRS:
            raise ValueError("app bug")

    with Manager(handler, error_handler=errors.append) as mgr:
        port = listen_stream(mgr, handler)
        with connect(port) as s:
            s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
                      b"GET /never HTTP/1.1\r\nHost: x\r\n\r\n")
            got = closed_by_server(mgr, s)
    # The server's own answer carries a Date (issue 33): any second of it.
    assert got is not None
    assert re.fullmatch(rb"HTTP/1.1 500 Internal Server Error\r\n"
                        rb"Content-Type: text/plain; charset=utf-8\r\nContent-Length: 21\r\n"
                        rb"Connection: close\r\nDate: \w{3}, \d\d \w{3} \d{4} "
                        rb"\d\d:\d\d:\d\d GMT\r\n\r\nInternal Server Error", got), got
    assert [str(e) for e in errors] == ["app bug"]
