"""Loopback listening sockets and ports for the tests' servers (never a hard-coded port)."""

from __future__ import annotations

import socket
import threading

HOST = "127.0.0.1"

# free_port() hands out ports from a block of its own per test process, below the kernel's
# ephemeral range (32768-60999 by default), where bind(0) and outgoing connections never
# land. It used to take the kernel's bind(0) port and close it: make test runs its legs
# side by side, and once another leg's server took such a port before ours bound it (the
# test then talked to a proxy of another leg and got its 404). A process claims block k by
# keeping its first port bound for its whole life, so two processes never share one.
_FIRST = 10000
_BLOCK = 1500
_BLOCKS = 14  # 10000-30999
_lock = threading.Lock()
_claim: socket.socket | None = None
_next = 0
_end = 0


def bound_listener(host: str = HOST, backlog: int = 128) -> socket.socket:
    """A TCP socket bound to a free port on `host` and already listening: hand its file
    descriptor to a server process, so there is no window in which the port could be taken."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    sock.listen(backlog)
    return sock


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As the servers bind (Mongoose sets SO_REUSEADDR): a port whose last connections
        # linger in TIME_WAIT is free for them; one a socket listens on is not.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def _claim_block() -> bool:
    """Claim a block for this process (once); False when every block is taken."""
    global _claim, _next, _end
    for k in range(_BLOCKS):
        first = _FIRST + k * _BLOCK
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((HOST, first))  # no SO_REUSEADDR: a claimed block's first port is busy
        except OSError:
            sock.close()
            continue
        _claim, _next, _end = sock, first + 1, first + _BLOCK
        return True
    return False


def free_port(host: str = HOST) -> int:
    """A port free now, which no other test process of this machine hands out (for servers
    that must bind it themselves)."""
    global _next
    with _lock:
        if _claim is not None or _claim_block():
            assert _claim is not None
            start = int(_claim.getsockname()[1]) + 1
            for _ in range(_BLOCK - 1):
                port = _next
                _next = _next + 1 if _next + 1 < _end else start
                if _bindable(host, port):
                    return port
    # Every block taken (or every port of ours busy): the kernel's choice, as before.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
