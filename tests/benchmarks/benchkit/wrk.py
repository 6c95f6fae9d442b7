"""Running wrk pinned to the client CPU and reading its numbers."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

LUA_DIR = Path(__file__).resolve().parent.parent / "lua"
# Seconds past its -d after which wrk is killed: past its --timeout and its own exit.
WATCHDOG_S = 60


@dataclass
class WrkResult:
    requests: int
    duration_s: float
    bytes: int
    errors: dict[str, int]  # connect, read, write, timeout (socket errors) and status (non-2xx/3xx)
    p50_us: int
    p90_us: int
    p99_us: int
    mean_us: float
    max_us: int
    client_cpu_s: float
    raw: str

    @property
    def rps(self) -> float:
        return self.requests / self.duration_s if self.duration_s else 0.0

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / self.duration_s if self.duration_s else 0.0

    @property
    def socket_errors(self) -> int:
        return sum(self.errors[k] for k in ("connect", "read", "write", "timeout"))

    @property
    def non2xx(self) -> int:
        return self.errors["status"]


class WrkError(RuntimeError):
    pass


def write_script(path: Path, static_paths: list[str] | None = None, *,
                 pipeline: int = 0) -> Path:
    """One Lua script per kind of run: optional round-robin paths or `pipeline` requests per
    write (HTTP/1.1 pipelining), then the report."""
    parts = []
    if static_paths:
        paths = ", ".join(json.dumps(p) for p in static_paths)
        parts.append((LUA_DIR / "static.lua").read_text().replace("@PATHS@", paths))
    elif pipeline > 1:
        parts.append((LUA_DIR / "pipeline.lua").read_text().replace("@DEPTH@", str(pipeline)))
    parts.append((LUA_DIR / "report.lua").read_text())
    path.write_text("\n".join(parts))
    return path


def version(wrk: str = "wrk") -> str:
    out = subprocess.run([wrk, "-v"], capture_output=True, text=True).stdout
    first = out.splitlines()[0] if out else "unknown"
    return re.sub(r"\s+Copyright.*", "", first).strip()


def run(url: str, script: Path, *, connections: int, duration_s: float, threads: int = 1,
        cpu: int | str | None = None, timeout_s: str = "5s", raw_out: Path | None = None,
        headers: list[str] | None = None, wrk: str = "wrk") -> WrkResult:
    """`cpu`: one CPU or a taskset list ("2-7"); `headers`: extra request headers, each
    "Name: value" (wrk -H; "Connection: close" makes wrk open a connection per request)."""
    # wrk takes whole seconds only.
    seconds = max(1, math.ceil(duration_s))
    cmd = [wrk, f"-t{threads}", f"-c{connections}", f"-d{seconds}s", f"--timeout={timeout_s}",
           "--latency"]
    for header in headers or []:
        cmd += ["-H", header]
    cmd += ["-s", str(script), url]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu)] + cmd
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    # wrk stops itself at -d; the watchdog bounds the wait should it not (it then fails
    # below, without a report).
    watchdog = threading.Timer(seconds + WATCHDOG_S, proc.kill)
    watchdog.start()
    try:
        out = proc.stdout.read().decode("utf-8", "replace")
        # wait4 rather than wait: the rusage says how busy the client was (client-bound runs).
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        watchdog.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - started
    if raw_out is not None:
        raw_out.parent.mkdir(parents=True, exist_ok=True)
        raw_out.write_text(f"$ {' '.join(cmd)}\n# wall {wall:.2f} s\n{out}")
    match = re.search(r"^BENCH_JSON (\{.*\})$", out, re.MULTILINE)
    if proc.returncode != 0 or match is None:
        lines = [ln.strip() for ln in out.strip().splitlines() if ln.strip()]
        raise WrkError(f"wrk exited with {proc.returncode} and no report "
                       f"({' | '.join(lines[:2])})")
    data = json.loads(match.group(1))
    return WrkResult(
        requests=data["requests"],
        duration_s=data["duration_us"] / 1e6,
        bytes=data["bytes"],
        errors={k: data[k] for k in ("connect", "read", "write", "timeout", "status")},
        p50_us=data["p50_us"], p90_us=data["p90_us"], p99_us=data["p99_us"],
        mean_us=data["mean_us"], max_us=data["max_us"],
        client_cpu_s=usage.ru_utime + usage.ru_stime,
        raw=out,
    )
