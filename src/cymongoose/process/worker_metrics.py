"""Where a worker's counts live: a small shared memory file (memfd) per worker that the
supervisor creates and passes down (`--worker-metrics FD`); the worker's core counts into it
directly (`Manager.share_metrics`), so the supervisor reads every worker's numbers without
asking: nothing is sent per request, and the counts of a worker that was killed are still
there to read after its death."""

from __future__ import annotations

import mmap
import os
from collections.abc import Mapping
from typing import Any

__all__ = ["MetricsSlot", "share_with_supervisor"]


class MetricsSlot:
    """The supervisor's side of one worker's counts."""

    __slots__ = ("fd", "_map")

    def __init__(self) -> None:
        from .._mongoose import METRICS_SIZE

        self.fd = os.memfd_create("cymongoose-worker-metrics", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, METRICS_SIZE)
        self._map = mmap.mmap(self.fd, METRICS_SIZE)

    def read(self) -> Mapping[str, Any]:
        from .._mongoose import read_metrics

        return read_metrics(self._map)

    def close(self) -> None:
        self._map.close()
        os.close(self.fd)


def share_with_supervisor(manager: Any, fd: int | None) -> None:
    """A worker: count into the supervisor's slot `fd` (None: no metrics asked for)."""
    if fd is None:
        return
    from .._mongoose import METRICS_SIZE

    shared = mmap.mmap(fd, METRICS_SIZE)
    os.close(fd)  # the mapping keeps the memory
    manager.share_metrics(shared)
