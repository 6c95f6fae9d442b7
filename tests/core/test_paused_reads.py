"""EPOLL_INTEREST (vendor/mongoose/inventory.py): a connection whose reads are paused
(is_full) leaves EPOLLIN out of its epoll interest. Mongoose 7.23 kept it, so unread bytes
in the socket made every level-triggered epoll_wait() return at once: poll() spun instead
of waiting. Once reads resume, the bytes are read."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest

from cymongoose import MG_EV_ACCEPT, MG_EV_READ, Connection, Manager

pytestmark = pytest.mark.timeout(30)


def test_a_paused_reader_with_bytes_waiting_lets_poll_sleep() -> None:
    accepted: list[Connection] = []
    received = bytearray()

    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_ACCEPT:
            conn.pause_reading()
            accepted.append(conn)
        elif ev == MG_EV_READ:
            received.extend(conn.recv_data(consume=True))

    with Manager(handler) as mgr:
        local = mgr.listen("tcp://127.0.0.1:0").local_addr
        assert local is not None
        with socket.create_connection(("127.0.0.1", local[1]), timeout=5) as client:
            deadline = time.monotonic() + 10
            while not accepted:
                assert time.monotonic() < deadline, "the connection was not accepted in 10 s"
                mgr.poll(10)
            client.sendall(b"x" * 1000)
            # Each poll(100) should sleep its 100 ms: the bytes wait, nothing else happens.
            # A spinning loop returns at once, thousands of times in the same second.
            polls = 0
            end = time.monotonic() + 1.0
            while time.monotonic() < end:
                mgr.poll(100)
                polls += 1
            assert polls <= 30, f"{polls} polls in 1 s while reads were paused: spinning"
            assert accepted[0].is_full and not received
            accepted[0].pause_reading(False)
            deadline = time.monotonic() + 10
            while len(received) < 1000:
                assert time.monotonic() < deadline, f"read {len(received)} of 1000 bytes"
                mgr.poll(10)
            assert bytes(received) == b"x" * 1000
