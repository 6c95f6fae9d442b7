"""TLS benchmark (`make bench-tls`): cymongoose against nginx, same certificate, same hello.

For each certificate kind (RSA-2048 and ECDSA P-256 by default; made here with `openssl req`,
never committed) both servers are started pinned to one CPU, their answer is checked over TLS,
then wrk (pinned to the other CPU) measures, in interleaved rounds:

  handshakes  `wrk -H "Connection: close"`: every request on a new connection with its own
              TLS handshake, i.e. handshakes per second. wrk resumes sessions where it can;
              both servers offer session tickets (nginx's and OpenSSL's default), so some
              handshakes are resumptions on both sides;
  hello       keep-alive HTTPS requests per second over -c connections.

Per run: req/s, p50/p99, socket errors and the server's CPU per request. Results, with the
versions of OpenSSL, nginx, wrk, cymongoose and its TLS engine, go to results/tls/ (or
--out) as tls.json and tls.md.

    python tests/benchmarks/tls_bench.py [--duration 5] [--rounds 2] [--kinds rsa2048,p256]
"""

from __future__ import annotations

import argparse
import json
import shutil
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import contenders as ck  # noqa: E402
from benchkit import procstat  # noqa: E402
from benchkit import wrk as wrkmod  # noqa: E402
from benchkit.serverproc import (  # noqa: E402
    ServerProcess,
    add_cpu_options,
    machine,
    settle_options,
)

BENCH = ck.BENCH_DIR
HELLO = b'{"message":"Hello, World!"}'
KEYGEN = {"rsa2048": ["-newkey", "rsa:2048"], "rsa4096": ["-newkey", "rsa:4096"],
          "p256": ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]}


def make_cert(kind: str, directory: Path) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / f"{kind}.crt", directory / f"{kind}.key"
    subprocess.run(["openssl", "req", "-x509", *KEYGEN[kind], "-nodes", "-days", "2",
                    "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


class Server(ServerProcess):
    def __init__(self, name: str, argv: list[str], port: int, cpu: int | None,
                 log: Path) -> None:
        self.name, self.port = name, port
        super().__init__(argv, cpu, log)

    def wait_ready(self, cafile: Path, timeout: float = 30.0) -> None:
        ctx = ssl.create_default_context(cafile=str(cafile))
        deadline = time.monotonic() + timeout
        while True:
            try:
                body = urllib.request.urlopen(f"https://localhost:{self.port}/", context=ctx,
                                              timeout=2).read()
                if body != HELLO:
                    raise RuntimeError(f"{self.name} answered {body[:80]!r}")
                return
            except (OSError, ssl.SSLError) as exc:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{self.name} did not come up: {exc}") from exc
                time.sleep(0.1)


def start_servers(kind: str, cert: Path, key: Path, cpu: int | None,
                  run_dir: Path) -> list[Server]:
    project_python = BENCH.parent.parent / ".venv" / "bin" / "python"
    python = str(project_python) if project_python.exists() else sys.executable
    ours_port, nginx_port = ck.free_port(), ck.free_port()
    work = run_dir / f"nginx-{kind}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    conf = (BENCH / "servers" / "nginx_https.conf").read_text()
    for name, value in (("port", str(nginx_port)), ("workdir", str(work)),
                        ("cert", str(cert)), ("key", str(key))):
        conf = conf.replace("{" + name + "}", value)
    (work / "nginx.conf").write_text(conf)
    return [
        Server("cymongoose", [python, str(BENCH / "servers" / "cymongoose_https.py"),
                              "--port", str(ours_port), "--cert", str(cert), "--key", str(key)],
               ours_port, cpu, run_dir / f"cymongoose-{kind}.log"),
        Server("nginx", ["nginx", "-p", str(work), "-c", str(work / "nginx.conf"),
                         "-e", "stderr"], nginx_port, cpu, run_dir / f"nginx-{kind}.log"),
    ]


def measure(server: Server, mode: str, script: Path, args: argparse.Namespace) -> dict[str, Any]:
    before = procstat.sample(server.proc.pid)
    extra = ["-H", "Connection: close"] if mode == "handshakes" else []
    res = run_wrk(f"https://127.0.0.1:{server.port}/", script, args, extra)
    after = procstat.sample(server.proc.pid)
    cpu = procstat.cpu_between(before, after)
    return {"server": server.name, "mode": mode, "rps": round(res.rps, 1),
            "requests": res.requests, "p50_us": res.p50_us, "p99_us": res.p99_us,
            "socket_errors": res.socket_errors, "non2xx": res.non2xx,
            "server_cpu_us_per_req": round(cpu / res.requests * 1e6, 1) if res.requests else None}


def run_wrk(url: str, script: Path, args: argparse.Namespace,
            extra: list[str]) -> wrkmod.WrkResult:
    # benchkit.wrk.run() has no option for extra headers: same command, same report line.
    cmd = ["wrk", "-t1", f"-c{args.connections}", f"-d{args.duration}s", "--timeout=5s",
           "--latency", *extra, "-s", str(script), url]
    if args.client_cpu is not None:
        cmd = ["taskset", "-c", str(args.client_cpu), *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.duration + 60)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("BENCH_JSON ")), None)
    if out.returncode != 0 or line is None:
        raise wrkmod.WrkError(f"wrk failed ({out.returncode}): {out.stdout[-300:]}")
    data = json.loads(line.removeprefix("BENCH_JSON "))
    return wrkmod.WrkResult(
        requests=data["requests"], duration_s=data["duration_us"] / 1e6, bytes=data["bytes"],
        errors={k: data[k] for k in ("connect", "read", "write", "timeout", "status")},
        p50_us=data["p50_us"], p90_us=data["p90_us"], p99_us=data["p99_us"],
        mean_us=data["mean_us"], max_us=data["max_us"], client_cpu_s=0.0, raw=out.stdout)


def context() -> dict[str, Any]:
    def out(cmd: list[str]) -> str:
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        except OSError:
            return "absent"
        return (r.stdout + r.stderr).strip()

    project_python = BENCH.parent.parent / ".venv" / "bin" / "python"
    py = str(project_python) if project_python.exists() else sys.executable
    return {
        **machine(),
        "openssl": out(["openssl", "version"]), "nginx": out(["nginx", "-v"]),
        "wrk": wrkmod.version(),
        "cymongoose": out([py, "-c", "import cymongoose, sys; print(cymongoose.__version__, "
                           "'TLS engine', cymongoose.TLS_ENGINE, 'Python', "
                           "sys.version.split()[0])"]),
    }


def write_report(data: dict[str, Any], out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "tls.json").write_text(json.dumps(data, indent=2) + "\n")
    rows = ["| certificate | mode | server | req/s (median) | p99 ms | CPU us/req | errors |",
            "|---|---|---|---:|---:|---:|---:|"]
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in data["runs"]:
        groups.setdefault((r["cert"], r["mode"], r["server"]), []).append(r)
    for (cert, mode, server), runs in groups.items():
        rps = sorted(r["rps"] for r in runs)[len(runs) // 2]
        p99 = max(r["p99_us"] for r in runs) / 1000
        cpu = sorted(r["server_cpu_us_per_req"] or 0 for r in runs)[len(runs) // 2]
        errors = sum(r["socket_errors"] + r["non2xx"] for r in runs)
        rows.append(f"| {cert} | {mode} | {server} | {rps:,.0f} | {p99:.2f} | {cpu:.0f} | "
                    f"{errors} |")
    ctx = data["context"]
    text = "\n".join([
        "# TLS: cymongoose vs nginx, same certificate", "",
        f"{ctx['date']}; {ctx['cpu']}; {ctx['openssl']}; {ctx['nginx']}; {ctx['wrk']}; "
        f"cymongoose {ctx['cymongoose']}.", "",
        f"wrk -t1 -c{data['settings']['connections']} -d{data['settings']['duration_s']}s, "
        f"{data['settings']['rounds']} interleaved rounds; server and wrk on separate CPUs. "
        "handshakes: `Connection: close`, one TLS handshake per request (wrk resumes sessions "
        "by ticket where it can, on both servers).", "", *rows, ""])
    path = out_dir / "tls.md"
    path.write_text(text)
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=int, default=5, help="seconds per wrk run")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--connections", type=int, default=50)
    p.add_argument("--kinds", default="rsa2048,p256", help=f"from {', '.join(KEYGEN)}")
    p.add_argument("--modes", default="handshakes,hello")
    add_cpu_options(p)
    p.add_argument("--out", type=Path, default=BENCH / "results" / "tls")
    args = p.parse_args(argv)
    settle_options(args, "tls_bench", ("wrk", "nginx", "openssl"))
    run_dir = ck.CACHE_DIR / "tls"
    run_dir.mkdir(parents=True, exist_ok=True)
    script = wrkmod.write_script(run_dir / "report.lua")
    data: dict[str, Any] = {"context": context(), "runs": [], "settings": {
        "duration_s": args.duration, "rounds": args.rounds, "connections": args.connections,
        "server_cpu": args.server_cpu, "client_cpu": args.client_cpu}}
    for kind in [k for k in args.kinds.split(",") if k]:
        cert, key = make_cert(kind, run_dir / "certs")
        servers = start_servers(kind, cert, key, args.server_cpu, run_dir)
        try:
            for s in servers:
                s.wait_ready(cert)
            for rnd in range(1, args.rounds + 1):
                for mode in [m for m in args.modes.split(",") if m]:
                    for s in servers:
                        run = measure(s, mode, script, args)
                        run.update(cert=kind, round=rnd)
                        data["runs"].append(run)
                        print(f"{kind:8} {mode:10} {s.name:10} r{rnd} {run['rps']:10,.0f} "
                              f"req/s  p99 {run['p99_us'] / 1000:7.2f} ms  cpu "
                              f"{run['server_cpu_us_per_req']} us/req  errors "
                              f"{run['socket_errors'] + run['non2xx']}", flush=True)
            for s in servers:  # still answering right after the load
                s.wait_ready(cert, timeout=5)
        finally:
            for s in servers:
                s.stop()
    print(f"wrote {write_report(data, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
