"""A snapshot of the core's counts (the dict `Manager.metrics()` and `read_metrics()` return)
and the two operations the supervisor needs on them: adding processes up, and keeping what
a process that is gone still contributes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["BY_STATUS", "COUNTERS", "GAUGES", "Snapshot", "combine", "settled"]

#: What a snapshot holds: these counters and gauges, the counts by status of BY_STATUS
#: (`requests_http2` is the part of `requests` served over HTTP/2; a 0.2.x snapshot has
#: none), `duration_buckets` (one count per bucket of DURATION_BOUNDS, then +Inf, not
#: cumulative) and `duration_sum` (seconds).
Snapshot = Mapping[str, Any]

COUNTERS = ("connections_total", "bytes_received", "bytes_sent", "websockets_total",
            "http2_connections_total", "request_timeouts")
GAUGES = ("in_flight", "connections_open", "websockets_open", "http2_connections_open",
          "threads_abandoned")
BY_STATUS = ("requests", "requests_http2", "refused")


def combine(snapshots: Iterable[Snapshot]) -> dict[str, Any]:
    """The sum of `snapshots`: every count added, by status and by bucket."""
    total: dict[str, Any] = {name: {} for name in BY_STATUS}
    total.update(duration_buckets=(), duration_sum=0.0)
    for name in COUNTERS + GAUGES:
        total[name] = 0
    for snap in snapshots:
        for name in COUNTERS + GAUGES:
            total[name] += snap.get(name, 0)
        for by_status in BY_STATUS:
            into = total[by_status]
            for status, n in snap.get(by_status, {}).items():
                into[status] = into.get(status, 0) + n
        buckets = snap.get("duration_buckets", ())
        if buckets:
            have = total["duration_buckets"] or (0,) * len(buckets)
            total["duration_buckets"] = tuple(a + b for a, b in zip(have, buckets, strict=True))
        total["duration_sum"] += snap.get("duration_sum", 0.0)
    return total


def settled(snapshot: Snapshot) -> dict[str, Any]:
    """What a process that has exited still counts for: its counters (a counter never goes
    down when a worker is replaced), not its gauges (its connections are gone)."""
    kept = dict(snapshot)
    for name in GAUGES:
        kept[name] = 0
    return kept
