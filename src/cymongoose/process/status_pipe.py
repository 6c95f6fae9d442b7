"""A worker's line to its supervisor: one end of a socket pair the supervisor passed as a
descriptor (`--worker-status FD`), one line per report: `ready <interface>`,
`error <message>` or `recycle` (supervisor.py reads them).

The line runs both ways for one reply: after `ready` the worker waits for the supervisor's
`go` before it accepts a connection. Until then the supervisor's start-up responder
(starting.py) may still be accepting on the shared socket; with the reply it has stopped,
so a client that got a worker's 200 never gets the start-up 503 after it."""

from __future__ import annotations

import contextlib
import os
import select
import time

__all__ = ["StatusPipe"]

_GO_WAIT_S = 10.0  # at most, for the supervisor's `go` (it answers within one poll)


class StatusPipe:
    """The worker's line to its supervisor (nothing when this process serves alone)."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd

    @property
    def connected(self) -> bool:
        """Whether a supervisor listens (else this process serves alone)."""
        return self._fd is not None

    def send(self, line: str) -> None:
        if self._fd is None:
            return
        data = (line.replace("\n", " ") + "\n").encode("utf-8", "replace")
        with contextlib.suppress(OSError):  # the supervisor is gone: nothing to tell
            os.write(self._fd, data[:4000])  # one write: a line never interleaves

    def ready(self, interface: str) -> None:
        """Report `ready <interface>` and return once the supervisor says `go` (its
        start-up responder no longer accepts), or after a bounded wait if it is gone."""
        self.send(f"ready {interface}")
        if self._fd is None:
            return
        deadline = time.monotonic() + _GO_WAIT_S
        received = b""
        while b"\n" not in received:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                readable, _, _ = select.select([self._fd], [], [], left)
                if not readable:
                    return
                chunk = os.read(self._fd, 64)
            except OSError:
                return
            if not chunk:  # the supervisor closed its end
                return
            received += chunk
