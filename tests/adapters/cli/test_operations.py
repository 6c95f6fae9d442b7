"""The production options end to end, through the supervisor in a subprocess: memory
recycling under a request loop, health answers and refused connections while the workers
drain, and the metrics document of every worker (read with prometheus_client's parser)
across a worker killed between two scrapes."""

from __future__ import annotations

import http.client
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli_run import CLI, LoadClient, run_cli
from support.http_client import get
from support.ports import free_port

from conftest import wait_until

pytestmark = pytest.mark.timeout(90)

OPS_APP = '''\
import os
import time

HOARD = []


def app(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/grow" and len(HOARD) < 120:
        HOARD.append(b"x" * (1 << 20))  # written, so resident: 1 MiB per request
    elif path == "/wait":
        gate = environ["QUERY_STRING"]  # answered once the test creates this file
        deadline = time.monotonic() + 30
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.01)
    body = f"{os.getpid()}|{path}".encode()
    start_response("200 OK", [("Content-Type", "text/plain"),
                              ("Content-Length", str(len(body)))])
    return [body]
'''


def _start(tmp_path: Path, port: int, *options: str) -> CLI:
    (tmp_path / "ops_app.py").write_text(OPS_APP)
    cli = CLI(tmp_path, "ops_app:app", "--port", str(port), *options)
    cli.wait_http(port)
    return cli


def _log_until(cli: CLI, pattern: str, timeout: float = 20.0) -> re.Match[str]:
    """The first stderr line of the running `cli` matching `pattern` (read as it comes)."""
    assert cli.proc.stderr is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = cli.proc.stderr.readline()
        if not line:
            break
        cli.err += line
        found = re.search(pattern, line)
        if found:
            return found
    raise AssertionError(f"no line matching {pattern!r} in: {cli.err}")


def test_a_worker_past_the_memory_limit_is_replaced_without_a_failed_request(
        tmp_path: Path) -> None:
    port = free_port()
    cli = _start(tmp_path, port, "--workers", "1", "--threads", "2",
                 "--workers-max-rss", "80", "--graceful-timeout", "10")
    try:
        first = get(port, "/").body.split(b"|")[0].decode()
        with LoadClient(port, "/grow", threads=2, max_requests=2000) as load:
            _log_until(cli, rf"worker {first} uses \d+ MiB \(--workers-max-rss 80\): "
                            "replacing it")
            # The successor serves: its pid answers, the old one is gone.
            assert wait_until(lambda: len(load.result.pids - {first}) >= 1, 30)
            assert wait_until(lambda: first not in map(str, cli.worker_pids()), 30)
        result = load.result
        print(f"\n--workers-max-rss: ok={result.ok} retried={result.retried} "
              f"failed={len(result.failed)} pids={sorted(result.pids)}")
        assert not result.failed and not result.partial, (result.failed, result.partial)
    finally:
        assert cli.stop() == 0, cli.err


def test_while_workers_drain_health_says_503_and_new_clients_are_refused(
        tmp_path: Path) -> None:
    port = free_port()
    gate = tmp_path / "gate"
    cli = _start(tmp_path, port, "--workers", "2", "--threads", "2", "--health-path",
                 "/healthz", "--graceful-timeout", "20")
    try:
        assert wait_until(lambda: get(port, "/healthz").status == 200, 10)
        slow = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        slow.request("GET", f"/wait?{gate}")
        probe = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        probe.request("GET", "/healthz")
        assert probe.getresponse().read() == b"ok\n"
        cli.send(signal.SIGTERM)
        # Every new client, from now until the workers are gone, is refused at once or told
        # 503; none is accepted and left waiting (a probe would read that as a hang).
        outcomes: list[str] = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and "refused" not in outcomes:
            try:
                answer = get(port, "/healthz", timeout=2.0)
                outcomes.append(str(answer.status))
            except ConnectionRefusedError:
                outcomes.append("refused")
            except OSError as exc:
                outcomes.append(f"{type(exc).__name__}")  # a reset: refused too
        assert "refused" in outcomes, outcomes
        assert not [o for o in outcomes if o not in ("200", "503", "refused",
                                                     "ConnectionResetError")], outcomes
        # The request in flight is still answered, then the server ends.
        gate.touch()
        response = slow.getresponse()
        assert response.status == 200 and response.read().endswith(b"|/wait")
    finally:
        gate.touch()
        assert cli.stop() == 0, cli.err
