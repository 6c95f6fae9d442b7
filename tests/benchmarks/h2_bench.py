"""HTTP/2 benchmark (`make bench-http2`): h2load against our raw handler, WSGI and ASGI servers
and their HTTP/2 peers on the same hello apps, h2c with prior knowledge.

Contenders (each pinned to --server-cpu, h2load to --client-cpu, one process each):
ours (demo_server.py, servers/cymongoose_wsgi.py, servers/cymongoose_asgi.py); granian WSGI and
ASGI with `--http 2` (8 blocking threads for WSGI, as ours); hypercorn (ASGI); uvicorn 0.54
(ASGI, `--http zttp --http2`); nginx 1.22 with `listen ... http2` and `return 200` (prior
knowledge only: that nginx speaks no HTTP/1.1 on such a port). Loads: `h2load -c C -m 1` (one
stream per connection at a time) and `-m 10`, each for --duration seconds, in interleaved
rounds; ours also over HTTP/1.1 (`h2load --h1`) for the h2 / h1 ratio. Per run: req/s, the
server's CPU per request (/proc, its session), failed requests. Then one large body each way
over one stream (h2_transfer.py). The medians and the ratios the issue asks for go to
results/http2/ (http2.json, http2.md).

With --tls every contender serves HTTPS with one P-256 certificate (h2 chosen by ALPN; ours'
HTTP/1.1 runs by ALPN too; ours raw is servers/cymongoose_https.py), and the results go to
http2-tls.json and http2-tls.md.

    python tests/benchmarks/h2_bench.py [--duration 5] [--rounds 3] [--only a,b] [--tls]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import h2_transfer  # noqa: E402
from benchkit import contenders as ck  # noqa: E402
from benchkit import procstat  # noqa: E402
from benchkit.serverproc import (  # noqa: E402
    ServerProcess,
    add_cpu_options,
    machine,
    settle_options,
)
from tls_bench import make_cert  # noqa: E402

BENCH = ck.BENCH_DIR
SERVERS = BENCH / "servers"
HELLO = b'{"message":"Hello, World!"}'

# name -> (environment: "project" or a .envs/ name with its requirements, command). {python}
# is that environment's interpreter; commands run in servers/ (hello_apps is importable).
CONTENDERS: dict[str, tuple[str, list[str], list[str]]] = {
    "cymongoose-raw": ("project", [], ["{python}", str(BENCH / "demo_server.py"), "--port",
                                       "{port}", "--log-level", "WARNING"]),
    "cymongoose-wsgi": ("project", [], ["{python}", "cymongoose_wsgi.py", "--port", "{port}",
                                        "--app", "wsgi_hello"]),
    "cymongoose-asgi": ("project", [], ["{python}", "cymongoose_asgi.py", "--port", "{port}",
                                        "--app", "asgi_hello"]),
    "granian-wsgi": ("granian", ["granian"], [
        "{python}", "-m", "granian", "--interface", "wsgi", "--http", "2", "--workers", "1",
        "--blocking-threads", "8", "--host", "127.0.0.1", "--port", "{port}", "--no-ws",
        "--log-level", "warning", "hello_apps:wsgi_hello"]),
    "granian-asgi": ("granian", ["granian"], [
        "{python}", "-m", "granian", "--interface", "asgi", "--http", "2", "--workers", "1",
        "--host", "127.0.0.1", "--port", "{port}", "--no-ws", "--log-level", "warning",
        "hello_apps:asgi_hello"]),
    "hypercorn-asgi": ("project", [], ["{python}", "-m", "hypercorn", "--bind",
                                       "127.0.0.1:{port}", "--log-level", "warning",
                                       "hello_apps:asgi_hello"]),
    "uvicorn-asgi": ("uvicorn54", ["uvicorn==0.54.0", "zttp"], [
        "{python}", "-m", "uvicorn", "--http", "zttp", "--http2", "--host", "127.0.0.1",
        "--port", "{port}", "--log-level", "warning", "hello_apps:asgi_hello"]),
    "nginx": ("system", [], ["nginx", "-p", "{workdir}", "-c", "{workdir}/nginx.conf", "-e",
                             "stderr"]),
}
# --tls: each contender over TLS with the same certificate (h2 chosen by ALPN), its own
# options added; ours raw is servers/cymongoose_https.py (the same hello, @handles).
TLS_OPTIONS: dict[str, list[str]] = {
    "cymongoose-wsgi": ["--cert", "{cert}", "--key", "{key}"],
    "cymongoose-asgi": ["--cert", "{cert}", "--key", "{key}"],
    "granian-wsgi": ["--ssl-certificate", "{cert}", "--ssl-keyfile", "{key}"],
    "granian-asgi": ["--ssl-certificate", "{cert}", "--ssl-keyfile", "{key}"],
    "hypercorn-asgi": ["--certfile", "{cert}", "--keyfile", "{key}"],
    "uvicorn-asgi": ["--ssl-certfile", "{cert}", "--ssl-keyfile", "{key}"],
}
RAW_TLS = ["{python}", str(BENCH / "servers" / "cymongoose_https.py"), "--port", "{port}",
           "--cert", "{cert}", "--key", "{key}"]
# The ratios the goals name: (ours, theirs, goal).
GOALS = [("cymongoose-raw", "nginx", 0.9), ("cymongoose-wsgi", "granian-wsgi", 1.5),
         ("cymongoose-asgi", "granian-asgi", 1.5), ("cymongoose-asgi", "hypercorn-asgi", 2.0)]

NGINX_CONF = """daemon off;
worker_processes 1;
pid {workdir}/nginx.pid;
error_log stderr error;
events { worker_connections 4096; use epoll; }
http {
    access_log off;
    keepalive_requests 100000000;
    http2_max_requests 100000000;
    client_body_temp_path {workdir}/client_body;
    proxy_temp_path {workdir}/proxy;
    fastcgi_temp_path {workdir}/fastcgi;
    uwsgi_temp_path {workdir}/uwsgi;
    scgi_temp_path {workdir}/scgi;
    server {
        listen 127.0.0.1:{port} {listen};
        {tls}
        location / {
            default_type application/json;
            return 200 '{"message":"Hello, World!"}';
        }
    }
}
"""


class Server(ServerProcess):
    def __init__(self, name: str, args: argparse.Namespace, run_dir: Path) -> None:
        env_kind, requires, argv = CONTENDERS[name]
        self.tls = args.tls
        if args.tls:
            argv = RAW_TLS if name == "cymongoose-raw" else argv + TLS_OPTIONS.get(name, [])
        self.name, self.port = name, ck.free_port()
        python = str(BENCH.parent.parent / ".venv" / "bin" / "python")
        if env_kind not in ("project", "system"):
            python = ck.ensure_env(ck.Contender(name=name, label=name, kind="hello",
                                                file=SERVERS, command=argv, env=env_kind,
                                                requires=requires), sys.executable)
        workdir = run_dir / name
        shutil.rmtree(workdir, ignore_errors=True)
        workdir.mkdir(parents=True)
        if name == "nginx":
            tls = (f"ssl_certificate {args.cert};\n        ssl_certificate_key {args.key};"
                   if args.tls else "")
            conf = (NGINX_CONF.replace("{workdir}", str(workdir))
                    .replace("{port}", str(self.port))
                    .replace("{listen}", "ssl http2" if args.tls else "http2")
                    .replace("{tls}", tls))
            (workdir / "nginx.conf").write_text(conf)
        argv = [a.replace("{python}", python).replace("{port}", str(self.port))
                .replace("{workdir}", str(workdir)).replace("{cert}", str(args.cert))
                .replace("{key}", str(args.key)) for a in argv]
        super().__init__(argv, args.server_cpu, run_dir / f"{name}.log", cwd=SERVERS,
                         env=dict(os.environ, PYTHONPATH=str(SERVERS)))

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            probe = (["-k", "--http2", f"https://127.0.0.1:{self.port}/"] if self.tls else
                     ["--http2-prior-knowledge", f"http://127.0.0.1:{self.port}/"])
            r = subprocess.run(["curl", "-s", "-m", "2", *probe], capture_output=True)
            if r.returncode == 0:
                if r.stdout != HELLO:
                    raise RuntimeError(f"{self.name} answered {r.stdout[:80]!r}")
                return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not come up (see its log)")
            time.sleep(0.2)


def h2load(port: int, streams: int, args: argparse.Namespace, h1: bool,
           warm_up: bool = False) -> dict[str, Any]:
    """One run; `warm_up`: a short one, not measured."""
    load = ["-n", str(200 * args.connections)] if warm_up else ["-D", str(args.duration)]
    cmd = ["h2load", "-c", str(args.connections), "-m", str(streams), *load,
           *(["--h1"] if h1 else []),
           f"{'https' if args.tls else 'http'}://127.0.0.1:{port}/"]
    if args.client_cpu is not None:
        cmd = ["taskset", "-c", str(args.client_cpu), *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.duration + 60)
    text = out.stdout
    rps = re.search(r"finished in [^,]+, ([\d.]+) req/s", text)
    done = re.search(r"requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, "
                     r"(\d+) failed, (\d+) errored", text)
    if out.returncode != 0 or rps is None or done is None:
        raise RuntimeError(f"h2load failed ({out.returncode}): {text[-400:]} {out.stderr[-300:]}")
    return {"rps": float(rps.group(1)), "requests": int(done.group(3)),
            "failed": int(done.group(4)) + int(done.group(5))}


def measure(server: Server, streams: int, args: argparse.Namespace, h1: bool) -> dict[str, Any]:
    h2load(server.port, streams, args, h1, warm_up=True)
    procstat.wait_cpu_quiet(args.server_cpu)
    before = procstat.sample(server.proc.pid)
    res = h2load(server.port, streams, args, h1)
    after = procstat.sample(server.proc.pid)
    cpu = procstat.cpu_between(before, after)
    res.update(server=server.name, streams=streams, protocol="h1" if h1 else "h2",
               cpu_us_per_req=round(cpu / res["requests"] * 1e6, 2) if res["requests"] else None)
    return res


def median_of(runs: list[dict[str, Any]], name: str, streams: int, protocol: str,
              key: str) -> float | None:
    values = [r[key] for r in runs if r["server"] == name and r["streams"] == streams
              and r["protocol"] == protocol and r[key] is not None]
    return statistics.median(values) if values else None


def report(data: dict[str, Any], out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    runs, settings = data["runs"], data["settings"]
    stem = "http2-tls" if settings.get("tls") else "http2"
    (out_dir / f"{stem}.json").write_text(json.dumps(data, indent=2) + "\n")
    rows = ["| server | protocol | streams/conn | req/s (median) | CPU us/req | failed |",
            "|---|---|---:|---:|---:|---:|"]
    keys = sorted({(r["server"], r["protocol"], r["streams"]) for r in runs},
                  key=lambda k: (list(CONTENDERS).index(k[0]), k[1], k[2]))
    for name, protocol, streams in keys:
        rps = median_of(runs, name, streams, protocol, "rps")
        cpu = median_of(runs, name, streams, protocol, "cpu_us_per_req")
        failed = sum(r["failed"] for r in runs if (r["server"], r["protocol"], r["streams"])
                     == (name, protocol, streams))
        rows.append(f"| {name} | {protocol} | {streams} | {rps:,.0f} | {cpu:.1f} | {failed} |")
    ratios = ["| ours / theirs | streams/conn | req/s ratio | goal |", "|---|---:|---:|---:|"]
    for ours, theirs, goal in GOALS:
        for streams in settings["streams"]:
            a = median_of(runs, ours, streams, "h2", "rps")
            b = median_of(runs, theirs, streams, "h2", "rps")
            if a and b:
                ratios.append(f"| {ours} / {theirs} | {streams} | {a / b:.2f} | {goal} |")
    for ours in ("cymongoose-raw", "cymongoose-wsgi", "cymongoose-asgi"):
        h1 = median_of(runs, ours, 1, "h1", "rps")
        for streams, goal in ((1, 0.8), (10, 1.0)):
            h2 = median_of(runs, ours, streams, "h2", "rps")
            if h1 and h2:
                ratios.append(f"| {ours} h2 / its h1 (1 stream) | {streams} | {h2 / h1:.2f} | "
                              f"{goal} |")
    ctx = data["context"]
    text = "\n".join([
        "# HTTP/2 ({}): cymongoose against its peers".format(
            "TLS, ALPN h2" if settings.get("tls") else "h2c"), "",
        f"{ctx['date']}; {ctx['cpu']}; {ctx['h2load']}; {ctx['nginx']}.", "",
        f"h2load -c{settings['connections']} -D{settings['duration_s']} (after an unmeasured "
        f"warm-up run), {settings['rounds']} interleaved rounds, server on CPU "
        f"{settings['server_cpu']}, h2load on CPU {settings['client_cpu']}; the hello apps of "
        "servers/hello_apps.py; CPU per request from /proc over the measured run.", "",
        *rows, "", *ratios, "",
        *(h2_transfer.report_lines(data["transfer"]) + [""] if data.get("transfer") else [])])
    path = out_dir / f"{stem}.md"
    path.write_text(text)
    return path


def context() -> dict[str, Any]:
    def out(cmd: list[str]) -> str:
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        except OSError:
            return "absent"
        return (r.stdout + r.stderr).strip().splitlines()[0] if (r.stdout + r.stderr) else ""

    return {**machine(), "h2load": out(["h2load", "--version"]),
            "nginx": out(["nginx", "-v"])}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=int, default=5, help="seconds per h2load run")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--connections", type=int, default=10)
    p.add_argument("--streams", default="1,10", help="streams per connection at once")
    p.add_argument("--only", default="", help=f"from {', '.join(CONTENDERS)}")
    p.add_argument("--tls", action="store_true",
                   help="every contender over TLS (h2 by ALPN; HTTP/1.1 for ours' h1 runs); "
                   "writes http2-tls.{json,md}; no transfer phase")
    p.add_argument("--transfer-mib", type=int, default=64,
                   help="the transfer phase's body size (0: no transfer phase)")
    p.add_argument("--transfer-repeats", type=int, default=3, help="transfers a round")
    add_cpu_options(p)
    p.add_argument("--out", type=Path, default=BENCH / "results" / "http2")
    args = p.parse_args(argv)
    settle_options(args, "h2_bench", ("h2load", "curl", "nginx") + (("openssl",) if args.tls
                                                                    else ()))
    names = [n for n in (args.only.split(",") if args.only else CONTENDERS) if n]
    streams = [int(s) for s in args.streams.split(",") if s]
    run_dir = ck.CACHE_DIR / "http2"
    run_dir.mkdir(parents=True, exist_ok=True)
    args.cert, args.key = (make_cert("p256", run_dir / "certs") if args.tls else ("", ""))
    data: dict[str, Any] = {"context": context(), "runs": [], "settings": {
        "duration_s": args.duration, "rounds": args.rounds, "connections": args.connections,
        "streams": streams, "server_cpu": args.server_cpu, "client_cpu": args.client_cpu,
        "tls": args.tls}}
    servers: list[Server] = []
    try:
        for name in names:
            server = Server(name, args, run_dir)
            servers.append(server)
            server.wait_ready()
        for rnd in range(1, args.rounds + 1):
            for s in servers:
                loads = [(m, False) for m in streams]
                if s.name.startswith("cymongoose"):
                    loads.append((1, True))
                for m, h1 in loads:
                    run = measure(s, m, args, h1)
                    run["round"] = rnd
                    data["runs"].append(run)
                    print(f"r{rnd} {s.name:16} {run['protocol']} m={m:<3} {run['rps']:10,.0f} "
                          f"req/s  cpu {run['cpu_us_per_req']} us/req  failed {run['failed']}",
                          flush=True)
    finally:
        for s in servers:
            s.stop()
    if args.transfer_mib > 0 and not args.tls:
        data["transfer"] = h2_transfer.run(args, run_dir,
                                           str(BENCH.parent.parent / ".venv" / "bin" / "python"),
                                           SERVERS)
    print(f"wrote {report(data, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
