"""FAST_BZERO (vendor/mongoose/inventory.py): Mongoose wipes every byte it consumes or frees
(mg_bzero) and our build does it with memset() behind a compiler barrier instead of a
volatile byte loop.

What a test can show: the wipe touches only bytes Mongoose is done with. Bytes taken from the
receive buffer in odd-sized pieces (each take moves the rest down and wipes the tail), echoed
through the send buffer (wiped as the socket takes them), across buffer growth (the old one
wiped and freed) and on a second connection that reuses freed memory, all arrive intact.
What it cannot show: that the freed bytes are zero (Python never sees freed memory) or that
the wipe is faster (docs/performance.md measures that with callgrind)."""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
from typing import Any

import pytest

from cymongoose import MG_EV_READ, Connection, Manager

pytestmark = pytest.mark.timeout(60)

SIZE = 1 << 20  # several times MG_IO_SIZE: the receive buffer grows and is wiped as it does
PIECE = 777  # not a divisor of any buffer size: every take leaves a remainder to move


def _echo_once(mgr: Manager, port: int, payload: bytes) -> bytes:
    echoed = bytearray()
    errors: list[BaseException] = []

    def client() -> None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
                sender = threading.Thread(target=s.sendall, args=(payload,), daemon=True)
                sender.start()
                while len(echoed) < len(payload):
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    echoed.extend(chunk)
                sender.join(20)
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    deadline = time.monotonic() + 40
    while thread.is_alive():
        assert time.monotonic() < deadline, f"echoed {len(echoed)} of {len(payload)} bytes"
        mgr.poll(10)
    assert not errors, errors
    return bytes(echoed)


def test_bytes_survive_partial_consumption_and_buffer_reuse() -> None:
    received = [hashlib.sha256()]

    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev != MG_EV_READ:
            return
        while conn.recv_len > 0:
            piece = conn.recv_data(min(PIECE, conn.recv_len), consume=True)
            received[0].update(piece)
            conn.send(piece)

    with Manager(handler) as mgr:
        local = mgr.listen("tcp://127.0.0.1:0").local_addr
        assert local is not None
        for _ in range(2):  # the second connection gets memory the first one freed
            received[0] = hashlib.sha256()
            payload = os.urandom(SIZE)
            echoed = _echo_once(mgr, local[1], payload)
            assert received[0].digest() == hashlib.sha256(payload).digest()
            assert echoed == payload
