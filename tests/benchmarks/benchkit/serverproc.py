"""A benchmark's server process: pinned to a CPU, in a session of its own (procstat then
counts a master and its workers together), its output in a log file, stopped with SIGTERM
and, after 10 s, SIGKILL."""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any


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


def add_cpu_options(parser: argparse.ArgumentParser) -> None:
    """--server-cpu and --client-cpu (0 and 1): where the server and the client run."""
    parser.add_argument("--server-cpu", type=int, default=0)
    parser.add_argument("--client-cpu", type=int, default=1)


def settle_options(args: argparse.Namespace, script: str, tools: tuple[str, ...]) -> None:
    """No pinning on a one-CPU machine; exit naming the tools this machine lacks."""
    if (os.cpu_count() or 1) < 2:
        args.server_cpu = args.client_cpu = None
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        sys.exit(f"{script}: {', '.join(missing)} not found (make debian-packages)")


def machine() -> dict[str, Any]:
    """When and where a run happened: the date, the CPU model, the load average."""
    return {"date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "cpu": next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                         if ln.startswith("model name")), "unknown"),
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}
