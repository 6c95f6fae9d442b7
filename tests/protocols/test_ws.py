"""WebSocket server and client against the `websockets` library and raw sockets."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from support.http_client import recv_head
from support.waiting import wait_for
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.sync.client import connect
from websockets.sync.server import ServerConnection, serve

from cymongoose import (
    MG_EV_CLOSE,
    MG_EV_ERROR,
    MG_EV_HTTP_MSG,
    MG_EV_WS_CTL,
    MG_EV_WS_MSG,
    MG_EV_WS_OPEN,
    WEBSOCKET_OP_BINARY,
    WEBSOCKET_OP_PING,
    WEBSOCKET_OP_TEXT,
    Connection,
    HttpMessage,
    Manager,
    WsMessage,
)

OP_CONT, OP_CLOSE, OP_PONG = 0, 8, 10


class WsServer:
    """A cymongoose WebSocket echo server on a background thread, recording its events."""

    def __init__(self, server_thread: Any, extra_headers: Any = None, echo: bool = True) -> None:
        self.events: list[tuple[int, Any]] = []
        self.errors: list[str] = []
        self.messages: list[tuple[int, bytes]] = []
        self.closes: list[tuple[int | None, str | None]] = []
        self.conns: list[Connection] = []
        self.upgrade_errors: list[BaseException] = []
        self.extra_headers = extra_headers
        self.echo = echo
        self.st = server_thread(self.handler, error_handler=self.upgrade_errors.append)
        self.port = self.st.listen("http://127.0.0.1:0")
        self.st.start()

    def handler(self, conn: Connection, ev: int, data: Any) -> None:
        self.events.append((ev, data if not isinstance(data, (HttpMessage, WsMessage)) else None))
        if ev == MG_EV_HTTP_MSG:
            try:
                conn.ws_upgrade(data, self.extra_headers)
            except (ValueError, TypeError) as exc:
                self.upgrade_errors.append(exc)
                conn.reply(400, "bad upgrade")
        elif ev == MG_EV_WS_OPEN:
            self.conns.append(conn)
        elif ev == MG_EV_WS_MSG:
            self.messages.append((data.flags, data.data))
            if self.echo:
                conn.ws_send(data.data, data.flags & 0x0F)
        elif ev == MG_EV_ERROR:
            self.errors.append(data)
        elif ev == MG_EV_CLOSE and conn.is_websocket:
            self.closes.append((conn.ws_close_code, conn.ws_close_reason))

    def count(self, ev: int) -> int:
        return sum(1 for e, _ in self.events if e == ev)


@pytest.fixture
def ws_server(server_thread: Any) -> WsServer:
    return WsServer(server_thread)


def url(server: WsServer) -> str:
    return f"ws://127.0.0.1:{server.port}/chat"


# --- raw frames ------------------------------------------------------------------------------

def frame(op: int, payload: bytes = b"", *, fin: bool = True, mask: bool = True,
          rsv: int = 0, length: int | None = None) -> bytes:
    n = len(payload) if length is None else length
    head = bytes([(0x80 if fin else 0) | (rsv << 4) | op])
    mbit = 0x80 if mask else 0
    if n < 126:
        head += bytes([mbit | n])
    elif n < 65536:
        head += bytes([mbit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([mbit | 127]) + struct.pack("!Q", n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def recv_exact(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise EOFError(f"peer closed after {len(out)} of {n} bytes")
        out += chunk
    return out


def read_frame(sock: socket.socket) -> tuple[int, bytes]:
    """One unmasked frame from a server: (first byte, payload)."""
    b0, b1 = recv_exact(sock, 2)
    assert not b1 & 0x80, "server frames must not be masked"
    n = b1 & 0x7F
    if n == 126:
        (n,) = struct.unpack("!H", recv_exact(sock, 2))
    elif n == 127:
        (n,) = struct.unpack("!Q", recv_exact(sock, 8))
    return b0, recv_exact(sock, n)


UPGRADE = (b"GET /chat HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
           b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
           b"Sec-WebSocket-Version: 13\r\n\r\n")


def raw_upgrade(port: int, pipelined: bytes = b"") -> tuple[socket.socket, bytes]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(UPGRADE + pipelined)
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        if not chunk:
            break
        head += chunk
    return sock, head


def read_until_eof(sock: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        out += chunk
    return out


# --- server side: websockets as the client ---------------------------------------------------

def test_echo_text_and_binary_with_extra_headers(server_thread: Any) -> None:
    srv = WsServer(server_thread, extra_headers={"X-Served-By": "cymongoose", "X-N": 7})
    with connect(url(srv)) as ws:
        assert ws.response.status_code == 101
        assert ws.response.headers["X-Served-By"] == "cymongoose"
        assert ws.response.headers["X-N"] == "7"
        ws.send("héllo")
        assert ws.recv(timeout=5) == "héllo"
        payload = bytes(range(256)) + b"\x00\x00tail"  # NUL bytes survive both ways
        ws.send(payload)
        assert ws.recv(timeout=5) == payload
    assert srv.messages[0] == (0x80 | WEBSOCKET_OP_TEXT, "héllo".encode())
    assert srv.messages[1] == (0x80 | WEBSOCKET_OP_BINARY, payload)
    assert srv.conns and srv.count(MG_EV_WS_OPEN) == 1


@pytest.mark.parametrize("size", [125, 126, 65535, 65536, 3 * 1024 * 1024 + 7])
def test_frame_length_encodings_and_large_frames(ws_server: WsServer, size: int) -> None:
    payload = os.urandom(size)
    with connect(url(ws_server), max_size=None) as ws:
        ws.send(payload)
        assert ws.recv(timeout=10) == payload


def test_fragmented_message_is_reassembled_once(ws_server: WsServer) -> None:
    with connect(url(ws_server)) as ws:
        ws.send(["frag-one|", "frag-two|", "frag-three"])
        assert ws.recv(timeout=5) == "frag-one|frag-two|frag-three"
        ws.send([b"\x01\x02", b"\x03"])
        assert ws.recv(timeout=5) == b"\x01\x02\x03"
    flags, data = ws_server.messages[0]
    assert data == b"frag-one|frag-two|frag-three"
    assert flags & 0x0F == WEBSOCKET_OP_TEXT  # the first fragment's opcode
    assert ws_server.messages[1] == (WEBSOCKET_OP_BINARY, b"\x01\x02\x03")
    assert len(ws_server.messages) == 2


def test_control_frames_interleaved_with_fragments(ws_server: WsServer) -> None:
    sock, head = raw_upgrade(ws_server.port)
    with sock:
        assert head.startswith(b"HTTP/1.1 101")
        sock.sendall(frame(WEBSOCKET_OP_TEXT, b"ab", fin=False) + frame(WEBSOCKET_OP_PING, b"p1")
                     + frame(OP_CONT, b"cd", fin=False) + frame(OP_CONT, b"ef"))
        assert read_frame(sock) == (0x80 | OP_PONG, b"p1")
        assert read_frame(sock) == (0x80 | WEBSOCKET_OP_TEXT, b"abcdef")


def test_ping_from_client_is_answered_and_ctl_gets_none(ws_server: WsServer) -> None:
    with connect(url(ws_server)) as ws:
        assert ws.ping(b"are you there").wait(5)
    wait_for(lambda: ws_server.count(MG_EV_WS_CTL) >= 2, 5.0, "ws_server.count(MG_EV_WS_CTL) >= 2")
    assert all(data is None for ev, data in ws_server.events if ev == MG_EV_WS_CTL)


def test_client_initiated_close_handshake(ws_server: WsServer) -> None:
    with connect(url(ws_server)) as ws:
        ws.send("x")
        ws.recv(timeout=5)
        ws.close(4001, "bye now")
        assert ws.close_code == 4001  # Mongoose echoes the client's close payload
        assert ws.close_reason == "bye now"
    wait_for(lambda: bool(ws_server.closes), 5.0, "bool(ws_server.closes)")
    assert ws_server.closes == [(4001, "bye now")]


def test_close_without_status_code_reads_1005(ws_server: WsServer) -> None:
    sock, _ = raw_upgrade(ws_server.port)
    with sock:
        sock.sendall(frame(OP_CLOSE))
        assert read_frame(sock) == (0x80 | OP_CLOSE, b"")
        assert read_until_eof(sock) == b""  # Mongoose closes the socket after the echo
    wait_for(lambda: bool(ws_server.closes), 5.0, "bool(ws_server.closes)")
    assert ws_server.closes == [(1005, "")]


def test_frames_after_close_are_ignored(ws_server: WsServer) -> None:
    sock, _ = raw_upgrade(ws_server.port)
    with sock:
        sock.sendall(frame(OP_CLOSE, struct.pack("!H", 1000)) + frame(WEBSOCKET_OP_TEXT, b"late"))
        assert read_frame(sock) == (0x80 | OP_CLOSE, struct.pack("!H", 1000))
        assert read_until_eof(sock) == b""
    wait_for(lambda: bool(ws_server.closes), 5.0, "bool(ws_server.closes)")
    assert ws_server.messages == []


def test_frames_pipelined_behind_the_upgrade_request(ws_server: WsServer) -> None:
    sock, head = raw_upgrade(ws_server.port, frame(WEBSOCKET_OP_TEXT, b"early bird"))
    with sock:
        assert head.startswith(b"HTTP/1.1 101")
        assert read_frame(sock) == (0x80 | WEBSOCKET_OP_TEXT, b"early bird")


class ServerCloser(WsServer):
    """Echo server that starts the close handshake itself when told "close"."""

    def handler(self, conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_WS_MSG and data.data == b"close":
            self.messages.append((data.flags, data.data))
            conn.ws_send(struct.pack("!H", 1001) + b"going away", 8)
            return
        if ev == MG_EV_WS_MSG and data.data == b"ping":
            conn.ws_send(b"srv-ping", WEBSOCKET_OP_PING)
            return
        super().handler(conn, ev, data)


def test_server_initiated_close_handshake(server_thread: Any) -> None:
    srv = ServerCloser(server_thread)
    with connect(url(srv)) as ws:
        ws.send("close")
        with pytest.raises(ConnectionClosed) as info:
            ws.recv(timeout=5)
        assert info.value.rcvd is not None
        assert info.value.rcvd.code == 1001
        assert info.value.rcvd.reason == "going away"
    # The client echoed 1001; cymongoose saw both closes and closed the socket.
    wait_for(lambda: bool(srv.closes), 5.0, "bool(srv.closes)")
    assert srv.closes == [(1001, "going away")]


def test_server_ping_is_answered_by_the_client(server_thread: Any) -> None:
    srv = ServerCloser(server_thread)
    with connect(url(srv)) as ws:
        ws.send("ping")
        # websockets answers the ping with a pong, which Mongoose reports as MG_EV_WS_CTL.
        wait_for(lambda: srv.count(MG_EV_WS_CTL) >= 1, 5.0, "srv.count(MG_EV_WS_CTL) >= 1")
        ws.send("still here")
        assert ws.recv(timeout=5) == "still here"


INVALID = [
    ("unmasked", frame(WEBSOCKET_OP_TEXT, b"hi", mask=False), 1002, "unmasked frame"),
    ("rsv1", frame(WEBSOCKET_OP_TEXT, b"hi", rsv=4), 1002, "reserved bits"),
    ("rsv3", frame(WEBSOCKET_OP_BINARY, b"hi", rsv=1), 1002, "reserved bits"),
    ("opcode3", frame(3, b"hi"), 1002, "unknown opcode"),
    ("opcode11", frame(11, b"hi"), 1002, "unknown opcode"),
    ("fragmented-ping", frame(WEBSOCKET_OP_PING, b"p", fin=False), 1002, "fragmented control"),
    ("long-ping", frame(WEBSOCKET_OP_PING, b"p" * 126), 1002, "longer than 125"),
    ("stray-continuation", frame(OP_CONT, b"x"), 1002, "continuation frame without"),
    ("text-inside-fragment",
     frame(WEBSOCKET_OP_TEXT, b"a", fin=False) + frame(WEBSOCKET_OP_TEXT, b"b"), 1002,
     "new message inside"),
    ("close-1-byte", frame(OP_CLOSE, b"\x03"), 1002, "1-byte payload"),
    ("close-code-999", frame(OP_CLOSE, struct.pack("!H", 999)), 1002, "invalid close code"),
    ("close-code-1005", frame(OP_CLOSE, struct.pack("!H", 1005)), 1002, "invalid close code"),
    ("length-msb", frame(WEBSOCKET_OP_BINARY, b"", length=1 << 63)[:10], 1002, "most significant"),
    ("too-big", frame(WEBSOCKET_OP_BINARY, b"", length=1 << 31)[:14], 1009, "too big"),
]


@pytest.mark.parametrize("name,data,code,why", INVALID, ids=[i[0] for i in INVALID])
def test_invalid_frames_are_refused_cleanly(
        ws_server: WsServer, name: str, data: bytes, code: int, why: str) -> None:
    sock, head = raw_upgrade(ws_server.port)
    with sock:
        assert head.startswith(b"HTTP/1.1 101")
        # A valid message first: delivered, since it precedes the violation.
        sock.sendall(frame(WEBSOCKET_OP_TEXT, b"ok") + data)
        assert read_frame(sock) == (0x80 | WEBSOCKET_OP_TEXT, b"ok")
        b0, payload = read_frame(sock)
        assert b0 == 0x80 | OP_CLOSE
        assert struct.unpack("!H", payload[:2])[0] == code
        assert why in payload[2:].decode()
        assert read_until_eof(sock) == b""  # then the server closes the socket
    wait_for(lambda: bool(ws_server.errors), 5.0, "bool(ws_server.errors)")
    assert ws_server.errors[0].startswith("WebSocket protocol error: ")
    assert why in ws_server.errors[0]
    assert ws_server.messages == [(0x80 | WEBSOCKET_OP_TEXT, b"ok")]
    # The server goes on serving.
    with connect(url(ws_server)) as ws:
        ws.send("after")
        assert ws.recv(timeout=5) == "after"


def test_garbage_after_upgrade_never_crashes(ws_server: WsServer) -> None:
    rng = __import__("random").Random(1234)
    for _ in range(20):
        sock, _ = raw_upgrade(ws_server.port)
        with sock:
            sock.sendall(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))))
            sock.shutdown(socket.SHUT_WR)
            read_until_eof(sock)
    with connect(url(ws_server)) as ws:
        ws.send("alive")
        assert ws.recv(timeout=5) == "alive"


def test_frames_split_into_single_bytes(ws_server: WsServer) -> None:
    sock, _ = raw_upgrade(ws_server.port)
    with sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        data = (frame(WEBSOCKET_OP_TEXT, b"12", fin=False) + frame(WEBSOCKET_OP_PING, b"p")
                + frame(OP_CONT, b"34" * 70))  # 140 bytes: a 16-bit length in a fragment
        for i in range(len(data)):
            sock.sendall(data[i:i + 1])
            time.sleep(0.0005)
        assert read_frame(sock) == (0x80 | OP_PONG, b"p")
        assert read_frame(sock) == (0x80 | WEBSOCKET_OP_TEXT, b"12" + b"34" * 70)


def test_random_frame_sequences_never_crash(ws_server: WsServer) -> None:
    # Structured fuzzing of the frame guard and Mongoose's reassembly (the ASan run too):
    # plausible headers with random opcodes, flags, lengths and masking, in random chunks.
    import random
    rng = random.Random(20240607)
    for _ in range(60):
        sock, _ = raw_upgrade(ws_server.port)
        with sock:
            data = b""
            for _ in range(rng.randrange(1, 8)):
                op = rng.choice([0, 1, 2, 8, 9, 10, 0, 1, rng.randrange(16)])
                size = rng.choice([0, 1, 2, 125, 126, 127, 300, 65536, rng.randrange(2000)])
                payload = (struct.pack("!H", rng.choice([1000, 1001, 999, 4000]))
                           if op == 8 and size >= 2 and rng.random() < 0.7 else b"")
                payload += bytes(rng.randrange(256) for _ in range(min(size, 300)))
                payload = payload[:size] + b"\x00" * (size - len(payload))
                data += frame(op, payload, fin=rng.random() < 0.7, mask=rng.random() < 0.95,
                              rsv=rng.choice([0, 0, 0, 0, 1]))
            if rng.random() < 0.3:
                data = data[:rng.randrange(len(data) + 1)]  # cut mid-frame
            pos = 0
            try:
                while pos < len(data):
                    step = rng.randrange(1, 4096)
                    sock.sendall(data[pos:pos + step])
                    pos += step
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # the server may refuse and close before everything is sent
            sock.settimeout(5)
            read_until_eof(sock)
    with connect(url(ws_server)) as ws:
        ws.send("survived")
        assert ws.recv(timeout=5) == "survived"


def test_subprotocol_chosen_by_the_server(server_thread: Any) -> None:
    srv = WsServer(server_thread, extra_headers={"Sec-WebSocket-Protocol": "superchat"})
    with connect(url(srv), subprotocols=["chat", "superchat"]) as ws:  # type: ignore[list-item]
        assert ws.subprotocol == "superchat"
        assert ws.response.headers.get_all("Sec-WebSocket-Protocol") == ["superchat"]


def test_subprotocol_list_not_echoed_when_server_chooses_none(ws_server: WsServer) -> None:
    with connect(url(ws_server), subprotocols=["chat", "superchat"]) as ws:  # type: ignore[list-item]
        assert ws.subprotocol is None
        ws.send("x")
        assert ws.recv(timeout=5) == "x"


def test_single_offered_subprotocol_is_echoed_as_mongoose_does(ws_server: WsServer) -> None:
    with connect(url(ws_server), subprotocols=["chat"]) as ws:  # type: ignore[list-item]
        assert ws.subprotocol == "chat"


@pytest.mark.parametrize("headers,exc", [
    ({"X-Evil": "a\r\nSet-Cookie: x=1"}, ValueError),
    ({"X-Evil\r\nSet-Cookie": "1"}, ValueError),
    ({"X-Nul": "a\x00b"}, ValueError),
    ({"Bad Name": "v"}, ValueError),
    ({"": "v"}, ValueError),
    ([("X-A", "1")], TypeError),
    ("X-A: 1", TypeError),
])
def test_ws_upgrade_refuses_unsafe_extra_headers(
        server_thread: Any, headers: Any, exc: type[Exception]) -> None:
    srv = WsServer(server_thread, extra_headers=headers)
    with pytest.raises(InvalidHandshake):
        with connect(url(srv), open_timeout=5):
            pass
    wait_for(lambda: bool(srv.upgrade_errors), 5.0, "bool(srv.upgrade_errors)")
    assert isinstance(srv.upgrade_errors[0], exc)
    if exc is ValueError and headers != {"": "v"}:
        assert re.match(r"Header (name|value) .* illegal character", str(srv.upgrade_errors[0]))
    assert srv.count(MG_EV_WS_OPEN) == 0


def test_upgrade_without_websocket_key_gets_426(ws_server: WsServer) -> None:
    with socket.create_connection(("127.0.0.1", ws_server.port), timeout=5) as sock:
        sock.sendall(b"GET /chat HTTP/1.1\r\nHost: x\r\n\r\n")
        data = read_until_eof(sock)
    assert data.startswith(b"HTTP/1.1 426")
    assert ws_server.count(MG_EV_WS_OPEN) == 0


def test_views_and_argument_checks(server_thread: Any) -> None:
    kept: list[Any] = []
    failures: list[str] = []

    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            kept.append(data)
            conn.ws_upgrade(data)
            try:
                conn.ws_upgrade(data)
                failures.append("second ws_upgrade accepted")
            except RuntimeError:
                pass
        elif ev == MG_EV_WS_MSG:
            kept.append(data)
            assert data and data.text == "go"
            checks: list[tuple[Any, Any, type[Exception]]] = [
                ("x", "1", TypeError), ("x", 1.0, TypeError), ("x", True, TypeError),
                ("x", 16, ValueError), ("x", -1, ValueError), (None, 1, TypeError),
                (5, 1, TypeError), (b"p" * 126, WEBSOCKET_OP_PING, ValueError),
            ]
            for payload, op, exc in checks:
                try:
                    conn.ws_send(payload, op)
                    failures.append(f"ws_send({payload!r:.10}, {op!r}) accepted")
                except exc:
                    pass
            try:
                conn.ws_upgrade(kept[0])
                failures.append("stale HttpMessage accepted")
            except ValueError:
                pass
            conn.ws_send(bytearray(b"ba"), WEBSOCKET_OP_BINARY)
            conn.ws_send(memoryview(b"mv"))

    st = server_thread(handler)
    port = st.listen("http://127.0.0.1:0")
    st.start()
    with connect(f"ws://127.0.0.1:{port}/") as ws:
        ws.send("go")
        assert ws.recv(timeout=5) == b"ba"
        assert ws.recv(timeout=5) == "mv"
    assert failures == []
    for view in kept:
        assert not view
    with pytest.raises(RuntimeError, match="after its event handler returned"):
        kept[1].data  # noqa: B018
    with pytest.raises(RuntimeError):
        kept[1].flags  # noqa: B018


def test_ws_send_on_closed_connection_raises() -> None:
    with pytest.raises(RuntimeError, match="closed"):
        Connection().ws_send("x")
    with pytest.raises(RuntimeError, match="closed"):
        Connection().ws_upgrade(HttpMessage())


def test_handler_exception_in_ws_msg_is_reported_and_loop_goes_on(server_thread: Any) -> None:
    seen: list[BaseException] = []

    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            conn.ws_upgrade(data)
        elif ev == MG_EV_WS_MSG:
            if data.text == "boom":
                raise KeyError("boom")
            conn.ws_send(data.data)

    st = server_thread(handler, error_handler=seen.append)
    port = st.listen("http://127.0.0.1:0")
    st.start()
    with connect(f"ws://127.0.0.1:{port}/") as ws:
        ws.send("boom")
        ws.send("fine")
        assert ws.recv(timeout=5) == "fine"
    assert len(seen) == 1 and isinstance(seen[0], KeyError)


# --- client side: cymongoose ws_connect against a websockets server ---------------------------

@pytest.fixture
def echo_server() -> Iterator[tuple[int, list[Any]]]:
    """A websockets echo server; "close-me" makes it close with 1001."""
    received: list[Any] = []

    def handler(ws: ServerConnection) -> None:
        for msg in ws:
            received.append(msg)
            if msg == "close-me":
                ws.close(1001, "server bye")
                return
            if msg == "fragments":
                ws.send(["part1-", "part2-", "part3"])
                continue
            if msg == "big":
                ws.send(b"B" * (2 * 1024 * 1024))
                continue
            ws.send(msg)

    with serve(handler, "127.0.0.1", 0, max_size=None) as server:
        port = server.socket.getsockname()[1]
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield port, received
        finally:
            server.shutdown()
            thread.join(5)


class WsClient:
    def __init__(self, mgr: Manager, port: int, script: list[tuple[Any, int]]) -> None:
        self.script = list(script)
        self.got: list[tuple[int, bytes]] = []
        self.events: list[int] = []
        self.errors: list[str] = []
        self.closed = False
        self.close_code: int | None = None
        self.opened = False
        self.conn = mgr.ws_connect(f"ws://127.0.0.1:{port}/echo", self.handler)

    def send_next(self, conn: Connection) -> None:
        if self.script:
            data, op = self.script.pop(0)
            conn.ws_send(data, op)

    def handler(self, conn: Connection, ev: int, data: Any) -> None:
        self.events.append(ev)
        if ev == MG_EV_WS_OPEN:
            self.opened = True
            assert data.status() == 101
            self.send_next(conn)
        elif ev == MG_EV_WS_MSG:
            self.got.append((data.flags & 0x0F, data.data))
            self.send_next(conn)
        elif ev == MG_EV_ERROR:
            self.errors.append(data)
        elif ev == MG_EV_CLOSE:
            self.closed = True
            self.close_code = conn.ws_close_code


def test_client_echo_text_binary_fragments_and_big(
        echo_server: tuple[int, list[Any]], manager: Manager) -> None:
    port, received = echo_server
    client = WsClient(manager, port, [
        ("hello", WEBSOCKET_OP_TEXT), (b"\x00\xff" * 100, WEBSOCKET_OP_BINARY),
        ("fragments", WEBSOCKET_OP_TEXT), ("big", WEBSOCKET_OP_TEXT),
        (b"y" * 300_000, WEBSOCKET_OP_BINARY)])
    wait_for(lambda: len(client.got) == 5 or client.closed, 10,
             "len(client.got) == 5 or client.closed", manager=manager)
    assert client.got == [
        (WEBSOCKET_OP_TEXT, b"hello"), (WEBSOCKET_OP_BINARY, b"\x00\xff" * 100),
        (WEBSOCKET_OP_TEXT, b"part1-part2-part3"),
        (WEBSOCKET_OP_BINARY, b"B" * (2 * 1024 * 1024)),
        (WEBSOCKET_OP_BINARY, b"y" * 300_000)]
    assert received[0] == "hello" and received[1] == b"\x00\xff" * 100
    assert client.conn.is_websocket and client.conn.is_client
    assert client.errors == []


def test_client_close_handshake_initiated_by_client(
        echo_server: tuple[int, list[Any]], manager: Manager) -> None:
    port, _ = echo_server
    client = WsClient(manager, port, [("one", WEBSOCKET_OP_TEXT),
                                      (struct.pack("!H", 1000) + b"done", OP_CLOSE)])
    wait_for(lambda: client.closed, 5.0, "client.closed", manager=manager)
    assert client.close_code == 1000  # the server's echo of our close


def test_client_sees_server_close_code(
        echo_server: tuple[int, list[Any]], manager: Manager) -> None:
    port, _ = echo_server
    client = WsClient(manager, port, [("close-me", WEBSOCKET_OP_TEXT)])
    wait_for(lambda: client.closed, 5.0, "client.closed", manager=manager)
    assert client.close_code == 1001
    assert MG_EV_WS_CTL in client.events


def test_client_ping_gets_pong(echo_server: tuple[int, list[Any]], manager: Manager) -> None:
    port, _ = echo_server
    client = WsClient(manager, port, [(b"cli-ping", WEBSOCKET_OP_PING)])
    wait_for(lambda: MG_EV_WS_CTL in client.events, 5.0, "MG_EV_WS_CTL in client.events",
             manager=manager)


class RawServer:
    """A one-shot TCP server: answers the handshake with `response`, then sends `after`."""

    def __init__(self, response: bytes, after: bytes = b"") -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.port = self.sock.getsockname()[1]
        self.response, self.after = response, after
        self.received = b""
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        self.sock.settimeout(5)
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(3)
            if recv_head(conn) is None:
                return
            conn.sendall(self.response + self.after)
            try:
                while chunk := conn.recv(4096):
                    self.received += chunk
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()
        self.thread.join(5)


def accept_for(request: bytes) -> bytes:
    import base64
    import hashlib
    key = request.split(b"Sec-WebSocket-Key: ")[1].split(b"\r\n")[0]
    return base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())


@pytest.mark.parametrize("bad,code", [
    (frame(WEBSOCKET_OP_TEXT, b"masked", mask=True), 1002),
    (frame(7, b"x", mask=False), 1002),
    (frame(WEBSOCKET_OP_BINARY, b"", mask=False, length=1 << 31)[:10], 1009),
], ids=["masked", "opcode7", "too-big"])
def test_client_refuses_invalid_frames_from_server(
        manager: Manager, bad: bytes, code: int) -> None:
    # Mongoose's client does not check Sec-WebSocket-Accept, so a fixed one is fine here.
    srv = RawServer(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                    b"Connection: Upgrade\r\nSec-WebSocket-Accept: x\r\n\r\n",
                    frame(WEBSOCKET_OP_TEXT, b"fine", mask=False) + bad)
    try:
        client = WsClient(manager, srv.port, [])
        wait_for(lambda: client.closed, 5.0, "client.closed", manager=manager)
        assert client.got == [(WEBSOCKET_OP_TEXT, b"fine")]
        assert client.errors and client.errors[0].startswith("WebSocket protocol error")
    finally:
        srv.close()
    # The client sent a masked CLOSE with the code before closing.
    assert len(srv.received) >= 8
    assert srv.received[0] == 0x80 | OP_CLOSE and srv.received[1] & 0x80
    mask, body = srv.received[2:6], srv.received[6:8]
    assert struct.unpack("!H", bytes(b ^ mask[i] for i, b in enumerate(body)))[0] == code


def test_client_against_plain_http_server_errors(manager: Manager) -> None:
    srv = RawServer(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")
    try:
        client = WsClient(manager, srv.port, [])
        wait_for(lambda: client.closed, 5.0, "client.closed", manager=manager)
    finally:
        srv.close()
    assert not client.opened
    assert client.errors == ["ws handshake error"]


def test_ws_connect_argument_checks(manager: Manager) -> None:
    with pytest.raises(TypeError):
        manager.ws_connect(b"ws://127.0.0.1:1/")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        manager.ws_connect("ws://127.0.0.1:1/", handler=42)
    with pytest.raises(ValueError):
        manager.ws_connect("ws://127.0.0.1:1/\x00")
    closed = Manager()
    closed.close()
    with pytest.raises(RuntimeError):
        closed.ws_connect("ws://127.0.0.1:1/")


def test_client_survives_random_frames_from_server(manager: Manager) -> None:
    import random
    rng = random.Random(int(os.environ.get("CYM_WS_FUZZ_SEED", "7")))
    for _ in range(int(os.environ.get("CYM_WS_FUZZ_ROUNDS", "25"))):
        data = b""
        for _ in range(rng.randrange(1, 6)):
            op = rng.choice([0, 1, 2, 8, 9, 10, 1, rng.randrange(16)])
            size = rng.choice([0, 2, 125, 126, 300, 70000, rng.randrange(1000)])
            payload = struct.pack("!H", 1000) if op == 8 and size >= 2 else b""
            payload = (payload + os.urandom(size))[:size]
            data += frame(op, payload, fin=rng.random() < 0.7, mask=rng.random() < 0.1,
                          rsv=rng.choice([0, 0, 0, 2]))
        if rng.random() < 0.3:
            data = data[:rng.randrange(len(data) + 1)]
        srv = RawServer(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                        b"Connection: Upgrade\r\nSec-WebSocket-Accept: x\r\n\r\n", data)
        try:
            client = WsClient(manager, srv.port, [])
            # The lambdas run within this iteration, so late binding cannot bite.
            # Up to 0.3 s for the client to react to the frames; whether it closed or not,
            # it is closed next.
            with contextlib.suppress(AssertionError):
                wait_for(lambda: client.closed or srv.received != b"", 0.3,  # noqa: B023
                         "the client to react", manager=manager)
            client.conn.close()
            wait_for(lambda: client.closed, 5.0, "client.closed", manager=manager)  # noqa: B023
        finally:
            srv.close()
