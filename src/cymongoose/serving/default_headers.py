"""The header fields a server adds to a response that left them out: `Date` (RFC 9110
§5.6.7) and `Server`, and `Connection: close` on every response while the server stops."""

from __future__ import annotations

import time

from .._mongoose import DefaultHeader, HeaderBlock

__all__ = ["DATE", "SERVER", "SERVER_NAME", "DateHeader", "DefaultHeaders"]

SERVER_NAME = b"cymongoose"
# Bits of the index into DefaultHeaders.blocks: which fields the app's headers leave out
# (the core computes it: missing_default_headers()).
DATE = DefaultHeader.DEFAULT_DATE
SERVER = DefaultHeader.DEFAULT_SERVER


class DateHeader:
    """The `Date` value, formatted once per second, not per response."""

    __slots__ = ("_second", "_value")

    def __init__(self) -> None:
        self._second = -1
        self._value = b""

    def get(self) -> bytes:
        now = time.time()
        second = int(now)
        if second != self._second:
            # Imported here, once a second at most: email.utils brings socket, datetime and
            # more, which `import cymongoose.wsgi` (or .asgi) need not pay for.
            from email.utils import formatdate

            self._value = formatdate(now, usegmt=True).encode("ascii")
            self._second = second
        return self._value


class DefaultHeaders:
    """`blocks[i]`: the fields to add to a response whose headers leave out `i`'s bits
    (DATE | SERVER), as a checked and rendered HeaderBlock, or None when there is nothing.
    The owner calls `refresh()` once a second. The list is updated in place, so the core
    and the response paths may keep a reference to it."""

    __slots__ = ("blocks", "closing", "_date", "_names", "_server")

    def __init__(self, *, lowercase: bool = False, server: bool = True) -> None:
        # WSGI apps write `Date:` and ASGI apps `date:`; the added fields follow each style.
        names = (b"date", b"server", b"connection") if lowercase else \
            (b"Date", b"Server", b"Connection")
        self._names = names
        self._date = DateHeader()
        self._server = server  # False: --no-server-header, no Server field is added
        #: Every response closes its connection (the server stops, or was recycled), so
        #: a client that keeps its connection busy moves on to another worker.
        self.closing = False
        self.blocks: list[HeaderBlock | None] = [None] * 4
        self.refresh()

    def refresh(self) -> None:
        date_name, server_name, connection_name = self._names
        date = (date_name, self._date.get())
        server = [(server_name, SERVER_NAME)] if self._server else []
        close = [(connection_name, b"close")] if self.closing else []
        fields: list[list[tuple[bytes, bytes]]] = [[], [date], server, [date, *server]]
        self.blocks[:] = [HeaderBlock(lst + close) if lst or close else None
                          for lst in fields]

    def close_connections(self) -> None:
        """From now on every response carries `Connection: close`."""
        self.closing = True
        self.refresh()
