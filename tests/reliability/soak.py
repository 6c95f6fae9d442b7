"""make soak: each workload held at a fixed rate near 70% of its measured peak, then judged.

Workloads: `raw` (a raw handler), `wsgi` (Flask), `asgi` (FastAPI), each behind the
`cymongoose` command line and loaded by wrk pacing its requests (the Lua `delay()` hook);
`ws` (the ASGI WebSocket echo, loaded by the C client of tests/benchmarks/ws at a fixed
rate); `mqtt` (our MQTT client publishing at QoS 1 to a private Mosquitto and reading each
message back, soak_mqtt.py). The process under test is pinned to CPU 0 and the load to CPU 1
where there are two; `--cpu N` puts both on CPU N instead, so that two soaks can run at once,
one per CPU (the peak, and so the rate, is then measured on that one CPU).

For each: the peak (3 s flat out), the fixed rate (70% of it), a warm-up, then the soak, the
process's RSS, open descriptors and threads sampled throughout. It passes with no non-2xx
answer, no socket error (nor a lost or mismatched message), descriptors and threads back to
their level before the load within 5 s of it stopping, and, on runs of 10 minutes or more,
an RSS slope after the warm-up under 1 MiB per 10 minutes. Figures go to
tests/reliability/results/soak.json (docs/reliability.md).

    python tests/reliability/soak.py --minutes 30 [--only raw,wsgi] [--rate-fraction 0.7]
                                     [--cpu N]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
BENCH = TESTS / "benchmarks"
for _p in (str(TESTS), str(BENCH)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from benchkit import wrk as wrkkit  # noqa: E402
from support.cli_run import cli_env  # noqa: E402
from support.ports import free_port  # noqa: E402
from support.processes import stop_process  # noqa: E402

WORKLOADS = ("raw", "wsgi", "asgi", "ws", "mqtt")
HTTP_APPS = {"raw": ("hello_apps:raw_hello", "raw"),
             "wsgi": ("hello_apps:flask_app", "wsgi"),
             "asgi": ("hello_apps:fastapi_app", "asgi")}
RESULTS = HERE / "results" / "soak.json"
BACK_WITHIN_S = 5.0
SLOPE_LIMIT_MIB_PER_10MIN = 1.0
SLOPE_JUDGED_FROM_S = 600  # shorter runs report the slope without judging it
TWO_CPUS = (os.cpu_count() or 1) >= 2


def pinned(cmd: list[str], cpu: int | None) -> list[str]:
    return ["taskset", "-c", str(cpu), *cmd] if cpu is not None else cmd


@dataclass(frozen=True)
class Placement:
    """The CPU of the process under test and the CPU of its load; None: not pinned."""
    server: int | None = 0 if TWO_CPUS else None
    load: int | None = 1 if TWO_CPUS else None


@dataclass
class Sample:
    t: float
    rss_kib: int
    fds: int
    threads: int


def read_sample(pid: int, t0: float) -> Sample | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    if "VmRSS" not in fields:
        return None  # a zombie (exited, not reaped yet) has no memory lines: it is gone
    return Sample(round(time.monotonic() - t0, 2), int(fields["VmRSS"].split()[0]), fds,
                  int(fields["Threads"]))


class Sampler:
    """The process's RSS, descriptors and threads every `every` seconds, in a thread."""

    def __init__(self, pid: int, every: float) -> None:
        self.pid, self.every = pid, every
        self.samples: list[Sample] = []
        self._t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            sample = read_sample(self.pid, self._t0)
            if sample is not None:
                self.samples.append(sample)
            self._stop.wait(self.every)


def rss_slope_mib_per_10min(samples: list[Sample], skip_s: float) -> float | None:
    """Least-squares slope of RSS over the samples after `skip_s`."""
    pts = [(s.t, s.rss_kib) for s in samples if s.t >= skip_s]
    if len(pts) < 3:
        return None
    mt = sum(t for t, _ in pts) / len(pts)
    mr = sum(r for _, r in pts) / len(pts)
    den = sum((t - mt) ** 2 for t, _ in pts)
    if den == 0:
        return None
    slope_kib_s = sum((t - mt) * (r - mr) for t, r in pts) / den
    return round(slope_kib_s * 600 / 1024, 3)


def settle(read: Callable[[], Sample | None], back: Callable[[Sample], bool],
           within_s: float) -> tuple[float | None, Sample | None]:
    """Seconds until the sample `read` returns is `back`, or None if not within `within_s`,
    with the last sample read."""
    start = time.monotonic()
    while True:
        s = read()
        if s is not None and back(s):
            return round(time.monotonic() - start, 2), s
        if time.monotonic() - start > within_s:
            return None, s
        time.sleep(0.05)


def settle_back(pid: int, fds: int, threads: int) -> float | None:
    """Seconds until the process holds no more descriptors and threads than before the
    load, or None if it does not within BACK_WITHIN_S."""
    return settle(lambda: read_sample(pid, 0), lambda s: s.fds <= fds and s.threads <= threads,
                  BACK_WITHIN_S)[0]


@dataclass
class Outcome:
    workload: str
    minutes: float
    peak_per_s: float
    target_per_s: float
    achieved_per_s: float
    operations: int
    errors: dict[str, int]
    rss_kib_start: int
    rss_kib_end: int
    rss_slope_mib_per_10min: float | None
    fds_before: int
    threads_before: int
    back_to_baseline_s: float | None
    failures: list[str] = field(default_factory=list)
    samples: list[dict[str, float]] = field(default_factory=list)


def judge(o: Outcome) -> Outcome:
    for name, count in o.errors.items():
        if count:
            o.failures.append(f"{count} {name}")
    if o.back_to_baseline_s is None:
        o.failures.append(f"descriptors or threads not back to {o.fds_before}/"
                          f"{o.threads_before} within {BACK_WITHIN_S} s")
    if (o.minutes * 60 >= SLOPE_JUDGED_FROM_S and o.rss_slope_mib_per_10min is not None
            and o.rss_slope_mib_per_10min >= SLOPE_LIMIT_MIB_PER_10MIN):
        o.failures.append(f"RSS grows {o.rss_slope_mib_per_10min} MiB per 10 min")
    return o


@contextmanager
def cli_server(app: str, interface: str, extra: tuple[str, ...] = (), nofile: int = 0,
               probe: Callable[[int], None] | None = None, cpu: int | None = Placement.server,
               ) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """The command line serving `app` on a free port, pinned to `cpu`, until it answers
    (`probe(port)` raises until then; default: a GET over HTTP). `nofile`: the soft
    open-file limit it starts with, at most the hard one."""
    port = free_port()
    exe = Path(sys.executable).with_name("cymongoose")
    cmd = [str(exe), app, "--interface", interface, "--host", "127.0.0.1", "--port",
           str(port), "--no-access-log", "--log-level", "warning", *extra]
    env = cli_env(PYTHONPATH=str(BENCH / "servers"))

    def limits() -> None:
        if nofile:  # the soft limit only: a hard limit lowered cannot come back
            import resource
            _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            top = nofile if hard == resource.RLIM_INFINITY else min(nofile, hard)
            resource.setrlimit(resource.RLIMIT_NOFILE, (top, hard))

    proc = subprocess.Popen(pinned(cmd, cpu), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, preexec_fn=limits)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if probe is not None:
                    probe(port)
                    break
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as r:
                    r.read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode() if proc.stderr else ""
                    raise RuntimeError(f"{app} did not start: {err[-500:]}") from None
                time.sleep(0.1)
        yield proc, port
    finally:
        stop_process(proc, 15)


def idle_baseline(pid: int) -> Sample:
    time.sleep(0.5)  # the probe's connection closes, the last answer's thread returns
    sample = read_sample(pid, time.monotonic())
    assert sample is not None, "the server exited"
    return sample


def paced_script(dir_: Path, delay_ms: int | None) -> Path:
    script = wrkkit.write_script(dir_ / f"soak-{delay_ms}.lua")
    if delay_ms:
        script.write_text(f"function delay() return {delay_ms} end\n" + script.read_text())
    return script


@dataclass(frozen=True)
class Phases:
    """Seconds of the measuring phases before the soak itself."""
    peak: int = 3
    trial: int = 3  # 0: no trial run to correct the paced rate


def http_workload(kind: str, minutes: float, fraction: float, every: float, tmp: Path,
                  phases: Phases, cpus: Placement) -> Outcome:
    app, interface = HTTP_APPS[kind]
    with cli_server(app, interface, cpu=cpus.server) as (proc, port):
        url = f"http://127.0.0.1:{port}/"
        peak = wrkkit.run(url, paced_script(tmp, None), connections=50, duration_s=phases.peak,
                          cpu=cpus.load).rps
        target = peak * fraction
        # Each connection waits `delay` between answer and next request, so the connections
        # set the rate. The delay keeps them near 150: at 10 ms a raw handler's rate took
        # ~900, and wrk's own cost for so many held it to 56% of the peak, not 70%.
        delay_ms = max(1, min(10, round(150 * 1000 / target)))
        connections = max(1, round(target * delay_ms / 1000))
        for _ in range(3 if phases.trial else 0):  # corrected until within 5% of the rate
            trial = wrkkit.run(url, paced_script(tmp, delay_ms), connections=connections,
                               duration_s=phases.trial, cpu=cpus.load)
            if trial.rps <= 0 or abs(trial.rps - target) <= 0.05 * target:
                break
            connections = max(1, round(connections * target / trial.rps))
        base = idle_baseline(proc.pid)
        with Sampler(proc.pid, every) as sampler:
            run = wrkkit.run(url, paced_script(tmp, delay_ms), connections=connections,
                             duration_s=minutes * 60, cpu=cpus.load,
                             timeout_s="10s")
        back = settle_back(proc.pid, base.fds, base.threads)
    samples = sampler.samples
    errors = {"non-2xx answers": run.non2xx, "socket errors": run.socket_errors}
    return judge(Outcome(
        kind, minutes, round(peak), round(target), round(run.rps), run.requests, errors,
        samples[0].rss_kib if samples else 0, samples[-1].rss_kib if samples else 0,
        rss_slope_mib_per_10min(samples, minutes * 60 * 0.2), base.fds, base.threads, back,
        samples=[asdict(s) for s in samples]))


def ws_client() -> Path:
    from benchkit import contenders as ck

    client = ck.Contender(name="ws-echo-client", label="", kind="hello",
                          file=BENCH / "ws" / "ws_echo_client.c", command=[])
    exe, _ = ck.build_mongoose_c(client)
    return exe


def run_ws_client(exe: Path, port: int, seconds: float, rate: float, cpu: int | None,
                  connections: int = 50) -> dict[str, float]:
    cmd = [str(exe), "--url", f"ws://127.0.0.1:{port}/ws", "--connections", str(connections),
           "--seconds", str(seconds), "--warmup", "0.5", "--rate", str(rate)]
    out = subprocess.run(pinned(cmd, cpu), capture_output=True, text=True, timeout=seconds + 60)
    if not out.stdout.strip():
        raise RuntimeError(f"ws client failed ({out.returncode}): {out.stderr[-300:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    result["connections"] = connections
    return result


def ws_workload(minutes: float, fraction: float, every: float, tmp: Path,
                phases: Phases, cpus: Placement) -> Outcome:
    exe = ws_client()
    with cli_server("hello_apps:asgi_ws_echo", "asgi", cpu=cpus.server) as (proc, port):
        peak = run_ws_client(exe, port, phases.peak, 0, cpus.load)["per_s"]
        target = peak * fraction
        if phases.trial:
            run_ws_client(exe, port, phases.trial, target, cpus.load)  # warm-up at the rate
        base = idle_baseline(proc.pid)
        with Sampler(proc.pid, every) as sampler:
            got = run_ws_client(exe, port, minutes * 60, target, cpus.load)
        back = settle_back(proc.pid, base.fds, base.threads)
    samples = sampler.samples
    errors = {"mismatched echoes": int(got["mismatches"]),
              "connections closed early": int(got["closed_early"]),
              "connections not opened": int(got["connections"] - got["opened"])}
    return judge(Outcome(
        "ws", minutes, round(peak), round(target), round(got["per_s"]), int(got["echoes"]),
        errors, samples[0].rss_kib if samples else 0, samples[-1].rss_kib if samples else 0,
        rss_slope_mib_per_10min(samples, minutes * 60 * 0.2), base.fds, base.threads, back,
        samples=[asdict(s) for s in samples]))


def mqtt_run(url: str, seconds: float, rate: float, every: float,
             cpu: int | None) -> tuple[dict[str, float], list[Sample]]:
    cmd = [sys.executable, str(HERE / "soak_mqtt.py"), "--url", url, "--seconds",
           str(seconds), "--rate", str(rate)]
    proc = subprocess.Popen(pinned(cmd, cpu), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    with Sampler(proc.pid, every) as sampler:
        out, err = proc.communicate(timeout=seconds + 60)
    if proc.returncode != 0 or not out.strip():
        raise RuntimeError(f"soak_mqtt.py failed ({proc.returncode}): {err[-500:]}")
    return json.loads(out.strip().splitlines()[-1]), sampler.samples


def mqtt_workload(minutes: float, fraction: float, every: float, tmp: Path,
                  phases: Phases, cpus: Placement) -> Outcome:
    from support.mosquitto import run_mosquitto

    # The broker is the load here: it inherits this process's CPUs, so `--cpu` pins this
    # whole process and the broker follows.
    with run_mosquitto() as broker:
        peak = mqtt_run(broker.url, phases.peak, 0, every, cpus.server)[0]["per_s"]
        target = peak * fraction
        got, samples = mqtt_run(broker.url, minutes * 60, target, every, cpus.server)
    errors = {"lost messages": int(got["lost"]), "mismatched messages": int(got["mismatched"]),
              "disconnects": int(got["disconnects"])}
    return judge(Outcome(
        "mqtt", minutes, round(peak), round(target), round(got["per_s"]), int(got["received"]),
        errors, int(got["rss_kib_start"]), int(got["rss_kib_end"]),
        rss_slope_mib_per_10min(samples, minutes * 60 * 0.2), int(got["fds_before"]),
        int(got["threads_before"]), got["back_to_baseline_s"],
        samples=[asdict(s) for s in samples]))


RUNNERS: dict[str, Callable[..., Outcome]] = {
    "raw": lambda *a: http_workload("raw", *a),
    "wsgi": lambda *a: http_workload("wsgi", *a),
    "asgi": lambda *a: http_workload("asgi", *a),
    "ws": ws_workload,
    "mqtt": mqtt_workload,
}


def soak(names: list[str], minutes: float, fraction: float = 0.7,
         phases: Phases = Phases(), cpus: Placement = Placement()) -> list[Outcome]:
    every = 10.0 if minutes >= 10 else max(0.2, minutes * 60 / 50)
    with tempfile.TemporaryDirectory(prefix="cym-soak-") as tmp:
        return [RUNNERS[name](minutes, fraction, every, Path(tmp), phases, cpus)
                for name in names]


def record(out: Path, outcomes: dict[str, object]) -> None:
    """Merge `outcomes` into the results file, under a lock: two soaks may finish together."""
    out.parent.mkdir(parents=True, exist_ok=True)
    folder = os.open(out.parent, os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        previous = json.loads(out.read_text()) if out.exists() else {}
        previous.update(outcomes)
        out.write_text(json.dumps(previous, indent=1) + "\n")
    finally:
        os.close(folder)  # and with it the lock


def table(path: Path = RESULTS) -> str:
    """The recorded soaks as docs/reliability.md's table."""
    rows = ["| Workload | Minutes | Peak /s | Held /s (of peak) | Done | Errors | RSS start, end "
            "(KiB) | RSS slope (MiB/10 min) | Back in (s) |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name, o in json.loads(path.read_text()).items():
        held = o["achieved_per_s"] / o["peak_per_s"] if o["peak_per_s"] else 0
        rows.append(f"| `{name}` | {o['minutes']:g} | {o['peak_per_s']:,} | "
                    f"{o['achieved_per_s']:,} ({held:.0%}) | {o['operations']:,} | "
                    f"{sum(o['errors'].values())} | {o['rss_kib_start']:,}, "
                    f"{o['rss_kib_end']:,} | {o['rss_slope_mib_per_10min']} | "
                    f"{o['back_to_baseline_s']} |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="per workload")
    parser.add_argument("--only", default="", help=f"comma-separated, of: {', '.join(WORKLOADS)}")
    parser.add_argument("--rate-fraction", type=float, default=0.7,
                        help="the fixed rate as a fraction of the measured peak")
    parser.add_argument("--cpu", type=int, default=None,
                        help="run the process under test and its load together on this CPU")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--table", action="store_true",
                        help="print the recorded figures as docs/reliability.md's table")
    args = parser.parse_args()
    if args.table:
        print(table(args.out))
        return 0
    names = [n for n in args.only.split(",") if n] or list(WORKLOADS)
    unknown = sorted(set(names) - set(WORKLOADS))
    if unknown:
        parser.error(f"--only: unknown workload {', '.join(unknown)}; one of "
                     f"{', '.join(WORKLOADS)}")
    if not 0 < args.rate_fraction <= 1:
        parser.error("--rate-fraction: a fraction of the peak, above 0 and at most 1")
    cpus = Placement()
    if args.cpu is not None:
        if args.cpu not in os.sched_getaffinity(0):
            parser.error(f"--cpu: a CPU this process may use, one of "
                         f"{sorted(os.sched_getaffinity(0))}")
        os.sched_setaffinity(0, {args.cpu})
        cpus = Placement(args.cpu, args.cpu)
    outcomes = []
    for name in names:
        outcome = soak([name], args.minutes, args.rate_fraction, cpus=cpus)[0]
        outcomes.append(outcome)
        record(args.out, {name: asdict(outcome)})  # each as it ends: a run may take hours
        print(f"{name}: {outcome.achieved_per_s}/s (peak {outcome.peak_per_s}/s) for "
              f"{args.minutes} min, {outcome.operations} done, RSS "
              f"{outcome.rss_kib_start}->{outcome.rss_kib_end} KiB (slope "
              f"{outcome.rss_slope_mib_per_10min} MiB/10 min), back in "
              f"{outcome.back_to_baseline_s} s: "
              f"{'FAILED ' + '; '.join(outcome.failures) if outcome.failures else 'ok'}",
              flush=True)
    return 1 if any(o.failures for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
