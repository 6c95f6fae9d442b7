"""Thousands of keep-alive HTTP clients from one thread: non-blocking sockets multiplexed with
`selectors`, so a test can hold more connections than it could run threads."""

from __future__ import annotations

import errno
import resource
import selectors
import socket
import time


def raise_own_fd_limit(need: int) -> None:
    """Lift this process's soft open-file limit so it can hold `need` more sockets."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = need + 256
    if soft != resource.RLIM_INFINITY and soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            raise RuntimeError(f"the test needs {want} open files; the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


# Linux's IP_BIND_ADDRESS_NO_PORT (the socket module names it from Python 3.12 only).
IP_BIND_ADDRESS_NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)


def open_many(port: int, count: int, timeout: float,
              source: str | None = None) -> list[socket.socket]:
    """`count` connected, non-blocking TCP sockets to 127.0.0.1:port.

    `source`: another local address to connect from (127.0.0.2), the port still chosen by
    connect(). Thousands of connections from 127.0.0.1 to one port make every later
    connect() from 127.0.0.1 to it search the ephemeral ports for a free one (about 1 ms
    with 15,000 held, in the kernel, before any packet is sent): a client timing its
    connection would measure that search, not the server."""
    socks: list[socket.socket] = []
    sel = selectors.DefaultSelector()
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            socks.append(s)
            if source is not None:
                s.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
                s.bind((source, 0))
            rc = s.connect_ex(("127.0.0.1", port))
            if rc not in (0, errno.EINPROGRESS):
                raise OSError(rc, f"connect: {errno.errorcode.get(rc, rc)}")
            sel.register(s, selectors.EVENT_WRITE)
        deadline = time.monotonic() + timeout
        pending = count
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{pending} of {count} connections not established")
            for key, _ in sel.select(min(left, 1.0)):
                s = key.fileobj
                assert isinstance(s, socket.socket)
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    raise OSError(err, f"connect: {errno.errorcode.get(err, err)}")
                sel.unregister(s)
                pending -= 1
    except BaseException:
        for s in socks:
            s.close()
        raise
    finally:
        sel.close()
    return socks


def _complete(buf: bytes) -> int:
    """Length of the first whole Content-Length framed response in buf, or 0."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return 0
    length = 0
    for line in buf[:end].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    total = end + 4 + length
    return total if len(buf) >= total else 0


def request_round(socks: list[socket.socket], request: bytes,
                  timeout: float) -> list[bytes]:
    """Send `request` on every socket, then read one response from each (in socket order)."""
    for s in socks:
        s.send(request)  # small: fits an empty socket buffer whole
    answers: list[bytes] = [b""] * len(socks)
    bufs = {s.fileno(): (i, bytearray()) for i, s in enumerate(socks)}
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    pending = len(socks)
    try:
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{pending} of {len(socks)} responses missing")
            for key, _ in sel.select(min(left, 1.0)):
                s = key.fileobj
                assert isinstance(s, socket.socket)
                i, buf = bufs[s.fileno()]
                data = s.recv(65536)
                if not data:
                    raise ConnectionError(f"client {i}: server closed before answering")
                buf += data
                n = _complete(bytes(buf))
                if n:
                    answers[i] = bytes(buf[:n])
                    sel.unregister(s)
                    pending -= 1
    finally:
        sel.close()
    return answers
