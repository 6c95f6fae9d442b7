"""Listening sockets an embedding program hands to `cymongoose.Server.serve(sockets=...)`,
checked before anything starts: a socket that is closed, not a stream socket or not
listening would otherwise fail deep in the core (or, for one not listening, never accept a
client), far from the call that passed it. Each problem is one message naming the socket by
its place in the list."""

from __future__ import annotations

import socket
from collections.abc import Iterable

__all__ = ["checked_sockets"]


def checked_sockets(sockets: Iterable[socket.socket]) -> list[socket.socket]:
    """`sockets` as a list, each one an open, listening TCP or Unix stream socket;
    TypeError for what is not a socket, ValueError for one that cannot serve."""
    if isinstance(sockets, socket.socket):
        raise TypeError("sockets must be a list of sockets, not one socket: "
                        "serve(sockets=[sock])")
    try:
        given = list(sockets)
    except TypeError:
        raise TypeError("sockets must be a list of listening sockets or None, not "
                        f"{type(sockets).__name__}") from None
    if not given:
        raise ValueError("sockets is empty: pass listening sockets, or None to bind the "
                         "config's host and port (or uds, or fd)")
    for index, sock in enumerate(given):
        _check(f"sockets[{index}]", sock)
    return given


def _check(label: str, sock: object) -> None:
    if not isinstance(sock, socket.socket):
        raise TypeError(f"{label} must be a socket.socket, not {type(sock).__name__}")
    if sock.fileno() < 0:
        raise ValueError(f"{label} is closed")
    if sock.family not in (socket.AF_INET, socket.AF_INET6, socket.AF_UNIX):
        raise ValueError(f"{label} is not a TCP or Unix socket ({sock.family!r})")
    if sock.type != socket.SOCK_STREAM:
        raise ValueError(f"{label} is not a stream socket ({sock.type!r}): HTTP needs "
                         "SOCK_STREAM")
    try:
        listening = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
    except OSError as exc:
        raise ValueError(f"{label}: {exc.strerror}") from None
    if not listening:
        raise ValueError(f"{label} is not listening: call sock.bind(...) and "
                         "sock.listen() before serve()")
