"""The realworld phase's PostgreSQL, seen from the bench: the cluster pinned to the client CPU,
its CPU time, whether it is up, and a restart when it went away.

The cluster itself is tests/realworld/postgres_cluster.py's (started as the postgres user,
on 127.0.0.1 and a port of its own, its socket in its own directory). Its CPU time is the
postmaster's and its children's, found by parent id (each child of the postmaster starts a
session of its own): its background processes and one backend per pooled connection. The
runner is pinned to the client CPU and the postmaster inherits that; the postmaster and its
children are pinned again by pid after each start, so a cluster started another way is
pinned too (the backends forked later inherit it from the postmaster).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from . import procstat

log = logging.getLogger("bench")


class Database:
    """`cluster`: a started PostgresCluster; `cpu`: the CPU it is pinned to (None: not)."""

    def __init__(self, cluster: Any, cpu: int | None) -> None:
        self.cluster = cluster
        self.cpu = cpu
        self.pid = 0
        # What happened to it during the phase (an outage, a restart), for the report.
        self.events: list[str] = []
        self._lock = threading.Lock()  # stop() from the outage timer, start() from the phase
        self.started()

    @property
    def dsn(self) -> str:
        return str(self.cluster.dsn)

    def started(self) -> None:
        self.pid = int(self.cluster.postmaster_pid)
        if self.cpu is None:
            return
        for pid in procstat.descendant_pids(self.pid):
            try:
                os.sched_setaffinity(pid, {self.cpu})
            except OSError:
                pass  # a process that exited meanwhile

    def alive(self) -> bool:
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return False

    def sample(self) -> procstat.TreeSample:
        return procstat.sample_of(procstat.descendant_pids(self.pid))

    def stop(self, why: str) -> None:
        """Take it away (pg_ctl stop -m fast: its sessions end at once), bounded by
        pg_ctl's own wait."""
        with self._lock:
            self.events.append(f"{time.strftime('%H:%M:%S')} stopped: {why}")
            log.warning("realworld: stopping PostgreSQL (%s)", why)
            try:
                self.cluster.stop()
            except Exception as exc:  # noqa: BLE001 - reported; the phase goes on
                self.events.append(f"stop failed: {exc}")

    def ensure_up(self) -> bool:
        """True if it is up, restarting it (same data) if it went away; False if it cannot
        be restarted."""
        if self.alive():
            return True
        with self._lock:
            log.warning("realworld: PostgreSQL is down: restarting it")
            try:
                self.cluster.stop()  # forgets the dead server (a no-op if stopped cleanly)
            except Exception:  # noqa: BLE001 - it is already gone
                pass
            try:
                self.cluster.start()
            except Exception as exc:  # noqa: BLE001 - reported; the phase goes on
                self.events.append(f"{time.strftime('%H:%M:%S')} restart failed: {exc}")
                log.error("realworld: PostgreSQL did not restart: %s", exc)
                return False
            self.started()
            self.events.append(f"{time.strftime('%H:%M:%S')} restarted (pid {self.pid})")
            return True
