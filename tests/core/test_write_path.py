"""How responses leave the send buffer (vendor/mongoose/build_fixes.py, EPOLL_INTEREST):
what a handler queues while reading a request is written in the same poll() iteration, and
a socket that stops taking bytes is waited on (EPOLLOUT) rather than retried in a spin.
The loop is driven by hand from the test thread, so each step is observed exactly."""

from __future__ import annotations

import select
import socket
from typing import Any

import pytest
from support.waiting import polls_within, wait_for

from cymongoose import MG_EV_HTTP_MSG, Connection, Manager

pytestmark = pytest.mark.timeout(30)

REQUEST = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n"


def _server(body: bytes) -> tuple[Manager, int, list[int]]:
    seen: list[int] = []

    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            seen.append(1)
            conn.reply(200, body, headers={"Content-Type": "application/octet-stream"})

    mgr = Manager(handler)
    listener = mgr.listen("http://127.0.0.1:0")
    local = listener.local_addr
    assert local is not None
    return mgr, local[1], seen


def test_answer_leaves_in_the_iteration_that_read_the_request() -> None:
    mgr, port, seen = _server(b"hello")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
            wait_for(lambda: len(mgr.connections) >= 2, 5.0, "len(mgr.connections) >= 2",
                     manager=mgr)  # listener + accepted
            client.sendall(REQUEST)
            wait_for(lambda: seen, 5.0, "seen", manager=mgr)
            # No further poll(): the answer must already be on its way.
            readable, _, _ = select.select([client], [], [], 1.0)
            assert readable, "the response waited for the next poll() iteration"
            data = client.recv(65536)
            assert data.startswith(b"HTTP/1.1 200 OK\r\n") and data.endswith(b"\r\n\r\nhello")
    finally:
        mgr.close()


def test_reader_that_pauses_gets_the_whole_response_and_the_loop_waits_meanwhile() -> None:
    size = 8 << 20
    body = bytes(range(256)) * (size // 256)
    mgr, port, seen = _server(body)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as client:
            client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
            client.settimeout(5)
            client.connect(("127.0.0.1", port))
            client.sendall(REQUEST)
            wait_for(lambda: seen, 5.0, "seen", manager=mgr)
            # The client reads nothing for a while: the socket fills, the rest waits in
            # the send buffer, and poll(10) must sleep rather than retry the write.
            polls = polls_within(mgr, 0.5, 10)
            assert polls <= 60, f"poll() spun {polls} times in 0.5 s with a blocked client"
            conn = next(c for c in mgr.connections if not c.is_listening)
            assert conn.send_len > 0
            got = bytearray()
            client.setblocking(False)

            def arrived() -> bool:
                try:
                    while chunk := client.recv(1 << 20):
                        got.extend(chunk)
                except BlockingIOError:
                    pass
                return got.endswith(body[-64:]) and len(got) >= size

            wait_for(arrived, 20, lambda: f"the whole body (only {len(got)} bytes arrived)",
                     manager=mgr, poll_ms=1)
            head, _, rest = bytes(got).partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 OK") and rest == body
    finally:
        mgr.close()
