"""Counts of this process's open file descriptors and threads, to check that a server gives
back everything it took."""

from __future__ import annotations

import gc
import os
import threading
import time


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def thread_count() -> int:
    return threading.active_count()


def wait_back_to(fds: int, threads: int, grace: float = 2.0) -> tuple[int, int]:
    """Wait up to `grace` seconds for the fd and thread counts to fall back to the given
    baseline; returns the last counts seen (callers compare them with the baseline)."""
    deadline = time.monotonic() + grace
    while True:
        now_fds, now_threads = fd_count(), thread_count()
        if (now_fds <= fds and now_threads <= threads) or time.monotonic() > deadline:
            return now_fds, now_threads
        gc.collect()
        time.sleep(0.02)
