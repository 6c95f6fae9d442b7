"""The WSGI app's side of request and response bodies: `wsgi.input` (streamed as the
body arrives, an empty shared one when there is none), `wsgi.file_wrapper`, and the error
a read or write raises once the client is gone."""

from __future__ import annotations

import io
import os
import stat
import sys
import threading
from collections.abc import Iterator
from typing import Any

from .._mongoose import WSGIExchange
from .state import ServerState

# wsgi.input: the loop stops taking body bytes from a connection while this much waits
# unread in the app's buffer, and takes more once the app has read it below _INPUT_LOW.
_INPUT_HIGH = 1 << 20
_INPUT_LOW = 256 << 10


class _NoBody(io.RawIOBase):
    """`wsgi.input` of a request without a body: shared, since it has no state."""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return 0

    def read(self, size: int | None = -1) -> bytes:
        return b""

    def readline(self, size: int | None = -1) -> bytes:
        return b""

    def close(self) -> None:  # an app closing it must not close it for the next one
        pass


_NO_BODY = _NoBody()


class FileWrapper:
    """`wsgi.file_wrapper`: iterates a file in blocks; the server sends a real file with
    sendfile(2) instead of iterating it."""

    def __init__(self, filelike: Any, blksize: int = 8192) -> None:
        if blksize <= 0:
            raise ValueError("blksize must be a positive number of bytes")
        self.filelike = filelike
        self.blksize = blksize

    def __iter__(self) -> Iterator[bytes]:
        read = self.filelike.read
        while True:
            block = read(self.blksize)
            if not block:
                return
            yield block

    def fileno_for_sendfile(self) -> int | None:
        """The descriptor of a regular file positioned where the body starts, or None."""
        try:
            fd = self.filelike.fileno()
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
        except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
            return None
        return int(fd)

    def close(self) -> None:
        """PEP 3333: closing the wrapper closes the file, when it has a close()."""
        close = getattr(self.filelike, "close", None)
        if close is not None:
            close()


class _StreamInput:
    """`wsgi.input` for a body that is still arriving: reads block the app's thread."""

    __slots__ = ("_buf", "_eof", "_error", "_cond", "_want", "_exchange", "_state", "paused")

    def __init__(self, exchange: WSGIExchange) -> None:
        self._buf = bytearray()
        self._eof = False
        self._error: BaseException | None = None
        self._cond = threading.Condition(threading.Lock())
        self._want = 0  # bytes a waiting reader needs (0: nobody waits)
        self._exchange = exchange  # feed_input() is how the loop fills this buffer
        self._state: ServerState = exchange.state
        self.paused = False  # the loop stopped feeding: buffer full

    # Loop side.
    def room(self) -> int | None:
        """How many more body bytes the buffer takes now; None while the loop is paused.
        Under the lock: the app's thread resizes the buffer as it reads (without the GIL,
        even len() of it races with that)."""
        with self._cond:
            if self.paused:
                return None
            return max(_INPUT_HIGH, self._want) - len(self._buf)

    def feed(self, data: bytes, eof: bool, left_behind: bool) -> None:
        """`left_behind`: the connection still holds body bytes this feed had no room for.
        Then the app side must ask for them (the connection may have paused its reads, so no
        read event would bring them), however much the app consumed meanwhile."""
        with self._cond:
            self._buf += data
            if eof:
                self._eof = True
            self.paused = not eof and (left_behind or
                                        len(self._buf) >= max(_INPUT_HIGH, self._want))
            if self._want:
                self._cond.notify()

    def fail(self, exc: BaseException) -> None:
        with self._cond:
            if not self._eof and self._error is None:  # the first cause is the one to tell
                self._error = exc
            self._cond.notify_all()

    # App side.
    def _take(self, n: int) -> bytes:
        data = bytes(self._buf[:n])
        del self._buf[:n]
        if self.paused and len(self._buf) < _INPUT_LOW:
            self.paused = False
            self._state.call_loop(self._exchange.feed_input)
        return data

    def _wait_for(self, n: int) -> None:
        """Block until n bytes (n < 0: the whole body) are buffered, or the body ended."""
        while not self._eof and (n < 0 or len(self._buf) < n):
            if self._error is not None:
                raise self._error
            self._want = sys.maxsize if n < 0 else n
            if self._state.turns.owns_loop():
                # Running inline on the loop's owner: the loop must go on without us.
                self._cond.release()
                try:
                    self._state.turns.hand_off()
                finally:
                    self._cond.acquire()
                continue
            if self.paused:
                self.paused = False
                self._state.call_loop(self._exchange.feed_input)
            self._cond.wait(1.0)
            self._want = 0
        if self._error is not None and not self._eof:
            raise self._error

    def read(self, size: int | None = -1) -> bytes:
        n = -1 if size is None or size < 0 else size
        with self._cond:
            self._wait_for(n)
            return self._take(len(self._buf) if n < 0 else min(n, len(self._buf)))

    def read1(self, size: int = -1) -> bytes:
        with self._cond:
            if not self._buf:
                self._wait_for(1)
            return self._take(len(self._buf) if size < 0 else min(size, len(self._buf)))

    def readline(self, size: int | None = -1) -> bytes:
        limit = -1 if size is None or size < 0 else size
        with self._cond:
            start = 0
            while True:
                end = self._buf.find(b"\n", start)
                if end >= 0:
                    n = end + 1
                    break
                if self._eof or (0 <= limit <= len(self._buf)):
                    n = len(self._buf)
                    break
                start = len(self._buf)
                self._wait_for(len(self._buf) + 1)
            if 0 <= limit < n:
                n = limit
            return self._take(n)

    def readlines(self, hint: int = -1) -> list[bytes]:
        lines: list[bytes] = []
        total = 0
        while True:
            line = self.readline()
            if not line:
                return lines
            lines.append(line)
            total += len(line)
            if 0 < hint <= total:
                return lines

    def __iter__(self) -> Iterator[bytes]:
        while True:
            line = self.readline()
            if not line:
                return
            yield line
