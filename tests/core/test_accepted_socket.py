"""ACCEPT4 (vendor/mongoose/inventory.py): on Linux an accepted socket is made non-blocking
and close-on-exec by accept4() itself, not by fcntl() calls after it. The flags are what
Mongoose set before; the test fails if the fix loses one (the fcntl() calls are gone, so an
accept4() without SOCK_NONBLOCK would leave a blocking socket in the loop). It cannot see
the system calls saved (tests/benchmarks/profile_callgrind.py counts those)."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cymongoose import MG_EV_ACCEPT, Connection, Manager

pytestmark = [
    pytest.mark.timeout(30),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux)"),
]


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


def test_an_accepted_socket_is_non_blocking_and_close_on_exec() -> None:
    accepted: list[Connection] = []

    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_ACCEPT:
            accepted.append(conn)

    with Manager(handler) as mgr:
        local = mgr.listen("tcp://127.0.0.1:0").local_addr
        assert local is not None
        with socket.create_connection(("127.0.0.1", local[1]), timeout=5) as client:
            deadline = time.monotonic() + 10
            while not accepted:
                assert time.monotonic() < deadline, "the connection was not accepted in 10 s"
                mgr.poll(10)
            fd = _fd_of(_socket_inode(local[1], client.getsockname()[1]))
            flags = _flags(fd)
            assert flags & os.O_NONBLOCK, f"flags {flags:o}: blocking"
            assert flags & os.O_CLOEXEC, f"flags {flags:o}: inherited across exec"
            assert not os.get_blocking(fd) and not os.get_inheritable(fd)
