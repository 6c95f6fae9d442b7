"""Streams through the reverse proxy: server-sent events flushed as they come, a WebSocket
tunnelled both ways, a large response to a slow reader and a large upload to an upstream
that does not read, without the proxy's memory growing (back-pressure: neither side is read
while the other is behind)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.cli_run import CLI
from support.ports import HOST, free_port
from support.rss import RssSampler
from support.waiting import wait_for
from support.ws_echo import assert_echoes

from cymongoose import MG_EV_WS_MSG

pytestmark = pytest.mark.timeout(60)


def test_server_sent_events_reach_the_client_as_they_are_sent(upstream: Any,
                                                              proxy: Any) -> None:
    streams: list[Any] = []
    sent_at: list[float] = []

    def events(conn: Any, msg: Any) -> None:
        conn.http_begin(200, [("Content-Type", "text/event-stream"),
                              ("Cache-Control", "no-cache")])
        sent_at.append(time.monotonic())
        conn.http_write(b"data: one\n\n")
        streams.append(conn)  # the rest only when the test says so

    up = upstream(answers={"/events": events})
    p = proxy({"/": up.url})
    with socket.create_connection((HOST, p.port), timeout=10) as sock:
        sock.sendall(b"GET /events HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n\r\n")
        got = b""
        while b"data: one\n\n" not in got:
            chunk = sock.recv(4096)
            assert chunk, got
            got += chunk
        latency = time.monotonic() - sent_at[0]
        assert b"HTTP/1.1 200 OK\r\n" in got and b"text/event-stream" in got
        # The upstream still holds its response open: the event was not waiting for more.
        assert latency < 0.1, f"first event {latency * 1000:.1f} ms after it was sent"
        up.thread.call(lambda: (streams[0].http_write(b"data: two\n\n"), streams[0].http_end()))
        while not got.endswith(b"0\r\n\r\n"):
            chunk = sock.recv(4096)
            assert chunk, got
            got += chunk
        assert b"data: two\n\n" in got


def test_a_websocket_is_tunnelled_through_the_proxy(upstream: Any, proxy: Any) -> None:
    def upgrade(conn: Any, msg: Any) -> None:
        conn.ws_upgrade(msg)

    up = upstream(answers={"/ws": upgrade})

    def echo(conn: Any, ev: int, data: Any) -> None:
        if ev == MG_EV_WS_MSG:
            conn.ws_send(data.data, data.flags & 0x0F)

    up.ws_handler = echo
    p = proxy({"/": up.url})
    assert_echoes(f"ws://{HOST}:{p.port}/ws")
    assert p.stats()[0]["opened"] == 1


@pytest.mark.no_asan  # RSS under ASan includes its quarantine
def test_a_slow_reader_of_256_mib_leaves_the_proxy_rss_flat(upstream: Any,
                                                            tmp_path: Path) -> None:
    size = 256 << 20
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        f.truncate(size)  # sparse: no disk traffic

    def serve_big(conn: Any, msg: Any) -> None:
        conn.serve_file(msg, str(big))

    up = upstream(answers={"/big": serve_big})
    port = free_port()
    cli = CLI(tmp_path, "--proxy", f"/={up.url}", "--port", str(port))
    try:
        cli.wait_http(port, "/not-routed")
        with socket.create_connection((HOST, port), timeout=20) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            sock.sendall(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n")
            with RssSampler(cli.proc.pid) as rss:
                time.sleep(0.5)  # not reading: every buffer on the way fills up
                got = 0
                head = b""
                while b"\r\n\r\n" not in head:
                    head += sock.recv(4096)
                got = len(head.partition(b"\r\n\r\n")[2])
                while got < size:
                    chunk = sock.recv(1 << 17)
                    assert chunk, f"cut at {got} bytes"
                    got += len(chunk)
                    if got % (4 << 20) < len(chunk):
                        time.sleep(0.005)  # a slow reader: pauses every 4 MiB
            assert b"Content-Length: 268435456" in head
        assert got == size
        print(f"proxy RSS growth {rss.growth / 1024:.0f} KiB")
        assert rss.growth < 8 << 20, f"proxy RSS grew {rss.growth >> 20} MiB"
    finally:
        cli.stop()


@pytest.mark.no_asan  # RSS under ASan includes its quarantine
def test_an_upload_to_an_upstream_that_does_not_read_is_held_back(raw_upstream: Any,
                                                                  proxy: Any) -> None:
    # The upstream takes the head and then reads nothing: the proxy may not buffer the
    # body for it, so the client's send stalls once the buffers on the way are full.
    up = raw_upstream(lambda head: None)
    p = proxy({"/": up.url}, limits={"max_body_size": 256 << 20})
    body = b"u" * (128 << 20)
    sent = [0]

    def upload(sock: socket.socket) -> None:
        view = memoryview(body)
        try:
            while sent[0] < len(body):
                sent[0] += sock.send(view[sent[0]:sent[0] + (1 << 20)])
        except OSError:
            pass  # closed at the end of the test

    with socket.create_connection((HOST, p.port), timeout=30) as sock:
        sock.sendall(b"PUT /upload HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n"
                     % len(body))
        with RssSampler() as rss:
            thread = threading.Thread(target=upload, args=(sock,), daemon=True)
            thread.start()
            wait_for(lambda: len(up.requests) == 1 and sent[0] > 0, 10,
                     "len(up.requests) == 1 and sent[0] > 0")
            # Stalled: nothing more goes out for a while, far short of the body.
            wait_for(lambda: _settled(sent), 10, "_settled(sent)")
            stalled = sent[0]
        sock.shutdown(socket.SHUT_RDWR)
        thread.join(10)
    assert stalled < 64 << 20, f"{stalled >> 20} MiB went out"
    assert rss.growth < 16 << 20, f"RSS grew {rss.growth >> 20} MiB"


def _settled(sent: list[int]) -> bool:
    before = sent[0]
    time.sleep(0.2)
    return sent[0] == before > 0
