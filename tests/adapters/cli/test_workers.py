"""Supervised workers under load, with a client that retries a request only when a reused
keep-alive connection was closed before any status line (as HTTP libraries do): kill -9 of a
worker, SIGHUP rolling restart, SIGTTIN/SIGTTOU, SIGTERM drain, --max-requests recycling."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli_run import CLI, LoadClient, pids_served, run_cli
from support.http_client import get
from support.ports import free_port
from support.process_start import start_bound
from support.waiting import wait_for

# Bounds that include a worker starting are stretched on free-threaded 3.13, whose process
# start is slow when the CPUs are busy (support.process_start).
pytestmark = pytest.mark.timeout(start_bound(90))


@pytest.fixture(scope="module")
def supervised(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[CLI, int]]:
    port = free_port()
    cli = CLI(tmp_path_factory.mktemp("workers"), "cli_app:app", "--port", str(port),
              "--workers", "2", "--threads", "2", "--graceful-timeout", "10")
    cli.wait_http(port)
    wait_for(lambda: len(cli.worker_pids()) == 2, 20, "len(cli.worker_pids()) == 2")
    # Both ready: each answers from the shared socket (on a slow machine one worker may still
    # be importing the app when the other already serves).
    wait_for(lambda: len(pids_served(port, 2, 0.5)) == 2, start_bound(30),
             "len(pids_served(port, 2, 0.5)) == 2")
    yield cli, port
    assert cli.stop() == 0, cli.err


def test_a_killed_worker_is_replaced_and_serving_goes_on(supervised: tuple[CLI, int]) -> None:
    cli, port = supervised
    with LoadClient(port, threads=4) as load:
        wait_for(lambda: load.result.ok > 100, 20, "load.result.ok > 100")
        before_kill = set(cli.worker_pids())
        victim = min(before_kill)
        os.kill(victim, signal.SIGKILL)
        killed = time.monotonic()
        wait_for(lambda: len(set(cli.worker_pids()) - {victim}) == 2, 5,
                 "len(set(cli.worker_pids()) - {victim}) == 2")
        spawned = time.monotonic() - killed
        new = str((set(cli.worker_pids()) - before_kill).pop())
        # Ready: the new worker answers fresh connections from the shared socket.
        wait_for(lambda: new in pids_served(port, 2, 0.2), start_bound(10),
                 "new in pids_served(port, 2, 0.2)")
        serving = time.monotonic() - killed
        before = load.result.ok
        wait_for(lambda: load.result.ok > before + 100, 10, "load.result.ok > before + 100")
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
        wait_for(lambda: load.result.ok > 100, 20, "load.result.ok > 100")
        cli.send(signal.SIGHUP)
        wait_for(lambda: len(set(cli.worker_pids()) & old) == 0 and len(cli.worker_pids()) == 2,
                 start_bound(30),
                 "len(set(cli.worker_pids()) & old) == 0 and len(cli.worker_pids()) == 2")
        new = {str(p) for p in cli.worker_pids()}
        assert load.result.pids & new  # the load moved over to the new workers
        assert pids_served(port, 2) == new
    result = load.result
    print(f"\nSIGHUP: ok={result.ok} retried={result.retried}")
    assert result.failed == [] and result.partial == []


def test_sigttin_and_sigttou_add_and_remove_a_worker(supervised: tuple[CLI, int]) -> None:
    cli, port = supervised
    before = set(cli.worker_pids())
    cli.send(signal.SIGTTIN)
    wait_for(lambda: len(cli.worker_pids()) == 3, 10, "len(cli.worker_pids()) == 3")
    added = str((set(cli.worker_pids()) - before).pop())
    wait_for(lambda: added in pids_served(port, 3, 0.5), start_bound(20),
             "added in pids_served(port, 3, 0.5)")  # it serves
    cli.send(signal.SIGTTOU)
    wait_for(lambda: len(cli.worker_pids()) == 2, 15, "len(cli.worker_pids()) == 2")


@pytest.mark.parametrize("workers", ["1", "2"])
def test_sigterm_drains_in_flight_requests_and_exits_0(tmp_path: Path, workers: str) -> None:
    port = free_port()
    cli = CLI(tmp_path, "cli_app:slow", "--port", str(port), "--workers", workers,
              "--threads", "4", "--graceful-timeout", "5")
    cli.wait_http(port, "/?0")
    load = LoadClient(port, "/?0.3", threads=6, check=lambda b: len(b) == 100_000)
    with load:
        wait_for(lambda: load.result.ok >= 12, 20, "load.result.ok >= 12")
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
            wait_for(lambda: len(load.result.pids) >= 3, start_bound(30),
                     "len(load.result.pids) >= 3")
    finally:
        assert cli.stop() == 0, cli.err
    result = load.result
    assert result.failed == [] and result.partial == [], result


def test_a_worker_that_crashes_mid_life_is_replaced(tmp_path: Path) -> None:
    port = free_port()
    cli = CLI(tmp_path, "cli_app:mortal", "--port", str(port), "--workers", "2")
    try:
        cli.wait_http(port)
        wait_for(lambda: len(cli.worker_pids()) == 2, 20, "len(cli.worker_pids()) == 2")
        before = set(cli.worker_pids())
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"GET /die HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(4096) == b""  # the worker died under it: no answer
        wait_for(lambda: len(set(cli.worker_pids()) - before) == 1, 20,
                 "len(set(cli.worker_pids()) - before) == 1")
        assert len(cli.worker_pids()) == 2
        assert get(port, "/after").status == 200
    finally:
        assert cli.stop() == 0, cli.err
    assert re.search(r"worker \d+ died \(status 3\); restarting it", cli.err), cli.err


def _app_that_in_a_worker_first(tmp_path: Path, name: str, statement: str) -> None:
    """Module `name` re-exporting cli_app.app, running `statement` first only in a worker
    process: the supervisor imports the app (to check it) unharmed."""
    (tmp_path / f"{name}.py").write_text(
        "import sys, time\n"
        "if '--worker-socket' in sys.argv:\n"
        f"    {statement}\n"
        "from cli_app import app\n")


def test_a_worker_failing_before_it_is_ready_stops_the_server(tmp_path: Path) -> None:
    # As an app that opens a database at import might: the server stops with the worker's
    # error.
    _app_that_in_a_worker_first(tmp_path, "worker_fails",
                                "raise RuntimeError('database unreachable')")
    port = free_port()
    started = time.monotonic()
    done = run_cli(tmp_path, "worker_fails:app", "--port", str(port), "--workers", "2")
    assert done.returncode != 0
    assert "database unreachable" in done.stderr, done.stderr
    assert time.monotonic() - started < start_bound(20)
    assert subprocess.run(["pgrep", "-f", "worker_fails:app"], capture_output=True).stdout == b""


def test_a_worker_killed_before_it_is_ready_is_restarted(tmp_path: Path) -> None:
    # kill -9 (or the OOM killer) while the worker still imports the app is no start-up
    # error of the app's: its successor starts, and the server serves.
    _app_that_in_a_worker_first(tmp_path, "slow_start", "time.sleep(1.5)")
    port = free_port()
    cli = CLI(tmp_path, "slow_start:app", "--port", str(port), "--workers", "2")
    try:
        wait_for(lambda: len(cli.worker_pids()) == 2, 20, "len(cli.worker_pids()) == 2")
        victim = min(cli.worker_pids())
        os.kill(victim, signal.SIGKILL)
        cli.wait_http(port)
        wait_for(lambda: len(set(cli.worker_pids()) - {victim}) == 2, 10,
                 "len(set(cli.worker_pids()) - {victim}) == 2")
        assert victim not in {int(p) for p in pids_served(port, 2)}
    finally:
        assert cli.stop() == 0, cli.err
    assert re.search(rf"worker {victim} died \(signal 9\); restarting it", cli.err), cli.err


def test_sigterm_gives_up_on_a_request_past_the_graceful_timeout(tmp_path: Path) -> None:
    port = free_port()
    cli = CLI(tmp_path, "cli_app:mortal", "--port", str(port), "--workers", "2",
              "--graceful-timeout", "2")
    cli.wait_http(port)
    outcome: list[object] = []

    def hang() -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(b"GET /hang HTTP/1.1\r\nHost: x\r\n\r\n")
            try:
                outcome.append(sock.recv(4096))
            except OSError as exc:
                outcome.append(exc)

    stuck = threading.Thread(target=hang, daemon=True)
    stuck.start()
    wait_for(lambda: (tmp_path / "hang.in").exists(), 20, "the request in the app")
    signalled = time.monotonic()
    code = cli.stop(timeout=30)
    took = time.monotonic() - signalled
    stuck.join(10)
    print(f"\nSIGTERM with a request stuck in the app: exit {code} after {took:.2f} s")
    assert code == 0, cli.err
    assert 2 <= took < 2 + 3, took  # the worker gives up at --graceful-timeout itself
    assert outcome == [b""] or isinstance(outcome[0], OSError), outcome  # cut off, no answer
    assert cli.worker_pids() == []
