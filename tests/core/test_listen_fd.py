"""listen_fd(): a listener on a socket opened outside Mongoose (TCP bound in Python, a Unix
socket, an inherited descriptor), with HTTP parsing, limits and the caller's socket kept."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from support.poll_thread import ServerThread

from cymongoose import MG_EV_HTTP_MSG, Manager, listen_fd

pytestmark = pytest.mark.timeout(30)

REQUEST = b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n"


def _hello(conn, ev, msg):  # type: ignore[no-untyped-def]
    if ev == MG_EV_HTTP_MSG:
        conn.reply(200, msg.uri.encode())


def _ask(sock: socket.socket, request: bytes = REQUEST) -> bytes:
    sock.settimeout(5)
    sock.sendall(request)
    got = b""
    while b"\r\n\r\n" not in got or not got.endswith((b"/x", b"\n")):
        chunk = sock.recv(4096)
        if not chunk:
            break
        got += chunk
    return got


def test_tcp_socket_bound_in_python_serves_http() -> None:
    server = ServerThread(_hello)
    with socket.socket() as lsock:
        lsock.bind(("127.0.0.1", 0))
        lsock.listen()
        conn = listen_fd(server.manager, lsock, http=True)
        assert conn.is_listening and conn.local_addr[:2] == lsock.getsockname()
        server.start()
        try:
            with socket.create_connection(lsock.getsockname()) as c:
                assert _ask(c).startswith(b"HTTP/1.1 200 OK") and _ask(c).endswith(b"/x")
        finally:
            server.stop()
        # The Manager closed its own duplicate; the caller's socket is still usable.
        assert lsock.fileno() >= 0 and lsock.getsockname()[1] > 0


def test_unix_socket_with_limits(tmp_path: Path) -> None:
    path = str(tmp_path / "s.sock")
    server = ServerThread(_hello)
    with socket.socket(socket.AF_UNIX) as lsock:
        lsock.bind(path)
        lsock.listen()
        listen_fd(server.manager, lsock.fileno(), http=True, max_uri_size=10)
        server.start()
        try:
            with socket.socket(socket.AF_UNIX) as c:
                c.connect(path)
                assert _ask(c).endswith(b"/x")
            with socket.socket(socket.AF_UNIX) as c:
                c.connect(path)
                assert _ask(c, b"GET /" + b"a" * 20 + b" HTTP/1.1\r\nHost: h\r\n\r\n"
                            ).startswith(b"HTTP/1.1 414")
        finally:
            server.stop()


def test_refuses_what_is_not_a_listening_stream_socket(manager: Manager) -> None:
    with socket.socket() as unbound, socket.socket(type=socket.SOCK_DGRAM) as udp:
        with pytest.raises(ValueError, match="already listening"):
            listen_fd(manager, unbound, http=True)
        udp.bind(("127.0.0.1", 0))
        with pytest.raises(ValueError, match="stream socket"):
            listen_fd(manager, udp)
        unbound.bind(("127.0.0.1", 0))
        unbound.listen()
        with pytest.raises(ValueError, match="HTTP listeners only"):
            listen_fd(manager, unbound, stream_body=True)
        with pytest.raises(TypeError, match="unknown HTTP limit"):
            listen_fd(manager, unbound, http=True, max_nonsense=1)
    r, w = os.pipe()
    try:
        with pytest.raises(OSError):
            listen_fd(manager, r)
    finally:
        os.close(r)
        os.close(w)
    assert manager.connections == ()
