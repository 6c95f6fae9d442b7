"""The `cymongoose` command line in a subprocess whose output goes to files, so a test can
wait for a log line while the server runs (support.cli_run.CLI reads its pipes only once the
process ended)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

from .cli_run import HELLO_APP, cli_env, port_open
from .waiting import wait_for


class LoggingCLI:
    """`python -m cymongoose ARGS` in `cwd` (where `cli_app.py` is written), stdout and
    stderr in `cwd/stdout.log` and `cwd/stderr.log`."""

    def __init__(self, cwd: Path, *args: str) -> None:
        (cwd / "cli_app.py").write_text(HELLO_APP)
        self._out_path = cwd / "stdout.log"
        self._err_path = cwd / "stderr.log"
        with open(self._out_path, "wb") as out, open(self._err_path, "wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "cymongoose", *args],
                                         cwd=cwd, env=cli_env(), stdout=out, stderr=err)

    @property
    def out(self) -> str:
        return self._out_path.read_text(errors="replace")

    @property
    def err(self) -> str:
        return self._err_path.read_text(errors="replace")

    def wait_port(self, port: int, timeout: float = 20.0) -> None:
        def listening() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError("the server exited")
            return port_open(port)

        try:
            wait_for(listening, timeout, f"the server to listen on {port}")
        except AssertionError:
            self.stop()
            raise AssertionError(f"server did not listen on {port}: {self.err}") from None

    def wait_lines(self, pattern: str, count: int = 1, timeout: float = 20.0,
                   stdout: bool = False) -> list[str]:
        """Until stderr (stdout with `stdout`) holds `count` lines matching the regular
        expression `pattern`; AssertionError with both when it does not within `timeout`."""
        found = re.compile(pattern)
        lines: list[str] = []

        def enough() -> bool:
            nonlocal lines
            exited = self.proc.poll() is not None
            text = self.out if stdout else self.err
            lines = [line for line in text.splitlines() if found.search(line)]
            if len(lines) < count and exited:
                raise AssertionError(f"the server exited; {count} lines matching {pattern!r} "
                                     f"expected, {len(lines)} seen:\n{self.out}\n{self.err}")
            return len(lines) >= count

        wait_for(enough, timeout, lambda: f"{count} lines matching {pattern!r} ({len(lines)} "
                 f"seen):\n{self.out}\n{self.err}", interval=0.02)
        return lines

    def stop(self, timeout: float = 20.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"did not stop within {timeout} s: {self.err}") from None
