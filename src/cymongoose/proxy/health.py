"""Active health checks of the reverse proxy's upstreams: every `interval` seconds each
upstream gets `GET path` on a connection of its own; a 2xx or 3xx status line within the
timeout keeps it in, anything else (refused, reset, 5xx, silence) takes it out of every
route until a check passes again. Passive health (failures counted by the data path) works
beside it in the core. Each change is logged once (WARNING, with the reason when it goes
out), never each failed probe.

The probes run on the proxy's own loop, a few Python calls per upstream per interval: they
never wait, and they are off the data path.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._mongoose import Connection, Manager, Timer

__all__ = ["HealthChecker"]

log = logging.getLogger("cymongoose.error")


class _Probe:
    __slots__ = ("index", "conn", "started", "answer", "done")

    def __init__(self, index: int, started: float) -> None:
        self.index = index
        self.conn: Connection | None = None
        self.started = started
        self.answer = b""
        self.done = False


class HealthChecker:
    """Probes `targets` (index, connect URL, label, Host, TlsOpts or None) on `manager` and
    reports each verdict through `report(index, healthy)`."""

    def __init__(self, manager: Manager, targets: list[tuple[int, str, str, str, Any]],
                 path: str,
                 interval: float, timeout: float,
                 report: Callable[[int, bool], None]) -> None:
        self._manager = manager
        self._targets = targets
        self._path = path
        self._timeout = timeout
        self._report = report
        self._probes: dict[int, _Probe] = {}
        self._healthy: dict[int, bool] = {}
        self._timer: Timer | None = manager.timer_add(
            max(1, int(interval * 1000)), self._tick, repeat=True, run_now=True)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for probe in list(self._probes.values()):
            self._close(probe)
        self._probes.clear()

    def _tick(self) -> None:
        now = time.monotonic()
        for index, url, _label, host, tls in self._targets:
            probe = self._probes.get(index)
            if probe is not None:
                if now - probe.started < self._timeout:
                    continue  # still running: one probe per upstream at a time
                self._verdict(probe, False, f"no answer within {self._timeout:g} s")
            self._start(index, url, host, tls, now)

    def _start(self, index: int, url: str, host: str, tls: Any, now: float) -> None:
        from .._mongoose import MG_EV_CLOSE, MG_EV_CONNECT, MG_EV_ERROR, MG_EV_READ

        probe = _Probe(index, now)
        self._probes[index] = probe
        request = (f"GET {self._path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: cymongoose "
                   "health check\r\nConnection: close\r\n\r\n").encode("latin-1")

        def handler(conn: Any, ev: int, data: Any) -> None:
            if probe.done:
                return
            if ev == MG_EV_CONNECT:
                if tls is not None:
                    conn.tls_init(tls)  # the request waits for the handshake
                conn.send(request)
            elif ev == MG_EV_READ:
                probe.answer += conn.recv_data(consume=True)
                if b"\r\n" in probe.answer or len(probe.answer) > 64:
                    line = probe.answer.split(b"\r\n", 1)[0]
                    status = line[9:12] if line.startswith(b"HTTP/1.") else b""
                    ok = status[:1] in (b"2", b"3") and status.isdigit()
                    self._verdict(probe, ok, "" if ok else
                                  f"answered {line[:64].decode('latin-1')!r}")
            elif ev == MG_EV_ERROR:
                self._verdict(probe, False, str(data).removeprefix("socket error: "))
            elif ev == MG_EV_CLOSE:
                self._verdict(probe, False, "closed without a status line")

        try:
            probe.conn = self._manager.connect(url, handler, http=False)
        except (OSError, RuntimeError, ValueError) as exc:
            self._verdict(probe, False, str(exc))
            return
        # The verdict is logged here, once per change; the core's own line for each failed
        # probe would repeat it every interval.
        probe.conn.log_errors = False

    def _verdict(self, probe: _Probe, healthy: bool, why: str) -> None:
        if probe.done:
            return
        probe.done = True
        if self._probes.get(probe.index) is probe:
            del self._probes[probe.index]
        self._close(probe)
        label = next(t[2] for t in self._targets if t[0] == probe.index)
        was = self._healthy.get(probe.index)
        self._healthy[probe.index] = healthy
        if was is not healthy:
            if healthy:
                if was is not None:
                    log.warning("proxy: upstream %s passes its health check again", label)
            else:
                log.warning("proxy: upstream %s failed its health check (%s): out of every "
                            "route until it passes", label, why)
        self._report(probe.index, healthy)

    @staticmethod
    def _close(probe: _Probe) -> None:
        conn = probe.conn
        probe.conn = None
        if conn is not None:
            try:
                conn.close()
            except (OSError, RuntimeError):
                pass
