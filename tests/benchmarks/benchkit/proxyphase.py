"""The proxy phase: every reverse proxy (contenders of kind "proxy") in front of a C backend of
its own (backend.py), for the JSON hello and a 100 KiB answer, at each count of keep-alive
clients.

All proxies and backends start together; each proxy's answers (both sizes, keep-alive) are
checked through it before and after the load. Then, per round, per load and size, each proxy
in turn gets one wrk run (the first round warms each up at that load and size just before):
rounds are interleaved as in the hello phase, each starting with the next proxy, and a run
starts once the server CPU is quiet (a proxy may still be busy after 10,000 clients left,
which the next run on that CPU would pay for). Proxies run on the server CPU like every
contender; the backends share the client CPU with wrk, so a proxy has a core to itself (the
runs record how busy wrk and the backend were, to tell when that side was the limit). The
backend's counters give, under the load and then while the clients leave, the connections
the proxy opened to it and the most it held open at once, and the requests it forwarded.
Runs are named proxy-<size>-c<clients>.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import backend as backendmod
from . import contenders as ck
from . import httpcheck, procstat
from . import wrk as wrkmod

log = logging.getLogger("bench")

# How long before wrk's end the counters are read for "under load".
END_MARGIN_S = 0.1
# (size id, path, expected body, Content-Type)
SIZES = [("hello", "/", httpcheck.HELLO_BODY, httpcheck.HELLO_TYPE),
         ("100k", backendmod.BIG_PATH, backendmod.BIG_BODY, backendmod.BIG_TYPE)]


def phase_name(size: str, clients: int) -> str:
    return f"proxy-{size}-c{clients}"


@dataclass
class Pair:
    proxy: ck.Running
    backend: backendmod.Backend

    @property
    def name(self) -> str:
        return self.proxy.contender.name


def check(pair: Pair) -> str:
    notes = {httpcheck.check_body(pair.proxy.port, path, body, ctype, pair.proxy.contender
                                  .keepalive) for _size, path, body, ctype in SIZES}
    return "; ".join(sorted(notes))


def start(bench: Any, c: ck.Contender, exe: Path) -> Pair | None:
    try:
        back = backendmod.start(exe, c.name, cpu=bench.client_cpu, run_dir=bench.run_dir)
    except ck.Skip as exc:
        bench.exclude(c.name, "failed to start", f"its backend: {exc}")
        return None
    bench.live.append(back.running)
    try:
        proxy = ck.start(c, cpu=bench.server_cpu, static_dir=bench.static_dir,
                         run_dir=bench.run_dir, values={"backend": back.address})
    except ck.Skip as exc:
        bench.exclude(c.name, "failed to start", str(exc))
        stop_backend(bench, back)
        return None
    bench.live.append(proxy)
    pair = Pair(proxy, back)
    try:
        bench.status[c.name]["check"] = check(pair)
    except (httpcheck.CheckFailed, OSError) as exc:
        bench.exclude(c.name, "wrong answer", f"{exc} (not measured)")
        stop(bench, pair)
        return None
    log.info("%s: answers checked, port %d -> backend %s", c.name, proxy.port, back.address)
    return pair


def stop_backend(bench: Any, back: backendmod.Backend) -> None:
    # Not bench.stop(): a backend has no status entry of its own.
    back.running.stop()
    if back.running in bench.live:
        bench.live.remove(back.running)


def stop(bench: Any, pair: Pair) -> None:
    bench.stop(pair.proxy)
    stop_backend(bench, pair.backend)


def measure(bench: Any, pair: Pair, size: tuple[str, str, bytes, str], clients: int,
            rnd: int, script: Any) -> None:
    size_id, path = size[0], size[1]
    phase = phase_name(size_id, clients)
    procstat.settle(pair.proxy.port, timeout=15)
    if rnd == 1 and bench.args.warmup > 0:
        try:
            bench.wrk(pair.proxy, script, clients, bench.args.warmup, f"warmup-{phase}",
                      path=path)
        except wrkmod.WrkError as exc:
            bench.exclude(pair.name, "wrk failed", f"warm-up of {phase}: {exc}")
            return
        procstat.settle(pair.proxy.port, timeout=15)
    procstat.wait_cpu_quiet(bench.server_cpu)
    before = pair.backend.stats()
    cpu_before = procstat.sample(pair.backend.running.pid)
    # The counters are read three times: before, just before wrk stops (what the proxy did
    # under load) and once the proxy has let its clients go (what their leaving cost it:
    # requests still queued, responses cut short).
    at_end: list[backendmod.Stats] = []
    timer = threading.Timer(max(bench.args.duration - END_MARGIN_S, 0.1),
                            lambda: at_end.append(pair.backend.stats()))
    timer.start()
    run = bench.measure(pair.proxy, phase, rnd, clients, script, path=path)
    timer.join()
    procstat.settle(pair.proxy.port, timeout=15)
    if run is None:
        return
    after = pair.backend.stats()
    end = at_end[0] if at_end else after
    backend_cpu = procstat.cpu_between(cpu_before, procstat.sample(pair.backend.running.pid))
    run.update(size=size_id, path=path,
               backend_opened=end.accepted - before.accepted,
               backend_opened_after=after.accepted - end.accepted,
               backend_open_before=before.open, backend_peak_open=end.peak,
               backend_peak_open_after=after.peak,
               backend_requests=after.requests - before.requests,
               backend_cpu_util=round(backend_cpu / run["duration_s"], 3)
               if run["duration_s"] else None)
    if not pair.backend.running.alive():
        run.update(valid=False, invalid_reason="the backend died")
    log.info("%-24s %-18s backend: %d connections opened under load (%d open at most), "
             "%d as the clients left (%d open at most); %d requests", pair.name, phase,
             run["backend_opened"], end.peak, run["backend_opened_after"], after.peak,
             run["backend_requests"])


def run(bench: Any, group: list[ck.Contender], loads: list[int]) -> None:
    """`bench` is run.py's Bench: its wrk, measure, status and process list."""
    if not group or not loads:
        return
    log.info("== proxy phase: %s at %s clients", ", ".join(c.name for c in group),
             ", ".join(map(str, loads)))
    try:
        exe = backendmod.build()
    except ck.Skip as exc:
        for c in group:
            bench.exclude(c.name, "skipped", f"the backend: {exc}")
        return
    pairs = [p for p in (start(bench, c, exe) for c in group) if p is not None]
    script = bench.script("proxy", [])
    for rnd in range(1, bench.args.rounds + 1):
        # Each round starts with another proxy, so none always follows the same one.
        turn = pairs[(rnd - 1) % len(pairs):] + pairs[:(rnd - 1) % len(pairs)] if pairs else []
        for clients in loads:
            for size in SIZES:
                for pair in turn:
                    if bench.ok(pair.name):
                        measure(bench, pair, size, clients, rnd, script)
    for pair in pairs:
        if bench.ok(pair.name):
            try:
                check(pair)
            except (httpcheck.CheckFailed, OSError) as exc:
                bench.exclude(pair.name, "wrong answer", f"after the load: {exc}")
                bench.invalidate(pair.name, "wrong answer after the load")
        stop(bench, pair)
