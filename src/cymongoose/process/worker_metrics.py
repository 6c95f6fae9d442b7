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

__all__ = ["MetricsSlot", "share_with_supervisor", "shared_blocks"]


class MetricsSlot:
    """The supervisor's side of one worker's counts: `loops` blocks of METRICS_SIZE bytes,
    one per Manager of the worker (one per loop thread, process/loop_threads.py)."""

    __slots__ = ("fd", "_map", "_loops")

    def __init__(self, loops: int = 1) -> None:
        from .._mongoose import METRICS_SIZE

        self._loops = loops
        self.fd = os.memfd_create("cymongoose-worker-metrics", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, METRICS_SIZE * loops)
        self._map = mmap.mmap(self.fd, METRICS_SIZE * loops)

    def read(self) -> Mapping[str, Any]:
        """The worker's counts: its Managers' added up."""
        from .._mongoose import read_metrics

        if self._loops == 1:
            return read_metrics(self._map)
        from ..metrics import combine

        return combine(read_metrics(block) for block in _blocks(self._map, self._loops))

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


def shared_blocks(fd: int, loops: int) -> list[memoryview]:
    """A worker of `loops` loop threads: one writable block of METRICS_SIZE bytes per
    Manager, in the supervisor's slot `fd` (MetricsSlot(loops) made it that size)."""
    from .._mongoose import METRICS_SIZE

    shared = mmap.mmap(fd, METRICS_SIZE * loops)
    os.close(fd)  # the mapping keeps the memory
    return _blocks(shared, loops)


def _blocks(shared: mmap.mmap, loops: int) -> list[memoryview]:
    from .._mongoose import METRICS_SIZE

    view = memoryview(shared)
    return [view[i * METRICS_SIZE:(i + 1) * METRICS_SIZE] for i in range(loops)]
