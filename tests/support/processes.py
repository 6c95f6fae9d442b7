"""Server subprocesses the tests start: waiting until one serves, stopping it politely
first, then for sure, and the reference servers' common shape (ServerProcess)."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable
from types import TracebackType
from typing import TypeVar

from .waiting import wait_for


def wait_serving(proc: subprocess.Popen[bytes], name: str, ready: Callable[[], bool],
                 timeout_s: float, log: Callable[[], str]) -> None:
    """Until `ready()` is true (an OSError or AssertionError from it counts as not yet);
    RuntimeError with the process's log if it exits first or `timeout_s` passes (then the
    process is stopped: nobody else holds it to stop later)."""
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
        stop_process(proc)
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


_Server = TypeVar("_Server", bound="ServerProcess")


class ServerProcess:
    """A reference server (gunicorn, uvicorn, hypercorn) in a subprocess whose output goes
    to a temporary file: a subclass sets `proc` in start(); log(), stop() and the context
    manager are the same for all."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self._log = tempfile.TemporaryFile()

    def start(self: _Server) -> _Server:
        raise NotImplementedError

    def log(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def stop(self) -> None:
        stop_process(self.proc)
        self._log.close()

    def __enter__(self: _Server) -> _Server:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
