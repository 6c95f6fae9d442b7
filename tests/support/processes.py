"""Server subprocesses the tests start: waiting until one serves, and stopping it politely
first, then for sure."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

from .waiting import wait_for


def wait_serving(proc: subprocess.Popen[bytes], name: str, ready: Callable[[], bool],
                 timeout_s: float, log: Callable[[], str]) -> None:
    """Until `ready()` is true (an OSError or AssertionError from it counts as not yet);
    RuntimeError with the process's log if it exits first or `timeout_s` passes."""
    def serving() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited at start-up:\n{log()}")
        try:
            return ready()
        except (OSError, AssertionError):
            return False

    try:
        wait_for(serving, timeout_s, f"{name} to serve", interval=0.05)
    except AssertionError:
        raise RuntimeError(f"{name} not ready in {timeout_s} s:\n{log()}") from None


def stop_process(proc: subprocess.Popen[bytes] | None, grace_s: float = 10.0) -> None:
    """SIGTERM, wait up to `grace_s`, then SIGKILL; a process already gone is left alone."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
