"""Connection state, raw I/O, consume semantics and closed-connection behaviour."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest
from support.waiting import wait_for

from cymongoose import (
    MG_EV_ACCEPT,
    MG_EV_CLOSE,
    MG_EV_CONNECT,
    MG_EV_ERROR,
    MG_EV_READ,
    Connection,
    Manager,
)

pytestmark = pytest.mark.timeout(30)


def test_unbound_connection_is_closed() -> None:
    conn = Connection()
    assert repr(conn) == "<Connection closed>"
    assert (conn.id, conn.is_closing, conn.is_listening, conn.local_addr) == (0, True, False, None)
    assert (conn.recv_len, conn.send_len, conn.recv_size, conn.send_size) == (0, 0, 0, 0)
    for call in (lambda: conn.send(b"x"), conn.recv_data, conn.send_data, conn.drain,
                 lambda: conn.reply(200), lambda: conn.error("x"),
                 lambda: conn.http_chunk(b"")):
        with pytest.raises(RuntimeError, match="Connection has been closed"):
            call()
    conn.close()  # no-op


def test_echo_consumes_each_chunk_exactly_once() -> None:
    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_READ:
            conn.send(conn.recv_data(consume=True))

    with Manager(handler) as mgr:
        port = mgr.listen("tcp://127.0.0.1:0").local_addr[1]
        payload = bytes(range(256)) * 2048  # 512 KiB, many reads
        received = bytearray()

        def client() -> None:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(payload)
                while len(received) < len(payload):
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    received.extend(chunk)

        t = threading.Thread(target=client)
        t.start()
        wait_for(lambda: not t.is_alive(), 10, "not t.is_alive()", manager=mgr)
        t.join()
    assert bytes(received) == payload


def test_recv_data_peek_length_and_send_data() -> None:
    seen: dict[str, Any] = {}

    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_READ and conn.recv_len >= 10 and "peek" not in seen:
            seen["peek"] = conn.recv_data(4)
            seen["len_after_peek"] = conn.recv_len
            seen["part"] = conn.recv_data(4, consume=True)
            seen["rest"] = conn.recv_data()
            seen["len_after"] = conn.recv_len
            assert conn.recv_size >= conn.recv_len
            conn.send("ünï")
            seen["pending"] = conn.send_data()
            seen["pending2"] = conn.send_data(2)
            seen["send_len"] = conn.send_len

    with Manager(handler) as mgr:
        port = mgr.listen("tcp://127.0.0.1:0").local_addr[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"0123456789")
            wait_for(lambda: "peek" in seen, 5.0, '"peek" in seen', manager=mgr)
            for _ in range(5):  # the reply is written by the next iterations
                mgr.poll(5)
            assert s.recv(100) == "ünï".encode()
    assert seen["peek"] == b"0123" and seen["len_after_peek"] == 10
    assert seen["part"] == b"0123" and seen["rest"] == b"456789" and seen["len_after"] == 6
    assert seen["pending"] == "ünï".encode() and seen["pending2"] == "ünï".encode()[:2]
    assert seen["send_len"] == len("ünï".encode())


def test_send_rejects_ints_and_none(manager: Manager) -> None:
    conn = manager.listen("tcp://127.0.0.1:0")
    for bad in (5, None, 3.5, object()):
        with pytest.raises(TypeError, match="data"):
            conn.send(bad)  # type: ignore[arg-type]
    conn.send(bytearray(b"ok"))
    conn.send(memoryview(b"ok"))


def test_tcp_client_connect_and_peer_close() -> None:
    events: list[int] = []
    got = bytearray()

    def handler(conn: Connection, ev: int, data: Any) -> None:
        events.append(ev)
        if ev == MG_EV_CONNECT:
            conn.send(b"ping")
        elif ev == MG_EV_READ:
            got.extend(conn.recv_data(consume=True))

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    with Manager(handler) as mgr:
        client = mgr.connect(f"tcp://127.0.0.1:{port}")
        assert client.is_client
        wait_for(lambda: MG_EV_CONNECT in events and client.send_len == 0, 5.0,
                 "MG_EV_CONNECT in events and client.send_len == 0", manager=mgr)
        peer, _ = srv.accept()
        assert peer.recv(4) == b"ping"
        peer.sendall(b"pong")
        wait_for(lambda: bytes(got) == b"pong", 5.0, 'bytes(got) == b"pong"', manager=mgr)
        peer.close()
        wait_for(lambda: MG_EV_CLOSE in events, 5.0, "MG_EV_CLOSE in events", manager=mgr)
        assert client.id == 0
        with pytest.raises(RuntimeError, match="closed"):
            client.send(b"late")
    srv.close()


def test_connect_refused_reports_error_then_close() -> None:
    events: list[tuple[int, Any]] = []
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    free = port.getsockname()[1]
    port.close()
    with Manager(lambda c, ev, d: events.append((ev, d))) as mgr:
        mgr.connect(f"tcp://127.0.0.1:{free}")
        wait_for(lambda: any(ev == MG_EV_CLOSE for ev, _ in events), 5.0,
                 "any(ev == MG_EV_CLOSE for ev, _ in events)", manager=mgr)
    errors = [d for ev, d in events if ev == MG_EV_ERROR]
    assert errors and isinstance(errors[0], str) and errors[0]


def test_error_method_fires_error_event_and_closes() -> None:
    events: list[tuple[int, Any]] = []

    def handler(conn: Connection, ev: int, data: Any) -> None:
        events.append((ev, data))
        if ev == MG_EV_ACCEPT:
            conn.error("bad peer: " + "x" * 200)

    with Manager(handler) as mgr:
        port = mgr.listen("tcp://127.0.0.1:0").local_addr[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            wait_for(lambda: any(ev == MG_EV_CLOSE for ev, _ in events), 5.0,
                     "any(ev == MG_EV_CLOSE for ev, _ in events)", manager=mgr)
            s.settimeout(2)
            assert s.recv(10) == b""
    errors = [d for ev, d in events if ev == MG_EV_ERROR]
    assert errors[0].startswith("bad peer: xxx") and len(errors[0]) <= 63


def test_drain_flushes_then_closes() -> None:
    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_ACCEPT:
            conn.send(b"z" * 300_000)
            conn.drain()
            assert conn.is_draining

    with Manager(handler) as mgr:
        port = mgr.listen("tcp://127.0.0.1:0").local_addr[1]
        got = bytearray()
        done = threading.Event()

        def client() -> None:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                while chunk := s.recv(65536):
                    got.extend(chunk)
            done.set()

        t = threading.Thread(target=client)
        t.start()
        wait_for(done.is_set, 10, "done.is_set", manager=mgr)
        t.join()
    assert len(got) == 300_000


def test_udp_listener_and_addresses(manager: Manager) -> None:
    got: list[bytes] = []

    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_READ:
            got.append(conn.recv_data(consume=True))

    lst = manager.listen("udp://127.0.0.1:0", handler)
    assert lst.is_udp and lst.local_addr[0] == "127.0.0.1" and lst.local_addr[2] is False
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"dgram", ("127.0.0.1", lst.local_addr[1]))
        wait_for(lambda: bool(got), 5.0, "bool(got)", manager=manager)
    assert got == [b"dgram"]


def test_unconsumed_receive_buffer_is_capped() -> None:
    events: list[tuple[int, Any]] = []

    def hoarder(conn: Connection, ev: int, data: Any) -> None:
        events.append((ev, data))  # never consumes what arrives

    with Manager(hoarder) as mgr:
        with pytest.raises(ValueError):
            mgr.max_recv_size = 10
        with pytest.raises(TypeError):
            mgr.max_recv_size = "big"  # type: ignore[assignment]
        mgr.max_recv_size = 64 * 1024
        assert mgr.max_recv_size == 64 * 1024
        port = mgr.listen("tcp://127.0.0.1:0").local_addr[1]
        sent = [0]

        def flood() -> None:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                    for _ in range(64):
                        s.sendall(b"x" * 16384)
                        sent[0] += 16384
            except OSError:
                pass  # the server closed on us: expected

        t = threading.Thread(target=flood)
        t.start()
        wait_for(lambda: any(ev == MG_EV_CLOSE for ev, _ in events), 10,
                 "any(ev == MG_EV_CLOSE for ev, _ in events)", manager=mgr)
        t.join(10)
    errors = [d for ev, d in events if ev == MG_EV_ERROR]
    assert errors and "max_recv_size" in errors[0]
