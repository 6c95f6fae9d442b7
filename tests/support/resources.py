"""Counts of this process's open file descriptors and threads, to check that a server gives
back everything it took."""

from __future__ import annotations

import gc
import os
import threading

from .waiting import wait_for


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def thread_count() -> int:
    return threading.active_count()


def wait_back_to(fds: int, threads: int, grace: float = 2.0) -> None:
    """Wait up to `grace` seconds for the fd and thread counts to fall back to the given
    baseline (collecting garbage between checks); fails showing both counts if they do not."""
    def back() -> bool:
        if fd_count() <= fds and thread_count() <= threads:
            return True
        gc.collect()
        return False

    wait_for(back, grace, lambda: f"file descriptors and threads back to {fds} and {threads} "
             f"(now {fd_count()} and {thread_count()})", interval=0.02)
