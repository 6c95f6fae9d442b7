"""CPU time and memory of a server's whole process tree, read from /proc.

Every server is started in its own session (``start_new_session=True``), so "the tree" is
every process whose session id is the server's pid: workers, threads' processes and helpers
included, without relying on /proc/<pid>/task/*/children (absent on some kernels).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class TreeSample:
    pids: tuple[int, ...]
    ticks: dict[int, int]  # user + system clock ticks per live process
    cpu_s: float  # user + system time of every live process in the tree
    rss: int  # bytes, VmRSS summed (shared pages of forked workers count once per process)
    pss: int  # bytes, proportional set size summed (shared pages split): 0 if unavailable


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name is in parentheses and may itself contain spaces or ')'.
    return raw[raw.rfind(")") + 2 :].split()


def session_pids(sid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(int(entry))
        # After the command: state, ppid, pgrp, session, ...
        if fields is not None and len(fields) > 3 and int(fields[3]) == sid:
            pids.append(int(entry))
    return sorted(pids)


def _cpu_ticks(pid: int) -> int:
    fields = _stat_fields(pid)
    if fields is None:
        return 0
    # Fields 14 and 15 of stat (utime, stime) are 11 and 12 after the command.
    return int(fields[11]) + int(fields[12])


def status_field(pid: int, key: str) -> int:
    """The number of /proc/PID/status's `key` line (kB for the Vm ones), 0 if gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _pss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendant_pids(pid: int) -> list[int]:
    """`pid` and every process below it by parent id: the tree of a server whose children
    each start a session of their own (PostgreSQL's postmaster does that for every child)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields is not None and len(fields) > 1:
                parents.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid] if os.path.exists(f"/proc/{pid}") else []
    while todo:
        found.append(todo.pop())
        todo += parents.get(found[-1], [])
    return sorted(found)


def sample(sid: int) -> TreeSample:
    """The tree of the session `sid`."""
    return sample_of(session_pids(sid))


def sample_of(pids: list[int]) -> TreeSample:
    ticks = {p: _cpu_ticks(p) for p in pids}
    return TreeSample(
        pids=tuple(pids),
        ticks=ticks,
        cpu_s=sum(ticks.values()) / CLK_TCK,
        rss=sum(status_field(p, "VmRSS") for p in pids) * 1024,
        pss=sum(_pss_kib(p) for p in pids) * 1024,
    )


def cpu_times(cpu: int | list[int] | None) -> dict[str, float]:
    """Seconds one CPU (all CPUs when None; the sum of a list's) spent per state since boot,
    from /proc/stat."""
    if isinstance(cpu, list):
        total: dict[str, float] = {}
        for one in cpu:
            for k, v in cpu_times(one).items():
                total[k] = total.get(k, 0.0) + v
        return total
    name = "cpu" if cpu is None else f"cpu{cpu}"
    with open("/proc/stat") as f:
        for line in f:
            fields = line.split()
            if fields[0] == name:
                keys = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
                return {k: int(v) / CLK_TCK for k, v in zip(keys, fields[1:9], strict=False)}
    return {}


def cpu_load_between(before: dict[str, float], after: dict[str, float], elapsed: float,
                     server_cpu_s: float) -> dict[str, float]:
    """How the server's CPU was used during a run, as fractions of the run's wall time.

    'other' is busy time not charged to the server's processes: other processes sharing the
    CPU (the sign of a machine that was not quiet), or interrupt work the kernel did not
    charge to the server (on the machines measured so far, softirq time of the server's own
    sends is charged to it). 'irq' (hard + soft) is shown for that reason. 'steal' is time
    the hypervisor gave to other guests."""
    if not before or not after or elapsed <= 0:
        return {}
    d = {k: after[k] - before[k] for k in after}
    busy = d["user"] + d["nice"] + d["system"] + d["irq"] + d["softirq"]
    return {"busy": round(busy / elapsed, 3), "irq": round((d["irq"] + d["softirq"]) / elapsed, 3),
            "steal": round(d["steal"] / elapsed, 3),
            "other": round(max(0.0, busy - server_cpu_s) / elapsed, 3)}


def cpu_between(before: TreeSample, after: TreeSample) -> float:
    """CPU seconds the tree used between two samples, per process (workers may come and go)."""
    return sum(t - before.ticks.get(p, 0) for p, t in after.ticks.items()) / CLK_TCK


def connections_to(port: int) -> int:
    """TCP connections still open to a local port (any state but LISTEN and TIME_WAIT)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    local, state = fields[1], fields[3]
                    # 0A = LISTEN, 06 = TIME_WAIT: neither holds server buffers.
                    if int(local.rsplit(":", 1)[1], 16) == port and state not in ("0A", "06"):
                        count += 1
        except OSError:
            pass
    return count


def settle(port: int, timeout: float = 5.0) -> None:
    """Wait until the server has closed every client connection (their buffers are freed),
    so an RSS sample measures what stays, not what 50 open connections hold."""
    deadline = time.monotonic() + timeout
    while connections_to(port) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)


def wait_cpu_quiet(cpu: int | None, busy_below: float = 0.1, window: float = 0.2,
                   timeout: float = 15.0) -> float:
    """Wait until `cpu` was busy less than `busy_below` of a `window` (the previous
    contender done with what a load left it: closing thousands of connections, a garbage
    collector), at most `timeout` seconds; the last window's busy fraction. A run that
    starts on a CPU still busy pays for its predecessor."""
    deadline = time.monotonic() + timeout
    while True:
        before = cpu_times(cpu)
        time.sleep(window)
        after = cpu_times(cpu)
        if not before or not after:
            return 0.0
        d = {k: after[k] - before[k] for k in after}
        total = sum(d.values())
        busy = 1.0 - (d["idle"] + d["iowait"]) / total if total > 0 else 0.0
        if busy < busy_below or time.monotonic() > deadline:
            return busy


def rss_of(pid: int) -> int:
    """VmRSS of one process in bytes (0 once it has gone)."""
    return status_field(pid, "VmRSS") * 1024


def fds_of(sid: int) -> int:
    """Descriptors the whole tree holds open (0 for a process that has gone)."""
    total = 0
    for pid in session_pids(sid):
        try:
            total += len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            pass
    return total


def cpu_ns(sid: int) -> int:
    """Nanoseconds on a CPU of every live thread of the tree, from /proc/<pid>/task/*/schedstat
    (exact, where the clock ticks of sample() are 10 ms apart); a thread that exits between
    two readings takes its time with it."""
    total = 0
    for pid in session_pids(sid):
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
    return total
