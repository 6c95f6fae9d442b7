"""An accepted connection's socket, as two build fixes leave it (vendor/mongoose/inventory.py).

ACCEPT4: on Linux an accepted socket is made non-blocking
and close-on-exec by accept4() itself, not by fcntl() calls after it. The flags are what
Mongoose set before; the test fails if the fix loses one (the fcntl() calls are gone, so an
accept4() without SOCK_NONBLOCK would leave a blocking socket in the loop). It cannot see
the system calls saved (tests/benchmarks/profile_callgrind.py counts those).

EPOLL_INTEREST: a connection whose reads are paused (is_full) leaves EPOLLIN out of its epoll
interest. Mongoose 7.23 kept it, so unread bytes in the socket made every level-triggered
epoll_wait() return at once: poll() spun instead of waiting."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.waiting import polls_within, wait_for

from cymongoose import MG_EV_ACCEPT, MG_EV_READ, Connection, Manager

pytestmark = pytest.mark.timeout(30)
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _accept(mgr: Manager, accepted: list[Connection]) -> tuple[socket.socket, int]:
    """A client connected to a new listener of mgr, once the handler saw MG_EV_ACCEPT."""
    local = mgr.listen("tcp://127.0.0.1:0").local_addr
    assert local is not None
    client = socket.create_connection(("127.0.0.1", local[1]), timeout=5)
    deadline = time.monotonic() + 10
    while not accepted:
        assert time.monotonic() < deadline, "the connection was not accepted in 10 s"
        mgr.poll(10)
    return client, local[1]


def _socket_inode(local_port: int, remote_port: int) -> int:
    """The inode of the established IPv4 socket 127.0.0.1:local_port <-> :remote_port."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
        if (int(local.split(":")[1], 16) == local_port
                and int(remote.split(":")[1], 16) == remote_port and state == "01"):
            return int(inode)
    raise AssertionError(f"no established socket 127.0.0.1:{local_port} <- :{remote_port}")


def _fd_of(inode: int) -> int:
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == f"socket:[{inode}]":
                return int(fd)
        except OSError:  # closed since listdir()
            continue
    raise AssertionError(f"socket:[{inode}] is not one of this process's descriptors")


def _flags(fd: int) -> int:
    for line in Path(f"/proc/self/fdinfo/{fd}").read_text().splitlines():
        if line.startswith("flags:"):
            return int(line.split()[1], 8)  # octal, as the kernel writes it
    raise AssertionError(f"no flags: line for descriptor {fd}")


@linux_only
def test_an_accepted_socket_is_non_blocking_and_close_on_exec() -> None:
    accepted: list[Connection] = []

    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_ACCEPT:
            accepted.append(conn)

    with Manager(handler) as mgr:
        client, port = _accept(mgr, accepted)
        with client:
            fd = _fd_of(_socket_inode(port, client.getsockname()[1]))
            flags = _flags(fd)
            assert flags & os.O_NONBLOCK, f"flags {flags:o}: blocking"
            assert flags & os.O_CLOEXEC, f"flags {flags:o}: inherited across exec"
            assert not os.get_blocking(fd) and not os.get_inheritable(fd)


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
        client, _ = _accept(mgr, accepted)
        with client:
            client.sendall(b"x" * 1000)
            # Each poll(100) should sleep its 100 ms: the bytes wait, nothing else happens.
            # A spinning loop returns at once, thousands of times in the same second.
            polls = polls_within(mgr, 1.0, 100)
            assert polls <= 30, f"{polls} polls in 1 s while reads were paused: spinning"
            assert accepted[0].is_full and not received
            accepted[0].pause_reading(False)  # once reads resume, the bytes are read
            wait_for(lambda: len(received) >= 1000, 10,
                     lambda: f"read {len(received)} of 1000 bytes", manager=mgr)
            assert bytes(received) == b"x" * 1000
