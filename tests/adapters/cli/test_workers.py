"""Supervised workers under load, with a client that retries a request only when a reused
keep-alive connection was closed before any status line (as HTTP libraries do): kill -9 of a
worker, SIGHUP rolling restart, SIGTTIN/SIGTTOU, SIGTERM drain, --max-requests recycling."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli_run import CLI, LoadClient
from support.http_client import get
from support.ports import free_port

from conftest import wait_until

pytestmark = pytest.mark.timeout(90)


def _pids_served(port: int, want: int, timeout: float = 10.0) -> set[str]:
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    while len(seen) < want and time.monotonic() < deadline:
        seen.add(get(port, "/").body.split(b"|")[0].decode())
    return seen


@pytest.fixture(scope="module")
def supervised(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[CLI, int]]:
    port = free_port()
    cli = CLI(tmp_path_factory.mktemp("workers"), "cli_app:app", "--port", str(port),
              "--workers", "2", "--threads", "2", "--graceful-timeout", "10")
    cli.wait_http(port)
    assert wait_until(lambda: len(cli.worker_pids()) == 2, 20)
    yield cli, port
    assert cli.stop() == 0, cli.err


def test_a_killed_worker_is_replaced_and_serving_goes_on(supervised: tuple[CLI, int]) -> None:
    cli, port = supervised
    with LoadClient(port, threads=4) as load:
        assert wait_until(lambda: load.result.ok > 100, 20)
        before_kill = set(cli.worker_pids())
        victim = min(before_kill)
        os.kill(victim, signal.SIGKILL)
        killed = time.monotonic()
        assert wait_until(lambda: len(set(cli.worker_pids()) - {victim}) == 2, 5)
        spawned = time.monotonic() - killed
        new = str((set(cli.worker_pids()) - before_kill).pop())
        # Ready: the new worker answers fresh connections from the shared socket.
        assert wait_until(lambda: new in _pids_served(port, 2, 0.2), 10)
        serving = time.monotonic() - killed
        before = load.result.ok
        assert wait_until(lambda: load.result.ok > before + 100, 10)
    result = load.result
    print(f"\nkill -9: replacement started after {spawned * 1000:.0f} ms, "
          f"serving after {serving * 1000:.0f} ms; ok={result.ok} "
          f"retried={result.retried} failed={len(result.failed)}")
    assert spawned < 1.0
    # Only requests the killed worker was holding may fail; everything else is served.
    assert len(result.failed) + len(result.partial) <= 4, (result.failed, result.partial)


def test_sighup_replaces_every_worker_without_a_failed_request(
        supervised: tuple[CLI, int]) -> None:
    cli, port = supervised
    old = set(cli.worker_pids())
    with LoadClient(port, threads=4) as load:
        assert wait_until(lambda: load.result.ok > 100, 20)
        cli.send(signal.SIGHUP)
        assert wait_until(lambda: len(set(cli.worker_pids()) & old) == 0
                          and len(cli.worker_pids()) == 2, 30)
        new = {str(p) for p in cli.worker_pids()}
        assert load.result.pids & new  # the load moved over to the new workers
        assert _pids_served(port, 2) == new
    result = load.result
    print(f"\nSIGHUP: ok={result.ok} retried={result.retried}")
    assert result.failed == [] and result.partial == []


def test_sigttin_and_sigttou_add_and_remove_a_worker(supervised: tuple[CLI, int]) -> None:
    cli, port = supervised
    before = set(cli.worker_pids())
    cli.send(signal.SIGTTIN)
    assert wait_until(lambda: len(cli.worker_pids()) == 3, 10)
    added = str((set(cli.worker_pids()) - before).pop())
    assert wait_until(lambda: added in _pids_served(port, 3, 0.5), 20)  # it serves
    cli.send(signal.SIGTTOU)
    assert wait_until(lambda: len(cli.worker_pids()) == 2, 15)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_sigterm_drains_in_flight_requests_and_exits_0(tmp_path: Path, workers: str) -> None:
    port = free_port()
    cli = CLI(tmp_path, "cli_app:slow", "--port", str(port), "--workers", workers,
              "--threads", "4", "--graceful-timeout", "5")
    cli.wait_http(port, "/?0")
    load = LoadClient(port, "/?0.3", threads=6, check=lambda b: len(b) == 100_000)
    with load:
        assert wait_until(lambda: load.result.ok >= 12, 20)
        ok_at_signal = load.result.ok
        signalled = time.monotonic()
        cli.send(signal.SIGTERM)
        code = cli.stop(timeout=15)
        took = time.monotonic() - signalled
    result = load.result
    print(f"\nSIGTERM ({workers} workers): exit {code} after {took:.2f} s; "
          f"{result.ok - ok_at_signal} requests in flight finished; "
          f"{len(result.failed)} refused or closed before a status line")
    assert code == 0, cli.err
    assert took < 5 + 2
    assert result.partial == []  # every request that got a status line got all of it
    assert result.ok > ok_at_signal  # the ones in flight (sleeping in the app) finished
    assert all("Refused" in f or "Reset" in f or "RemoteDisconnected" in f
               for f in result.failed), result.failed


def test_max_requests_recycles_workers_without_a_failed_request(tmp_path: Path) -> None:
    port = free_port()
    cli = CLI(tmp_path, "cli_app:app", "--port", str(port), "--max-requests", "40",
              "--max-requests-jitter", "10", "--threads", "2")
    try:
        cli.wait_http(port)
        with LoadClient(port, threads=3, max_requests=2000) as load:
            assert wait_until(lambda: len(load.result.pids) >= 3, 30)
    finally:
        assert cli.stop() == 0, cli.err
    result = load.result
    assert result.failed == [] and result.partial == [], result
