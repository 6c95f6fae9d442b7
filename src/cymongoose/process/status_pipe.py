"""A worker's line to its supervisor: the status pipe the supervisor passed as a descriptor
(`--worker-status FD`), one line per report: `ready`, `error <message>` or `recycle`
(supervisor.py reads them)."""

from __future__ import annotations

import contextlib
import os

__all__ = ["StatusPipe"]


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
            os.write(self._fd, data[:4000])  # < PIPE_BUF: one atomic write
