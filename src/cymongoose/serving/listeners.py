"""A server's listeners: listening on a URL, adopting a socket opened elsewhere (bound in
Python, shared by worker processes, handed over by systemd), and the accept handlers that
start TLS or mark a Unix-socket client. The server says what a listener's address means to
it (a WSGI environ base, an ASGI scope base) through `on_address` and `on_unix`."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Any

from .._mongoose import MG_EV_ACCEPT, Connection, Manager, TlsOpts, handles, listen_fd

__all__ = ["Listeners", "is_unix_client", "listener_base"]


class Listeners:
    """`quiet`: the handler of a connection waiting for a request head (the server may
    switch it; connections accepted later get the new one). `unix_handler`: the handler of a
    client of a Unix socket, whose id goes into `unix_conns` (Mongoose reads no address from
    an AF_UNIX peer, so the server fills one in). `on_address(host, port, scheme)` is called
    for each TCP listener, `on_unix(name)` for a Unix-socket one."""

    def __init__(self, server_name: str, tls: TlsOpts | None, quiet: Any, unix_handler: Any,
                 unix_conns: set[int], on_address: Callable[[str, int, str], object],
                 on_unix: Callable[[Any], object]) -> None:
        self.quiet = quiet
        self.connections: list[Connection] = []
        self._server_name = server_name
        self._tls = tls
        self._on_address = on_address
        self._on_unix = on_unix

        @handles(MG_EV_ACCEPT)
        def on_accept_tls(conn: Connection, ev: int, msg: Any) -> None:
            conn.set_handler(self.quiet)
            assert tls is not None  # a TLS listener is refused without TlsOpts
            conn.tls_init(tls)

        @handles(MG_EV_ACCEPT)
        def on_accept_unix(conn: Connection, ev: int, msg: Any) -> None:
            conn.set_handler(unix_handler)
            unix_conns.add(conn.id)

        self._on_accept_tls = on_accept_tls
        self._on_accept_unix = on_accept_unix

    def listen(self, manager: Manager, url: str, **limits: Any) -> Connection:
        tls = url.startswith(("https:", "wss:"))
        if tls and self._tls is None:
            raise ValueError(f"an https:// listener needs {self._server_name}(..., "
                             "tls=TlsOpts(cert=..., key=...))")
        conn = manager.listen(url, self._on_accept_tls if tls else self.quiet,
                              stream_body=True, **limits)
        local = conn.local_addr
        assert local is not None  # a listener just opened
        self._on_address(local[0], int(local[1]), "https" if tls else "http")
        self.connections.append(conn)
        return conn

    def adopt(self, manager: Manager, sock: Any, tls: bool, **limits: Any) -> Connection:
        """Serve HTTP on a listening TCP or Unix socket (or its descriptor) opened
        elsewhere; the caller keeps and closes `sock`."""
        if tls and self._tls is None:
            raise ValueError(f"tls=True needs {self._server_name}(..., "
                             "tls=TlsOpts(cert=..., key=...))")
        fd = sock if isinstance(sock, int) else sock.fileno()
        probe = socket.socket(fileno=os.dup(fd))
        try:
            unix = probe.family == socket.AF_UNIX
            name = probe.getsockname()
        finally:
            probe.close()
        if unix and tls:
            raise ValueError("TLS on a Unix socket is not supported; terminate TLS in the "
                             "proxy in front")
        handler = self._on_accept_unix if unix else self._on_accept_tls if tls else self.quiet
        conn = listen_fd(manager, fd, handler, http=True, tls=tls, stream_body=True, **limits)
        if unix:
            self._on_unix(name)
        else:
            self._on_address(name[0], int(name[1]), "https" if tls else "http")
        self.connections.append(conn)
        return conn


def listener_base(conn: Connection, bases: dict[int, dict[str, Any]],
                  default: dict[str, Any]) -> dict[str, Any]:
    """What every request through the listener `conn` came in on shares (a WSGI environ's
    base, an ASGI scope's), by the listener's port; `default` with a single listener."""
    if len(bases) > 1:
        local = conn.local_addr
        if local is not None:
            return bases.get(local[1], default)
    return default


def is_unix_client(conn: Connection, unix_conns: set[int]) -> bool:
    """Whether `conn` came in on a Unix socket: its id is in `unix_conns`, or it is an
    HTTP/2 stream of a connection whose id is (a stream has an id of its own)."""
    if conn.id in unix_conns:
        return True
    parent = conn.http2_parent
    return parent is not None and parent.id in unix_conns
