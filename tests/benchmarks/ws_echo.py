"""WebSocket echo benchmark: the raw ASGI echo app of servers/hello_apps.py on our
ASGIServer, on uvicorn (websockets protocol, uvloop) and on granian (ASGI), loaded by a C
client on Mongoose (ws/ws_echo_client.c: N connections, each sending a 32-byte text message
and waiting for its echo), server pinned to CPU 0, client to CPU 1.

    python tests/benchmarks/ws_echo.py [--connections 50] [--seconds 5] [--rounds 3]

Prints a table and writes results/ws_echo.json (``make bench-ws``).

With ``--deflate`` the messages are 16 KiB JSON documents (``--size``) sent compressed with
permessage-deflate, as the servers' defaults agree to (ours and uvicorn's with websockets);
granian is left out and the results go to results/ws_deflate_echo.json:

    python tests/benchmarks/ws_echo.py --deflate [--connections 50] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import time
from pathlib import Path
from statistics import median
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import contenders as ck  # noqa: E402
from benchkit import procstat  # noqa: E402

log = logging.getLogger("ws-echo")
BENCH_DIR = ck.BENCH_DIR
SERVERS = BENCH_DIR / "servers"

CONTENDERS = [
    ck.Contender(
        name="cymongoose-asgi-ws", label="cymongoose ASGI", kind="hello",
        file=SERVERS / "cymongoose_asgi.py", env="project",
        packages=["cymongoose", "uvloop"],
        command=["{python}", "{file}", "--port", "{port}", "--app", "asgi_ws_echo"]),
    ck.Contender(
        name="uvicorn-ws", label="uvicorn (websockets)", kind="hello",
        file=SERVERS / "uvicorn_raw.py", env="uvicorn-ws",
        requires=["uvicorn", "uvloop", "httptools", "websockets"],
        packages=["uvicorn", "websockets", "uvloop"],
        command=["{python}", "-m", "uvicorn", "--host", "127.0.0.1", "--port", "{port}",
                 "--loop", "uvloop", "--http", "httptools", "--ws", "websockets",
                 "--lifespan", "off", "--no-access-log", "--log-level", "warning",
                 "hello_apps:asgi_ws_echo"]),
    ck.Contender(
        name="granian-asgi-ws", label="granian ASGI", kind="hello",
        file=SERVERS / "granian_apps.py", env="granian", requires=["granian"],
        packages=["granian"],
        command=["{python}", "-m", "granian", "--interface", "asgi", "--workers", "1",
                 "--host", "127.0.0.1", "--port", "{port}", "--log-level", "warning",
                 "hello_apps:asgi_ws_echo"]),
]


def build_client() -> Path:
    client = ck.Contender(name="ws-echo-client", label="", kind="hello",
                          file=BENCH_DIR / "ws" / "ws_echo_client.c", command=[])
    exe, _ = ck.build_mongoose_c(client)
    return exe


def run_client(exe: Path, port: int, args: argparse.Namespace, seconds: float,
               cpu: int) -> dict[str, Any]:
    cmd = ["taskset", "-c", str(cpu), str(exe), "--url", f"ws://127.0.0.1:{port}/ws",
           "--connections", str(args.connections), "--seconds", str(seconds),
           "--warmup", str(args.warmup), "--size", str(args.size),
           "--deflate", "1" if args.deflate else "0"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60)
    if not out.stdout.strip():
        raise RuntimeError(f"client failed ({out.returncode}): {out.stderr.strip()[-500:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    result["ok"] = out.returncode == 0
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--connections", type=int, default=50)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--size", type=int, default=None,
                   help="message bytes (32; 16384 with --deflate)")
    p.add_argument("--deflate", action="store_true",
                   help="JSON messages compressed with permessage-deflate both ways")
    p.add_argument("--only", default="", help="comma-separated contender names")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    if args.size is None:
        args.size = 16384 if args.deflate else 32
    if args.out is None:
        args.out = BENCH_DIR / "results" / ("ws_deflate_echo.json" if args.deflate
                                            else "ws_echo.json")
    if args.deflate and not args.only:
        args.only = "cymongoose-asgi-ws,uvicorn-ws"  # granian: no permessage-deflate
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s",
                        datefmt="%H:%M:%S")
    exe = build_client()
    project_python = str(ck.ROOT / ".venv" / "bin" / "python")
    base_python = getattr(sys, "_base_executable", sys.executable)
    run_dir = BENCH_DIR / ".cache" / "ws-runs"
    chosen = [c for c in CONTENDERS if not args.only or c.name in args.only.split(",")]
    ready = []
    for c in chosen:
        try:
            ck.prepare(c, project_python, base_python)
            ready.append(c)
        except ck.Skip as exc:
            log.warning("%s skipped: %s", c.name, exc)
    results: dict[str, list[dict[str, Any]]] = {c.name: [] for c in ready}
    for rnd in range(1, args.rounds + 1):
        for c in ready:
            running = ck.start(c, cpu=0, static_dir=run_dir, run_dir=run_dir)
            try:
                time.sleep(0.3)
                before = procstat.sample(running.pid)
                res = run_client(exe, running.port, args, args.seconds, cpu=1)
                after = procstat.sample(running.pid)
                cpu = procstat.cpu_between(before, after)  # includes the warm-up second
                res["server_cpu_us_per_echo"] = round(
                    cpu / max(res["echoes"], 1) * 1e6 * args.seconds
                    / (args.seconds + args.warmup), 2)
                res["rss_mib"] = round(after.rss / 2**20, 1)
                results[c.name].append(res)
                log.info("%-20s r%d %9.0f echoes/s  p99 %3d ms  cpu %.1f us/echo  %s", c.name,
                         rnd, res["per_s"], res["p99_ms"], res["server_cpu_us_per_echo"],
                         "ok" if res["ok"] else "CLIENT REPORTED ERRORS")
            finally:
                running.stop()
    table = []
    for c in ready:
        rows = [r for r in results[c.name] if r["ok"]]
        if not rows:
            continue
        table.append({"name": c.name, "label": c.label, "versions": c.versions,
                      "echoes_per_s": median(r["per_s"] for r in rows),
                      "p99_ms": median(r["p99_ms"] for r in rows),
                      "server_cpu_us_per_echo": median(r["server_cpu_us_per_echo"]
                                                      for r in rows),
                      "runs": results[c.name]})
    ours = next((t for t in table if t["name"] == "cymongoose-asgi-ws"), None)
    kind = "JSON, permessage-deflate" if args.deflate else "text"
    print(f"\nWebSocket echo, {args.connections} connections, {args.size}-byte {kind}, "
          f"{args.rounds} rounds of {args.seconds:g} s (medians)")
    print(f"{'server':24} {'echoes/s':>10} {'ours ÷':>7} {'p99 ms':>7} {'CPU µs/echo':>12}")
    for t in table:
        ratio = (ours["echoes_per_s"] / t["echoes_per_s"]) if ours and t["echoes_per_s"] else 0
        print(f"{t['label']:24} {t['echoes_per_s']:10.0f} {ratio:6.2f}× {t['p99_ms']:7.0f} "
              f"{t['server_cpu_us_per_echo']:12.1f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"connections": args.connections, "size": args.size,
                                    "deflate": args.deflate,
                                    "seconds": args.seconds, "rounds": args.rounds,
                                    "contenders": table}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
