"""A benchmark's server process: pinned to a CPU, in a session of its own (procstat then
counts a master and its workers together), its output in a log file, stopped with SIGTERM
and, after 10 s, SIGKILL."""

from __future__ import annotations

import subprocess
from pathlib import Path


class ServerProcess:
    def __init__(self, argv: list[str], cpu: int | None, log: Path, cwd: Path | None = None,
                 env: dict[str, str] | None = None) -> None:
        if cpu is not None:
            argv = ["taskset", "-c", str(cpu), *argv]
        self.log = log.open("wb")
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()
