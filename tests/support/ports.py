"""Loopback listening sockets whose port the kernel picks (never a hard-coded port)."""

from __future__ import annotations

import socket

HOST = "127.0.0.1"


def bound_listener(host: str = HOST, backlog: int = 128) -> socket.socket:
    """A TCP socket bound to a free port on `host` and already listening: hand its file
    descriptor to a server process, so there is no window in which the port could be taken."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    sock.listen(backlog)
    return sock


def free_port(host: str = HOST) -> int:
    """A port that was free a moment ago (for servers that must bind it themselves)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
