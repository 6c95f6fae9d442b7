"""Raw TCP and UDP: servers and clients against plain Python sockets, echo with
recv_data(consume=True), multi-MiB transfers with send-side back-pressure, datagrams
both ways, and peer-close detection."""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.waiting import recv_polling, wait_for

import cymongoose as cm


class Poller:
    """Polls a Manager on a background thread (for tests whose peer blocks the main one)."""

    def __init__(self, mgr: cm.Manager) -> None:
        self.mgr = mgr
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                self.mgr.poll(5)
        except BaseException as exc:
            self.errors.append(exc)

    def join(self) -> None:
        self.stop.set()
        self.thread.join(10)
        assert not self.thread.is_alive()
        assert self.errors == []


@pytest.fixture
def polled() -> Iterator[Callable[[cm.Manager], Poller]]:
    pollers: list[Poller] = []

    def start(mgr: cm.Manager) -> Poller:
        p = Poller(mgr)
        pollers.append(p)
        return p

    yield start
    for p in pollers:
        p.stop.set()
        p.thread.join(10)


def echo_handler(
        log: list[tuple[int, Any]] | None = None) -> Callable[[cm.Connection, int, Any], None]:
    def handler(conn: cm.Connection, ev: int, data: Any) -> None:
        if log is not None:
            log.append((ev, data))
        if ev == cm.MG_EV_READ:
            conn.send(conn.recv_data(consume=True))

    return handler


def recv_exactly(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(min(1 << 16, n - len(buf)))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


# TCP


def test_tcp_listener_is_raw_and_echoes_each_chunk_once(polled: Callable[..., Poller]) -> None:
    log: list[tuple[int, Any]] = []
    with cm.Manager() as mgr:
        lsn = mgr.listen("tcp://127.0.0.1:0", echo_handler(log))
        assert lsn.is_listening and not lsn.is_udp
        port = lsn.local_addr[1]
        p = polled(mgr)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            # HTTP-looking bytes stay raw bytes: tcp:// infers http=False.
            for chunk in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\x00\x01\x02", b"z" * 5000):
                s.sendall(chunk)
                assert recv_exactly(s, len(chunk)) == chunk
            s.settimeout(0.2)
            with pytest.raises(TimeoutError):  # nothing echoed twice
                s.recv(1)
        p.join()
    evs = [ev for ev, _ in log]
    assert cm.MG_EV_HTTP_MSG not in evs
    assert cm.MG_EV_ACCEPT in evs and evs[-1] == cm.MG_EV_CLOSE
    assert all(data is None for ev, data in log if ev == cm.MG_EV_READ)


def test_recv_data_length_and_consume() -> None:
    seen: list[tuple[bytes, bytes, int]] = []

    def handler(conn: cm.Connection, ev: int, data: Any) -> None:
        if ev == cm.MG_EV_READ and conn.recv_len >= 10:
            head = conn.recv_data(4, consume=True)
            peek = conn.recv_data(2)  # not consumed
            seen.append((head, peek, conn.recv_len))
            conn.recv_data(consume=True)

    with cm.Manager() as mgr:
        port = mgr.listen("tcp://127.0.0.1:0", handler).local_addr[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"0123456789")
            wait_for(lambda: bool(seen), 5, "data", manager=mgr)
            conns = [c for c in mgr.connections if not c.is_listening]
            assert conns[0].recv_len == 0
    assert seen == [(b"0123", b"45", 6)]


def test_tcp_client_to_python_echo_server() -> None:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(5)
    port = srv.getsockname()[1]

    def serve() -> None:
        c, _ = srv.accept()
        with c:
            while True:
                data = c.recv(65536)
                if not data:
                    break
                c.sendall(data)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    got = bytearray()
    events: list[int] = []
    payload = os.urandom(300_000)

    def handler(conn: cm.Connection, ev: int, data: Any) -> None:
        events.append(ev)
        if ev == cm.MG_EV_CONNECT:
            conn.send(payload)
        elif ev == cm.MG_EV_READ:
            got.extend(conn.recv_data(consume=True))
            if len(got) == len(payload):
                conn.close()

    with cm.Manager() as mgr:
        conn = mgr.connect(f"tcp://127.0.0.1:{port}", handler)
        assert conn.is_client and not conn.is_udp
        wait_for(lambda: cm.MG_EV_CLOSE in events, 10, "echo and close", manager=mgr)
    t.join(5)
    srv.close()
    assert bytes(got) == payload
    assert events.index(cm.MG_EV_CONNECT) < events.index(cm.MG_EV_READ)


MIB = 1024 * 1024


def test_large_upload_with_send_side_back_pressure() -> None:
    """Our client sends 8 MiB to a slow Python reader, feeding its send buffer only while
    it holds less than HIGH bytes (refilled on MG_EV_WRITE/POLL): the buffer stays
    bounded and every byte arrives in order."""
    total, piece, high = 8 * MIB, 64 * 1024, 256 * 1024
    data = os.urandom(total)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(10)
    port = srv.getsockname()[1]
    result: dict[str, Any] = {}

    def slow_reader() -> None:
        c, _ = srv.accept()
        with c:
            h = hashlib.sha256()
            n = 0
            while True:
                chunk = c.recv(32 * 1024)
                if not chunk:
                    break
                h.update(chunk)
                n += len(chunk)
                if n < 2 * MIB:
                    time.sleep(0.001)  # slow at first: the sender must wait
            result.update(n=n, digest=h.digest())

    t = threading.Thread(target=slow_reader, daemon=True)
    t.start()
    state = {"off": 0, "max_send": 0, "closed": False}

    def feed(conn: cm.Connection) -> None:
        while state["off"] < total and conn.send_len < high:
            conn.send(data[state["off"]:state["off"] + piece])
            state["off"] += piece
        state["max_send"] = max(state["max_send"], conn.send_len)
        if state["off"] >= total and conn.send_len == 0:
            conn.close()

    def handler(conn: cm.Connection, ev: int, _data: Any) -> None:
        if ev in (cm.MG_EV_CONNECT, cm.MG_EV_WRITE, cm.MG_EV_POLL) and conn.is_client:
            if ev == cm.MG_EV_CONNECT or state["off"] > 0:
                feed(conn)
        elif ev == cm.MG_EV_CLOSE:
            state["closed"] = True

    with cm.Manager() as mgr:
        start = time.perf_counter()
        mgr.connect(f"tcp://127.0.0.1:{port}", handler)
        wait_for(lambda: bool(state["closed"]), 30, "upload", manager=mgr)
        elapsed = time.perf_counter() - start
    t.join(10)
    srv.close()
    assert result["n"] == total
    assert result["digest"] == hashlib.sha256(data).digest()
    assert state["max_send"] < high + piece
    print(f"\nupload 8 MiB with a {high // 1024} KiB send window: {elapsed:.2f} s")


def test_large_echo_through_our_server(polled: Callable[..., Poller]) -> None:
    """4 MiB through our echo server, written and read concurrently by a Python client:
    the echo is byte-exact (each chunk consumed and echoed exactly once)."""
    total = 4 * MIB
    data = os.urandom(total)
    with cm.Manager() as mgr:
        port = mgr.listen("tcp://127.0.0.1:0", echo_handler()).local_addr[1]
        p = polled(mgr)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            writer = threading.Thread(target=s.sendall, args=(data,), daemon=True)
            writer.start()
            echoed = recv_exactly(s, total)
            writer.join(10)
            s.settimeout(0.2)
            with pytest.raises(TimeoutError):
                s.recv(1)
        p.join()
    assert len(echoed) == total and echoed == data


def test_large_download_from_our_server() -> None:
    """Our server pushes 8 MiB with the same bounded-buffer feeding to a Python client
    reading in a thread."""
    total, piece, high = 8 * MIB, 64 * 1024, 512 * 1024
    data = os.urandom(total)
    state: dict[str, Any] = {"off": 0, "max_send": 0}

    def handler(conn: cm.Connection, ev: int, _data: Any) -> None:
        if conn.is_listening:
            return
        if ev in (cm.MG_EV_ACCEPT, cm.MG_EV_WRITE, cm.MG_EV_POLL):
            while state["off"] < total and conn.send_len < high:
                conn.send(data[state["off"]:state["off"] + piece])
                state["off"] += piece
            state["max_send"] = max(state["max_send"], conn.send_len)
            if state["off"] >= total:
                conn.drain()  # flush, then close

    result: dict[str, bytes] = {}
    with cm.Manager() as mgr:
        port = mgr.listen("tcp://127.0.0.1:0", handler).local_addr[1]
        s = socket.create_connection(("127.0.0.1", port), timeout=10)

        def read_all() -> None:
            buf = bytearray()
            while True:
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                buf += chunk
            result["data"] = bytes(buf)

        t = threading.Thread(target=read_all, daemon=True)
        t.start()
        wait_for(lambda: "data" in result, 30, "download", manager=mgr)
        t.join(5)
        s.close()
    assert result["data"] == data
    assert state["max_send"] < high + piece


def test_peer_close_detected_on_both_sides() -> None:
    events: dict[str, list[int]] = {"server": [], "client": []}
    with cm.Manager() as mgr:
        port = mgr.listen(
            "tcp://127.0.0.1:0", lambda c, ev, d: events["server"].append(ev)).local_addr[1]
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        wait_for(lambda: cm.MG_EV_ACCEPT in events["server"], 5, "accept", manager=mgr)
        s.sendall(b"bye")
        s.close()
        wait_for(lambda: cm.MG_EV_CLOSE in events["server"], 5, "server-side close", manager=mgr)
        assert events["server"].count(cm.MG_EV_CLOSE) == 1
        assert cm.MG_EV_READ in events["server"]

        # A Python server that accepts and closes at once: our client sees the close.
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        srv.settimeout(5)
        cport = srv.getsockname()[1]
        t = threading.Thread(target=lambda: srv.accept()[0].close(), daemon=True)
        t.start()
        conn = mgr.connect(f"tcp://127.0.0.1:{cport}",
                           lambda c, ev, d: events["client"].append(ev))
        wait_for(lambda: cm.MG_EV_CLOSE in events["client"], 5, "client-side close", manager=mgr)
        t.join(5)
        srv.close()
        assert conn.is_closing and conn.id == 0 and conn.remote_addr is None
        with pytest.raises(RuntimeError, match="Connection has been closed"):
            conn.send(b"x")
        assert events["client"].index(cm.MG_EV_CONNECT) < events["client"].index(cm.MG_EV_CLOSE)


def test_connection_refused_is_an_error_event() -> None:
    # A port nobody listens on: bind then close a socket to learn one.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log: list[tuple[int, Any]] = []
    with cm.Manager() as mgr:
        mgr.connect(f"tcp://127.0.0.1:{port}", lambda c, ev, d: log.append((ev, d)))
        wait_for(lambda: any(ev == cm.MG_EV_CLOSE for ev, _ in log), 5, "close", manager=mgr)
    errors = [d for ev, d in log if ev == cm.MG_EV_ERROR]
    assert len(errors) == 1 and isinstance(errors[0], str) and errors[0]
    assert cm.MG_EV_CONNECT not in [ev for ev, _ in log]


# UDP


def test_udp_server_echoes_datagrams_to_each_sender() -> None:
    seen: list[tuple[bytes, tuple[str, int, bool]]] = []

    def handler(conn: cm.Connection, ev: int, data: Any) -> None:
        if ev == cm.MG_EV_READ:
            dgram = conn.recv_data(consume=True)
            seen.append((dgram, conn.remote_addr))
            conn.send(b"echo:" + dgram)

    with cm.Manager() as mgr:
        lsn = mgr.listen("udp://127.0.0.1:0", handler)
        assert lsn.is_udp and lsn.is_listening
        port = lsn.local_addr[1]
        a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            a.bind(("127.0.0.1", 0))
            b.bind(("127.0.0.1", 0))
            ports = {"a": a.getsockname()[1], "b": b.getsockname()[1]}
            socks = {"a": a, "b": b}
            for sock in socks.values():
                sock.setblocking(False)
            replies: list[tuple[str, bytes]] = []
            sends = [("a", b"one"), ("b", b"two"), ("a", b"\x00three"), ("b", b"x" * 1400)]
            for name, payload in sends:
                # One at a time: a UDP listener's send() goes to the latest sender.
                socks[name].sendto(payload, ("127.0.0.1", port))
                want = len(replies) + 1

                def replied() -> bool:
                    for n, sock in socks.items():  # noqa: B023 (called within this iteration)
                        try:
                            replies.append((n, sock.recv(2048)))
                        except BlockingIOError:
                            pass
                    return len(replies) >= want  # noqa: B023

                wait_for(replied, 5, "a UDP reply", manager=mgr)
        finally:
            a.close()
            b.close()
    assert replies == [(n, b"echo:" + p) for n, p in sends]
    assert [(d, addr[:2]) for d, addr in seen] == [
        (p, ("127.0.0.1", ports[n])) for n, p in sends]


def test_udp_client_to_python_echo() -> None:
    srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    srv.bind(("127.0.0.1", 0))
    srv.settimeout(0.05)  # lets the thread notice `stop` quickly
    port = srv.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                data, addr = srv.recvfrom(2048)
            except (TimeoutError, OSError):
                continue
            srv.sendto(data[::-1], addr)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    got: list[bytes] = []
    payloads = [b"abc", b"\x00\x01", b"y" * 1000]

    def handler(conn: cm.Connection, ev: int, data: Any) -> None:
        if ev == cm.MG_EV_CONNECT:
            conn.send(payloads[0])
        elif ev == cm.MG_EV_READ:
            got.append(conn.recv_data(consume=True))
            if len(got) < len(payloads):
                conn.send(payloads[len(got)])

    try:
        with cm.Manager() as mgr:
            conn = mgr.connect(f"udp://127.0.0.1:{port}", handler)
            assert conn.is_udp and conn.is_client
            wait_for(lambda: len(got) == len(payloads), 5, "UDP replies", manager=mgr)
            assert conn.remote_addr == ("127.0.0.1", port, False)
    finally:
        stop.set()
        t.join(10)
        srv.close()
    assert got == [p[::-1] for p in payloads]


def test_ipv6_tcp_echo() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no ::1")
    with cm.Manager() as mgr:
        lsn = mgr.listen("tcp://[::1]:0", echo_handler())
        assert lsn.local_addr is not None and lsn.local_addr[2] is True
        port = lsn.local_addr[1]
        with socket.create_connection(("::1", port), timeout=5) as s:
            s.setblocking(False)
            s.sendall(b"six")
            got = recv_polling(mgr, s, b"six")
    assert got == b"six"
