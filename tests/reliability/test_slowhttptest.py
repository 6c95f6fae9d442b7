"""The real slowhttptest (Debian package, installed by `make test`) against the server, with
short settings: slow headers (slowloris) and slow body (R-U-Dead-Yet). Every attack
connection is closed by the server's timeouts, and fresh clients are served throughout."""

from __future__ import annotations

import csv
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from support.waiting import wait_for

from .support import Server, get

SLOWHTTPTEST = shutil.which("slowhttptest")
pytestmark = pytest.mark.skipif(SLOWHTTPTEST is None, reason="slowhttptest is not installed "
                                "(tools/debian-packages.txt; `make test` installs it)")

CONNECTIONS = 150
LENGTH_S = 8


def probe(port: int, stop: threading.Event, latencies: list[float]) -> None:
    while not stop.is_set():
        start = time.monotonic()
        status, _ = get(port, "/probe", timeout=3.0)
        assert status == 200
        latencies.append(time.monotonic() - start)
        time.sleep(0.1)


@pytest.mark.parametrize("mode", ["-H", "-B"], ids=["slow-headers", "slow-body"])
def test_slowhttptest(mode: str, tmp_path: Path) -> None:
    with Server(header_timeout_ms=2000, body_timeout_ms=2000) as server:
        stop = threading.Event()
        latencies: list[float] = []
        prober = threading.Thread(target=probe, args=(server.port, stop, latencies),
                                  daemon=True)
        prober.start()
        prefix = tmp_path / "report"
        assert SLOWHTTPTEST is not None
        started = time.monotonic()
        proc = subprocess.run(
            [SLOWHTTPTEST, mode, "-c", str(CONNECTIONS), "-r", str(CONNECTIONS), "-i", "1",
             "-x", "10", "-s", "8192", "-l", str(LENGTH_S), "-p", "2", "-g",
             "-o", str(prefix), "-u", f"http://127.0.0.1:{server.port}/"],
            capture_output=True, text=True, errors="replace", timeout=LENGTH_S + 30)
        elapsed = time.monotonic() - started
        stop.set()
        prober.join(10)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]

        with open(f"{prefix}.csv") as f:
            rows = [{k.strip(): int(v) for k, v in row.items()} for row in csv.DictReader(f)]
        print(f"\nslowhttptest {mode}: {elapsed:.1f} s; per second (closed, connected): "
              + " ".join(f"({r['Closed']},{r['Connected']})" for r in rows))
        print(f"probe latency: max {max(latencies) * 1000:.0f} ms over {len(latencies)} probes")

        # All attack connections were open at once, and the tool stopped before its time
        # because the server had closed every one of them.
        assert max(r["Connected"] for r in rows) >= CONNECTIONS * 0.9
        assert "No open connections left" in proc.stdout, proc.stdout[-1500:]
        assert elapsed < LENGTH_S
        assert all(r["Service Available"] for r in rows)
        assert latencies and max(latencies) < 2.0
        wait_for(lambda: server.connection_count() == 0, 5, "server.connection_count() == 0")
