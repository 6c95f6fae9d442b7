"""make flood: the raw handler behind the command line under four floods, with a fresh
client's time to first byte measured throughout and the server's descriptors and memory
compared before and after.

- idle: 20,000 connections opened and held without a request, then released;
- churn: a new connection per request (`Connection: close`) at full speed (wrk, 50
  connections);
- accept: 8,000 clients connecting at once, each sending a request, more than the listen
  queue holds, every one of them answered;
- tls: on an HTTPS listener, 200 clients sending garbage and 1,000 that connect and never
  speak, beside the probe's own HTTPS requests.

The probe opens a new connection every 20 ms, sends one GET and times connect-to-first-byte;
before each flood it measures the quiet baseline. A flood passes when the probe never fails,
the flood's own clients are answered or refused as they should be, and within 10 s the
server's descriptors come back to their level before the flood and its RSS to within 5% (at
least 2 MiB) of it. Figures go to
tests/reliability/results/flood.json (docs/reliability.md).

    python tests/reliability/flood.py [--only idle,churn] [--seconds 60] [--idle 20000]
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import multiprocessing
import os
import random
import resource
import selectors
import socket
import ssl
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
for _p in (str(TESTS), str(TESTS / "benchmarks")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from benchkit import wrk as wrkkit  # noqa: E402
from support.many_clients import open_many  # noqa: E402

from reliability.soak import TWO_CPUS, Sample, cli_server, read_sample, settle  # noqa: E402

FLOODS = ("idle", "churn", "accept", "tls")
RESULTS = HERE / "results" / "flood.json"
REQUEST = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
BACK_WITHIN_S = 10.0
RSS_SLACK_MIN_KIB = 2048
RSS_SLACK_PERCENT = 5
PROBE_EVERY_S = 0.02


def fd_ceiling() -> int:
    """The most descriptors one process may hold here: the hard limit (raising it needs
    CAP_SYS_RESOURCE, which a container seldom grants)."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return 1 << 20 if hard == resource.RLIM_INFINITY else hard


def raise_soft_limit(need: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, fd_ceiling()), hard))


class Probe:
    """A fresh client every PROBE_EVERY_S in a thread: connect, GET, first byte timed."""

    def __init__(self, port: int, tls: ssl.SSLContext | None = None) -> None:
        self.port, self.tls = port, tls
        self.ttfb_ms: list[float] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Probe:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        if not self._thread.is_alive() and not self._stop.is_set():
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def once(self) -> None:
        start = time.monotonic()
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        try:
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_hostname="localhost")
            sock.sendall(REQUEST)
            if not sock.recv(1):
                raise ConnectionError("closed before answering")
            self.ttfb_ms.append((time.monotonic() - start) * 1000)
            while b"\r\n\r\n" not in sock.recv(4096):
                pass
        finally:
            sock.close()

    def _run(self) -> None:
        while True:  # one probe at least, however soon the flood ends
            try:
                self.once()
            except OSError as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
            if self._stop.wait(PROBE_EVERY_S):
                break

    def summary(self) -> dict[str, float]:
        ms = sorted(self.ttfb_ms)
        if not ms:
            return {"probes": 0, "errors": len(self.errors)}
        return {"probes": len(ms), "errors": len(self.errors),
                "p50_ms": round(statistics.median(ms), 3),
                "p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 3),
                "max_ms": round(ms[-1], 3)}


@dataclass
class FloodResult:
    flood: str
    baseline: dict[str, float]
    during: dict[str, float]
    flood_clients: dict[str, int]
    fds_before: int
    fds_after: int
    fds_back_s: float | None
    rss_kib_before: int
    rss_kib_peak: int
    rss_kib_after: int
    rss_back_s: float | None
    failures: list[str] = field(default_factory=list)


def quiet_baseline(port: int, tls: ssl.SSLContext | None, seconds: float) -> dict[str, float]:
    with Probe(port, tls) as probe:
        time.sleep(seconds)
    return probe.summary()


def tree_sample(pid: int) -> Sample | None:
    """read_sample() summed over the server and its workers (with --workers)."""
    pids = [pid]
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            pids += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    except OSError:
        pass
    samples = [s for s in (read_sample(p, time.monotonic()) for p in pids) if s is not None]
    if not samples:
        return None
    return Sample(0, sum(s.rss_kib for s in samples), sum(s.fds for s in samples),
                  sum(s.threads for s in samples))


def rss_slack_kib(before_kib: int) -> int:
    """How far above its level before a flood the server's RSS may stay: what a warmed-up
    allocator and interpreter keep (the raw handler's own caches, a grown epoll set)."""
    return max(RSS_SLACK_MIN_KIB, before_kib * RSS_SLACK_PERCENT // 100)


def _hold(port: int, count: int, source: str | None, pipe: Connection) -> None:
    """A client process of IdleClients: `count` connections opened, their number (or the
    error that stopped them) sent on `pipe`, then held without a byte sent until the parent
    says so or exits."""
    raise_soft_limit(count + 64)
    try:
        socks = open_many(port, count, timeout=60, source=source)
    except OSError as exc:
        pipe.send((0, f"{type(exc).__name__}: {exc}"))
        return
    pipe.send((len(socks), ""))
    parent = os.getppid()
    # Forked, this process holds the parent's end of the pipe too: no EOF tells it the parent
    # has gone, its parent id does.
    while not pipe.poll(1.0) and os.getppid() == parent:
        pass
    for s in socks:
        s.close()


class IdleClients:
    """`count` connections to 127.0.0.1:`port` that never send a byte, opened by as many
    client processes as the descriptor limit asks for (forked: they keep this process's CPU
    affinity) and held until close(). `held` counts those the clients got connected, which
    the server may not have accepted yet. `source`: the local address they connect from
    (open_many's: 127.0.0.2 spares a probe from 127.0.0.1 the ephemeral port search their
    ports would cost its connect())."""

    def __init__(self, port: int, count: int, timeout: float = 90.0,
                 source: str | None = None) -> None:
        per_process = fd_ceiling() - 1000
        self.parts = [min(per_process, count - i) for i in range(0, count, per_process)]
        self.port, self.timeout, self.source = port, timeout, source
        self.held = 0
        self.errors: list[str] = []
        self._pipes: list[Connection] = []
        self._procs: list[multiprocessing.process.BaseProcess] = []

    def __enter__(self) -> IdleClients:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> int:
        ctx = multiprocessing.get_context("fork")
        for part in self.parts:
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(target=_hold, args=(self.port, part, self.source, theirs),
                               daemon=True)
            proc.start()
            theirs.close()
            self._pipes.append(mine)
            self._procs.append(proc)
        for pipe in self._pipes:
            held, error = pipe.recv() if pipe.poll(self.timeout) else (0, "no answer")
            self.held += held
            if error:
                self.errors.append(error)
        return self.held

    def close(self) -> None:
        for pipe in self._pipes:
            try:
                pipe.send(None)
            except OSError:
                pass  # that client process has gone already
            pipe.close()
        for proc in self._procs:
            proc.join(30)
            if proc.is_alive():
                proc.kill()
                proc.join()
        self._pipes, self._procs = [], []


def idle_flood(port: int, seconds: float, count: int, probe: Probe,
               **_: object) -> dict[str, int]:
    """`count` connections (IdleClients) held for `seconds` without a request, then closed;
    the probe runs while they are held, not while they open."""
    with IdleClients(port, count) as clients:
        probe.start()
        time.sleep(seconds)
        probe.stop()
    return {"held": clients.held, "client_processes": len(clients.parts)}


def churn_flood(port: int, seconds: float, tmp: Path, **_: object) -> dict[str, int]:
    script = wrkkit.write_script(tmp / "churn.lua")
    script.write_text('wrk.headers["Connection"] = "close"\n' + script.read_text())
    run = wrkkit.run(f"http://127.0.0.1:{port}/", script, connections=50, duration_s=seconds,
                     cpu=1 if TWO_CPUS else None, timeout_s="10s")
    return {"requests": run.requests, "per_s": round(run.rps), "non_2xx": run.non2xx,
            "socket_errors": run.socket_errors}


def accept_flood(port: int, count: int, **_: object) -> dict[str, int]:
    """`count` clients connect at once and each sends a request as soon as it is connected;
    every one must get its answer (a refused connect counts as refused, a reset after
    connecting as lost)."""
    sel = selectors.DefaultSelector()
    socks: dict[socket.socket, bytearray] = {}
    refused = lost = answered = 0
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        rc = s.connect_ex(("127.0.0.1", port))
        if rc not in (0, errno.EINPROGRESS):
            refused += 1
            s.close()
            continue
        socks[s] = bytearray()
        sel.register(s, selectors.EVENT_WRITE)
    deadline = time.monotonic() + 60
    try:
        while sel.get_map() and time.monotonic() < deadline:
            for key, mask in sel.select(1.0):
                s = key.fileobj
                assert isinstance(s, socket.socket)
                if mask & selectors.EVENT_WRITE:
                    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        refused += 1
                        sel.unregister(s)
                        continue
                    try:
                        s.send(REQUEST)
                    except OSError:
                        lost += 1
                        sel.unregister(s)
                        continue
                    sel.modify(s, selectors.EVENT_READ)
                    continue
                try:
                    chunk = s.recv(4096)
                except OSError:
                    chunk = b""
                buf = socks[s]
                buf += chunk
                if b"\r\n\r\n" in buf:
                    answered += 1
                    sel.unregister(s)
                elif not chunk:
                    lost += 1
                    sel.unregister(s)
        unanswered = len(sel.get_map())
    finally:
        sel.close()
        for s in socks:
            s.close()
    return {"clients": count, "answered": answered, "refused": refused, "lost": lost,
            "unanswered": unanswered}


def tls_flood(port: int, seconds: float, garbage: int = 200, stalled: int = 1000,
              **_: object) -> dict[str, int]:
    rng = random.Random(19)
    stalled_socks = open_many(port, stalled, timeout=30)
    stop = threading.Event()
    sent = [0]
    closed_by_server = [0]

    # Garbage that starts like a TLS record longer than what was sent leaves the server
    # waiting for the rest until its handshake timeout: at the end, those sockets are shut
    # down so that no client sits out its 5 s read.
    live: set[socket.socket] = set()
    live_lock = threading.Lock()

    def garbage_client() -> None:
        while not stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                    with live_lock:
                        live.add(s)
                    try:
                        for _ in range(4):
                            s.sendall(rng.randbytes(1024))
                            sent[0] += 1
                        if s.recv(4096) == b"" and not stop.is_set():
                            closed_by_server[0] += 1
                    finally:
                        with live_lock:
                            live.discard(s)
            except OSError:
                if not stop.is_set():
                    closed_by_server[0] += 1

    threads = [threading.Thread(target=garbage_client, daemon=True)
               for _ in range(min(garbage, 16))]
    try:
        for t in threads:
            t.start()
        time.sleep(seconds)
    finally:
        stop.set()
        with live_lock:
            for s in live:
                with contextlib.suppress(OSError):  # the server closed it already
                    s.shutdown(socket.SHUT_RDWR)
        for t in threads:
            t.join()
        for s in stalled_socks:
            s.close()
    return {"stalled": stalled, "garbage_connections_closed": closed_by_server[0],
            "garbage_kib_sent": sent[0]}


def tls_files(tmp: Path) -> tuple[tuple[str, ...], ssl.SSLContext]:
    """A certificate and key written to `tmp` (removed with it), the server options that
    name them, and a client context trusting them."""
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    certfile, keyfile = tmp / "cert.pem", tmp / "key.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(certfile))
    cert.private_key_pem.write_to_path(str(keyfile))
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    return ("--ssl-certfile", str(certfile), "--ssl-keyfile", str(keyfile)), ctx


def run_flood(name: str, seconds: float, idle_count: int, accept_count: int,
              tmp: Path, app: tuple[str, str] = ("hello_apps:raw_hello", "raw"),
              quiet_s: float = 2.0) -> FloodResult:
    """One flood against `app` (module:attribute, interface) behind the command line, after
    `quiet_s` of probing it quiet."""
    extra: tuple[str, ...] = ()
    ctx: ssl.SSLContext | None = None
    if name == "tls":
        extra, ctx = tls_files(tmp)
    # One worker holds what the descriptor limit allows; 20,000 idle clients may need two.
    need = idle_count + 1000 if name == "idle" else fd_ceiling()
    workers = max(1, -(-need // fd_ceiling()))
    if workers > 1:
        extra += ("--workers", str(workers))
    raise_soft_limit(65536)

    def probe(port: int) -> None:
        Probe(port, ctx).once()

    with cli_server(*app, extra=extra, nofile=need,
                    probe=probe) as (proc, port):
        baseline = quiet_baseline(port, ctx, quiet_s)
        before = tree_sample(proc.pid)
        assert before is not None
        peak = [before.rss_kib]

        def watch_rss(stop: threading.Event) -> None:
            while not stop.wait(0.2):
                s = tree_sample(proc.pid)
                if s is not None:
                    peak[0] = max(peak[0], s.rss_kib)

        stop = threading.Event()
        watcher = threading.Thread(target=watch_rss, args=(stop,), daemon=True)
        watcher.start()
        flood: Callable[..., dict[str, int]] = {
            "idle": idle_flood, "churn": churn_flood, "accept": accept_flood,
            "tls": tls_flood}[name]
        probe_during = Probe(port, ctx)
        if name != "idle":
            probe_during.start()
        try:
            clients = flood(port, seconds=seconds, count=idle_count if name == "idle"
                            else accept_count, tmp=tmp, probe=probe_during)
        finally:
            probe_during.stop()
        stop.set()
        watcher.join()
        back_s, fds_now = settle(lambda: tree_sample(proc.pid), lambda s: s.fds <= before.fds,
                                  BACK_WITHIN_S)
        rss_cap = before.rss_kib + rss_slack_kib(before.rss_kib)
        rss_back_s, after = settle(lambda: tree_sample(proc.pid), lambda s: s.rss_kib <= rss_cap,
                                   BACK_WITHIN_S)
        clients["server_workers"] = workers
        result = FloodResult(name, baseline, probe_during.summary(), clients, before.fds,
                             fds_now.fds if fds_now else -1, back_s, before.rss_kib, peak[0],
                             after.rss_kib if after else 0, rss_back_s)
    if result.during.get("errors"):
        result.failures.append(f"{result.during['errors']} probe requests failed")
    if back_s is None:
        result.failures.append(f"descriptors {result.fds_after}, not back to {before.fds} "
                               f"within {BACK_WITHIN_S} s")
    if rss_back_s is None:
        result.failures.append(f"RSS {result.rss_kib_after} KiB, not back within "
                               f"{rss_slack_kib(before.rss_kib)} KiB of {before.rss_kib} KiB "
                               f"within {BACK_WITHIN_S} s")
    for bad in ("non_2xx", "socket_errors", "lost", "unanswered"):
        if clients.get(bad):
            result.failures.append(f"{clients[bad]} {bad}")
    return result


def table(path: Path = RESULTS) -> str:
    """The recorded floods as docs/reliability.md's table."""
    rows = ["| Flood | First byte p50 / p99, quiet (ms) | During (ms) | Clients | Descriptors "
            "before, after | RSS before, peak, after (KiB) | Back in (s): descriptors, RSS |",
            "|---|---|---|---|---|---|---|"]
    for name, r in json.loads(path.read_text()).items():
        if name.startswith("_"):
            continue
        clients = ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in r["flood_clients"].items())
        rows.append(f"| `{name}` | {r['baseline']['p50_ms']} / {r['baseline']['p99_ms']} | "
                    f"{r['during']['p50_ms']} / {r['during']['p99_ms']} | {clients} | "
                    f"{r['fds_before']}, {r['fds_after']} | {r['rss_kib_before']:,}, "
                    f"{r['rss_kib_peak']:,}, {r['rss_kib_after']:,} | {r['fds_back_s']}, "
                    f"{r.get('rss_back_s')} |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help=f"comma-separated, of: {', '.join(FLOODS)}")
    parser.add_argument("--seconds", type=float, default=60.0,
                        help="how long churn runs and idle and tls hold")
    parser.add_argument("--idle", type=int, default=20000, help="idle connections")
    parser.add_argument("--accept", type=int, default=8000, help="clients connecting at once")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--table", action="store_true",
                        help="print the recorded figures as docs/reliability.md's table")
    args = parser.parse_args()
    if args.table:
        print(table(args.out))
        return 0
    names = [n for n in args.only.split(",") if n] or list(FLOODS)
    unknown = sorted(set(names) - set(FLOODS))
    if unknown:
        parser.error(f"--only: unknown flood {', '.join(unknown)}; one of {', '.join(FLOODS)}")
    results = []
    with tempfile.TemporaryDirectory(prefix="cym-flood-") as tmp:
        for name in names:
            r = run_flood(name, args.seconds, args.idle, args.accept, Path(tmp))
            results.append(r)
            print(f"{name}: first byte p50/p99 {r.baseline.get('p50_ms')}/"
                  f"{r.baseline.get('p99_ms')} ms quiet, {r.during.get('p50_ms')}/"
                  f"{r.during.get('p99_ms')} ms during; {r.flood_clients}; descriptors "
                  f"{r.fds_before}->{r.fds_after} (back in {r.fds_back_s} s), RSS "
                  f"{r.rss_kib_before}/{r.rss_kib_peak}/{r.rss_kib_after} KiB (back in "
                  f"{r.rss_back_s} s): "
                  f"{'FAILED ' + '; '.join(r.failures) if r.failures else 'ok'}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(args.out.read_text()) if args.out.exists() else {}
    previous.update({r.flood: asdict(r) for r in results})
    previous["_machine"] = {"cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d")}
    args.out.write_text(json.dumps(previous, indent=1) + "\n")
    return 1 if any(r.failures for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
