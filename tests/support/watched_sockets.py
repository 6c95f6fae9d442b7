"""What a socket watch is on: the addresses of the socket open under a descriptor, and those
of a Manager's connections, to check that per-socket watches (Manager.watch_changes(),
aio.LoopDriver without epoll) are on exactly the Manager's sockets."""

from __future__ import annotations

import socket
from collections.abc import Iterable
from typing import Any

from cymongoose import Manager

Names = tuple[Any, Any]  # (local (host, port), peer (host, port) or None)


def socket_names(fd: int) -> Names:
    """The addresses of the socket open under `fd` (a duplicate is made and closed)."""
    with socket.socket(fileno=socket.dup(fd)) as s:
        try:
            peer = tuple(s.getpeername()[:2])
        except OSError:
            peer = None
        return tuple(s.getsockname()[:2]), peer


def connection_names(manager: Manager) -> list[Names]:
    out = []
    for conn in manager.connections:
        local, remote = conn.local_addr, conn.remote_addr
        peer = None if conn.is_listening or remote is None or remote[1] == 0 else remote[:2]
        out.append((local[:2] if local else None, peer))
    return out


def is_datagram(fd: int) -> bool:
    with socket.socket(fileno=socket.dup(fd)) as s:
        return s.type == socket.SOCK_DGRAM


def assert_watched_are_the_managers(manager: Manager, fds: Iterable[int], *,
                                    wakeup_pipe: bool = False) -> None:
    """One watch per connection of `manager`, each on that connection's socket; and with
    `wakeup_pipe`, one on the wakeup pipe's datagram socket, which `connections` leaves out."""
    fds = list(fds)
    if wakeup_pipe:
        pipes = [fd for fd in fds if is_datagram(fd)]
        assert len(pipes) == 1, pipes
        fds.remove(pipes[0])
    watched = sorted(map(repr, (socket_names(fd) for fd in fds)))
    assert watched == sorted(map(repr, connection_names(manager)))
