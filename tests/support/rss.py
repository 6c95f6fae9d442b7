"""Resident memory of a process from /proc, and a sampler that records its peak while a
transfer runs."""

from __future__ import annotations

import threading
from types import TracebackType


def rss_bytes(pid: int | str = "self") -> int:
    """VmRSS of `pid` (default: this process) in bytes."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


class RssSampler:
    """`with RssSampler(pid) as s:` samples the RSS every `interval` seconds on a thread;
    afterwards `s.growth` is the peak seen minus the RSS at entry."""

    def __init__(self, pid: int | str = "self", interval: float = 0.02) -> None:
        self.pid = pid
        self.interval = interval
        self.start = 0
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    @property
    def growth(self) -> int:
        return self.peak - self.start

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, rss_bytes(self.pid))

    def __enter__(self) -> RssSampler:
        self.start = self.peak = rss_bytes(self.pid)
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(5)
        self.peak = max(self.peak, rss_bytes(self.pid))
