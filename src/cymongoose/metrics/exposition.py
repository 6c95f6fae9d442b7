"""The Prometheus text exposition format (version 0.0.4) of a snapshot: one document, built
whole before any byte of it is sent, so a scrape never sees half of one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .snapshot import Snapshot

__all__ = ["CONTENT_TYPE", "render"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_PREFIX = "cymongoose_"

# name, type, help, the snapshot's key
_SIMPLE = (
    ("requests_in_flight", "gauge", "Requests handed to the app and not answered yet.",
     "in_flight"),
    ("connections_open", "gauge", "Client connections open (HTTP and WebSocket).",
     "connections_open"),
    ("connections_total", "counter", "Client connections accepted.", "connections_total"),
    ("received_bytes_total", "counter", "Bytes received from clients.", "bytes_received"),
    ("sent_bytes_total", "counter", "Bytes sent to clients.", "bytes_sent"),
    ("websockets_open", "gauge", "WebSocket connections open.", "websockets_open"),
    ("websockets_total", "counter", "WebSocket connections accepted.", "websockets_total"),
    ("http2_connections_open", "gauge",
     "Client connections open that speak HTTP/2 (also in connections_open).",
     "http2_connections_open"),
    ("http2_connections_total", "counter",
     "Client connections that switched to HTTP/2 (h2c prior knowledge or ALPN h2).",
     "http2_connections_total"),
    ("request_timeouts_total", "counter",
     "Requests answered 504 because the app had not started its response within "
     "--request-timeout.", "request_timeouts"),
    ("threads_abandoned", "gauge",
     "WSGI app threads left running a request that timed out.", "threads_abandoned"),
)


def _label(value: object) -> str:
    text = str(value)
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def _status(code: int) -> str:
    return str(code) if code else "none"  # 0: the request ended before any response


def render(snapshot: Snapshot, *, interface: str,
           bounds: Sequence[float] | None = None, workers: int | None = None,
           restarts: Mapping[str, int] | None = None, capacity: int | None = None,
           utilisation: float | None = None) -> str:
    """The document for `snapshot` (one process's, or `combine()`d); `interface` labels the
    request metrics (wsgi, asgi or raw). `bounds`: the histogram's bucket bounds (the core's
    DURATION_BOUNDS by default). A supervisor adds its `workers` and `restarts` by reason,
    and, where the server has a fixed capacity, that and its `utilisation`
    (utilisation.py)."""
    if bounds is None:
        from .._mongoose import DURATION_BOUNDS
        bounds = DURATION_BOUNDS
    iface = f'interface="{_label(interface)}"'
    out: list[str] = []

    def family(name: str, kind: str, help_text: str) -> None:
        out.append(f"# HELP {_PREFIX}{name} {help_text}")
        out.append(f"# TYPE {_PREFIX}{name} {kind}")

    family("requests_total", "counter",
           "Requests answered, by protocol (1.1: HTTP/1.x, 2: HTTP/2) and status (none: the "
           "connection ended before a response).")
    # A snapshot without requests_http2 (0.2.x's) had no HTTP/2: all of it is 1.1.
    over_h2 = snapshot.get("requests_http2", {})
    for code, n in sorted(snapshot.get("requests", {}).items()):
        h2 = over_h2.get(code, 0)
        for protocol, count in (("1.1", n - h2), ("2", h2)):
            if count > 0:
                out.append(f'{_PREFIX}requests_total{{{iface},protocol="{protocol}",'
                           f'status="{_status(code)}"}} {count}')
    family("requests_refused_total", "counter",
           "Requests the server answered itself without the app: malformed, over a limit, "
           "timed out, or over --limit-concurrency (503).")
    for code, n in sorted(snapshot.get("refused", {}).items()):
        out.append(f'{_PREFIX}requests_refused_total{{{iface},status="{_status(code)}"}} {n}')

    family("request_duration_seconds", "histogram",
           "Seconds from a request handed to the app to its response written.")
    buckets = snapshot.get("duration_buckets") or (0,) * (len(bounds) + 1)
    running = 0
    for bound, n in zip(bounds, buckets[:len(bounds)], strict=True):
        running += n
        out.append(f'{_PREFIX}request_duration_seconds_bucket{{{iface},le="{bound:g}"}} '
                   f"{running}")
    running += sum(buckets[len(bounds):])
    out.append(f'{_PREFIX}request_duration_seconds_bucket{{{iface},le="+Inf"}} {running}')
    out.append(f"{_PREFIX}request_duration_seconds_sum{{{iface}}} "
               f"{_number(float(snapshot.get('duration_sum', 0.0)))}")
    out.append(f"{_PREFIX}request_duration_seconds_count{{{iface}}} {running}")

    for name, kind, help_text, key in _SIMPLE:
        family(name, kind, help_text)
        out.append(f"{_PREFIX}{name} {_number(snapshot.get(key, 0))}")
    if workers is not None:
        family("workers", "gauge", "Worker processes serving (ready).")
        out.append(f"{_PREFIX}workers {workers}")
    if capacity is not None:
        family("capacity", "gauge",
               "Requests the workers can work on at once (app threads, or "
               "--limit-concurrency), summed over the workers serving.")
        out.append(f"{_PREFIX}capacity {capacity}")
    if utilisation is not None:
        family("utilisation", "gauge",
               "Share of the capacity that requests occupied over the last 10 s (0-1): "
               "the autoscaling signal.")
        out.append(f"{_PREFIX}utilisation {round(utilisation, 4)!r}")
    if restarts is not None:
        family("worker_restarts_total", "counter",
               "Workers replaced, by reason: died, max_requests, max_rss or reload (SIGHUP).")
        for reason in sorted(restarts):
            out.append(f'{_PREFIX}worker_restarts_total{{reason="{_label(reason)}"}} '
                       f"{restarts[reason]}")
    return "\n".join(out) + "\n"
