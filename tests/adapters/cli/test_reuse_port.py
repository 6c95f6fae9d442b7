"""--reuse-port: each worker listens on a socket of its own (SO_REUSEPORT), bound once its app
is loaded; the supervisor's socket only checks the port (and answers 503 while the app
loads, with --health-path) and is closed once a worker is ready. A killed worker's successor
joins with a socket of its own; --port 0 gives every worker the supervisor's port."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from support.cli_run import CLI, LoadClient, pids_served, run_cli
from support.ports import free_port
from support.process_start import start_bound
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(start_bound(90))


def _listeners(port: int, pids: list[int]) -> list[int]:
    """Those of `pids` that hold a listening socket on `port`, once per socket (read from
    /proc: the 3.14 leg's root has no `ss`)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # local address (hex ip:port), ..., state 0A is LISTEN, ..., the socket's inode
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    held: list[int] = []
    for pid in pids:
        seen: set[str] = set()
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue  # gone
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            inode = link[len("socket:["):-1] if link.startswith("socket:[") else ""
            if inode in inodes and inode not in seen:
                seen.add(inode)
                held.append(pid)
    return sorted(held)


def _start(tmp_path: Path, port: int, *options: str) -> CLI:
    cli = CLI(tmp_path, "cli_app:app", "--port", str(port), "--workers", "2", "--threads",
              "2", "--reuse-port", *options)
    cli.log_until(r"workers of \S+ ready")
    return cli


@pytest.mark.parametrize("health", [False, True], ids=["plain", "health-path"])
def test_each_worker_listens_on_a_socket_of_its_own(tmp_path: Path, health: bool) -> None:
    port = free_port()
    cli = _start(tmp_path, port, *(["--health-path", "/healthz"] if health else []))
    try:
        workers = sorted(cli.worker_pids())
        assert len(workers) == 2
        # Two sockets, one per worker; the supervisor's is gone.
        everyone = [cli.proc.pid, *workers]
        wait_for(lambda: _listeners(port, everyone) == workers, 10,
                 lambda: f"the workers' sockets alone ({_listeners(port, everyone)}, "
                         f"{workers})")
        # The kernel hands new connections to both.
        assert pids_served(port, 2) == {str(p) for p in workers}
    finally:
        assert cli.stop() == 0, cli.err
    # A stopping worker's queue is lost unless the kernel migrates it: said once, at start.
    migrate = Path("/proc/sys/net/ipv4/tcp_migrate_req")
    warned = "net.ipv4.tcp_migrate_req is 0" in cli.err
    assert warned == (migrate.exists() and migrate.read_text().strip() == "0"), cli.err


def test_a_killed_worker_is_replaced_by_one_with_its_own_socket(tmp_path: Path) -> None:
    port = free_port()
    cli = _start(tmp_path, port)
    try:
        with LoadClient(port, threads=4) as load:
            wait_for(lambda: load.result.ok > 100, 20, "load.result.ok > 100")
            before = set(cli.worker_pids())
            victim = min(before)
            os.kill(victim, signal.SIGKILL)
            wait_for(lambda: len(set(cli.worker_pids()) - {victim}) == 2, 10,
                     "a successor started")
            new = (set(cli.worker_pids()) - before).pop()
            # Its socket joins once its app is loaded; then it takes new connections.
            wait_for(lambda: new in _listeners(port, [new]), start_bound(20),
                     "the successor's socket")
            wait_for(lambda: str(new) in pids_served(port, 2, 0.2), start_bound(10),
                     "the successor answers")
            assert _listeners(port, [cli.proc.pid, victim]) == []
            ok = load.result.ok
            wait_for(lambda: load.result.ok > ok + 100, 10, "the load goes on")
        result = load.result
        # Only what the killed worker held (its connections, its accept queue) may fail.
        assert len(result.failed) + len(result.partial) <= 8, (result.failed, result.partial)
    finally:
        assert cli.stop() == 0, cli.err


def test_port_0_gives_every_worker_the_supervisors_port(tmp_path: Path) -> None:
    cli = CLI(tmp_path, "cli_app:app", "--port", "0", "--workers", "2", "--reuse-port")
    try:
        ports = set()
        for _ in range(2):
            found = cli.log_until(r"serving cli_app:app \(WSGI.*\) on http://127\.0\.0\.1:(\d+)")
            ports.add(int(found.group(1)))
        assert len(ports) == 1 and 0 not in ports, ports
        port = ports.pop()
        cli.log_until(r"workers of \S+ ready")
        assert len(pids_served(port, 2)) == 2
    finally:
        assert cli.stop() == 0, cli.err


@pytest.mark.parametrize("args", [
    ["--workers", "1"],
    ["--workers", "2", "--uds", "/tmp/cym-reuse-port-test.sock"],
])
def test_reuse_port_without_a_tcp_group_is_one_line_and_exit_2(tmp_path: Path,
                                                               args: list[str]) -> None:
    done = run_cli(tmp_path, "cli_app:app", "--reuse-port", *args)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "cymongoose: --reuse-port needs TCP and --workers 2 or more"]
