"""Zero-copy *_view accessors: memoryviews into the receive buffer that are released when the
event ends, and pin a copy (never freed memory) when a slice of one outlives it."""

from __future__ import annotations

import gc
import os
import socket
import warnings
from typing import Any

import pytest
from support.waiting import wait_for
from websockets.sync.client import connect as ws_connect

from cymongoose import (
    MG_EV_HTTP_MSG,
    MG_EV_MQTT_CMD,
    MG_EV_READ,
    MG_EV_WS_MSG,
    MG_EV_WS_OPEN,
    WEBSOCKET_OP_BINARY,
    Connection,
    Manager,
)

pytestmark = pytest.mark.timeout(30)

RELEASED = "released memoryview"


def http_exchange(port: int, raw: bytes, responses: int = 1) -> bytes:
    """Send raw request bytes; read until `responses` complete answers arrived or EOF."""
    out = b""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(raw)
        while out.count(b"HTTP/1.1 ") < responses or not out.endswith(b"!"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            out += chunk
    return out


def test_http_views_match_the_copies_and_die_with_the_event(server_thread: Any) -> None:
    seen: dict[str, Any] = {}

    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            body, head, pairs = data.body_view, data.head_view, data.header_views()
            seen.update(
                types={type(body), type(head)}, readonly=body.readonly and head.readonly,
                body=bytes(body), body_copy=data.body_bytes, head=bytes(head),
                pairs=[(bytes(n), bytes(v)) for n, v in pairs], copies=data.headers_bytes(),
                recv=bytes(conn.recv_view()), recv_copy=conn.recv_data())
            seen["kept"] = (body, head, pairs[0][1], data)
            try:
                body[0:1] = b"X"  # type: ignore[index]
            except TypeError:
                seen["write_refused"] = True
            conn.reply(200, body)  # a view can be sent as it is
            conn.send(b"!")

    st = server_thread(handler)
    port = st.listen()
    st.start()
    raw = (b"POST /v?q=1 HTTP/1.1\r\nHost: a\r\nX-Dup: 1\r\nX-Dup: \xe9\r\n"
           b"Content-Length: 11\r\n\r\nhello views")
    answer = http_exchange(port, raw)
    assert answer.endswith(b"\r\n\r\nhello views!")
    assert seen["types"] == {memoryview} and seen["readonly"] and seen["write_refused"]
    assert seen["body"] == seen["body_copy"] == b"hello views"
    assert seen["head"] == raw[:raw.index(b"\r\n\r\n") + 4]
    assert seen["pairs"] == seen["copies"] == [
        (b"Host", b"a"), (b"X-Dup", b"1"), (b"X-Dup", b"\xe9"), (b"Content-Length", b"11")]
    assert seen["recv"] == seen["recv_copy"] == raw
    body, head, value, msg = seen["kept"]
    for view in (body, head, value):
        with pytest.raises(ValueError, match=RELEASED):
            bytes(view)
    for late in (lambda: msg.body_view, lambda: msg.head_view, msg.header_views):
        with pytest.raises(RuntimeError, match="after its event handler returned"):
            late()


def test_recv_view_only_inside_a_handler_of_its_connection(manager: Manager) -> None:
    got: list[Any] = []
    other: list[Connection] = []

    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_READ and conn.recv_len:
            view = conn.recv_view()
            got.append((bytes(view), view))
            if other:  # another connection's buffer is not this event's
                with pytest.raises(RuntimeError, match="only while a handler"):
                    other[0].recv_view()
                got.append("checked")
            conn.recv_data(consume=True)

    lsn = manager.listen("tcp://127.0.0.1:0", handler)
    other.append(manager.listen("tcp://127.0.0.1:0"))
    with socket.create_connection(("127.0.0.1", lsn.local_addr[1]), timeout=5) as sock:
        sock.sendall(b"raw bytes")
        wait_for(lambda: got, 5, "the handler's recv_view", manager=manager)
    assert got[0][0] == b"raw bytes" and got[1] == "checked"
    with pytest.raises(ValueError, match=RELEASED):
        bytes(got[0][1])
    with pytest.raises(RuntimeError, match="only while a handler"):
        lsn.recv_view()  # outside any event
    with pytest.raises(RuntimeError, match="closed"):
        Connection().recv_view()


def test_slice_that_outlives_its_event_pins_a_copy(server_thread: Any) -> None:
    # Misuse: a slice of a view (CPython cannot revoke it) and a memoryview of a view are
    # kept past the event. They must read the bytes as they were, never freed memory (the
    # ASan run checks that), and the connection must go on with correct data.
    kept: list[Any] = []
    bodies: list[bytes] = []

    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            bodies.append(data.body_bytes)
            if len(bodies) == 1:
                kept.append(data.body_view[2:])
                kept.append(memoryview(data.head_view))
            conn.reply(200, b"n%d" % len(bodies))
            conn.send(b"!")

    st = server_thread(handler)
    port = st.listen()
    st.start()
    first = b"POST /1 HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\n\r\nfirst!"
    # Pipelined: the second request is in the buffer the first event pinned.
    second = b"POST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 7\r\n\r\nsecond!"
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        answer = http_exchange(port, first + second, responses=2)
        third = http_exchange(port, b"GET /3 HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n")
    assert answer.count(b"HTTP/1.1 200") == 2 and b"n2!" in answer, answer
    assert b"n3!" in third
    assert bodies == [b"first!", b"second!", b""]
    assert bytes(kept[0]) == b"rst!"
    assert bytes(kept[1]).startswith(b"POST /1 HTTP/1.1\r\n")
    kept.clear()  # the last exports: the pinned block is freed at the next poll
    gc.collect()
    assert http_exchange(port, b"GET /4 HTTP/1.1\r\nHost: a\r\n\r\n").endswith(b"n4!")


def test_ws_data_view_echo_of_one_mebibyte(server_thread: Any) -> None:
    kept: list[memoryview] = []
    nested: list[bytes] = []

    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            head = data.head_view
            conn.ws_upgrade(data)  # fires MG_EV_WS_OPEN inside this handler
            nested.append(bytes(head))  # the outer event's view outlived the inner event
        elif ev == MG_EV_WS_OPEN:
            nested.append(bytes(data.head_view))
        elif ev == MG_EV_WS_MSG:
            view = data.data_view
            kept.append(view)
            conn.ws_send(view, WEBSOCKET_OP_BINARY)

    st = server_thread(handler)
    port = st.listen()
    st.start()
    payload = os.urandom(1 << 20)
    with ws_connect(f"ws://127.0.0.1:{port}/ws", max_size=2 << 20, open_timeout=5) as ws:
        ws.send(payload)
        assert ws.recv(timeout=10) == payload
        ws.send(b"small")
        assert ws.recv(timeout=5) == b"small"
    assert nested[0] == nested[1] and nested[0].startswith(b"GET /ws HTTP/1.1\r\n")
    assert len(kept) == 2
    for view in kept:
        with pytest.raises(ValueError, match=RELEASED):
            len(view)


def test_mqtt_data_view(manager: Manager) -> None:
    got: list[Any] = []

    def broker(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_MQTT_CMD and data.cmd == 3:  # PUBLISH
            view = data.data_view
            got.append((data.topic, bytes(view), data.data, view))

    port = manager.mqtt_listen("mqtt://127.0.0.1:0", broker).local_addr[1]
    connect = b"\x10\x0d\x00\x04MQTT\x04\x02\x00\x3c\x00\x01c"
    payload = b"payload \x00\xff bytes"
    var = b"\x00\x03a/b" + payload
    publish = b"\x30" + bytes([len(var)]) + var
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(connect + publish)
        for _ in range(100):
            if got:
                break
            manager.poll(20)
    topic, copied, data, view = got[0]
    assert (topic, copied, data) == ("a/b", payload, payload)
    with pytest.raises(ValueError, match=RELEASED):
        view.tobytes()
