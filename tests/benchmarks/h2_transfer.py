"""The transfer phase of `make bench-http2`: one large body over one stream, HTTP/2 (h2c)
against HTTP/1.1 on the same server (servers/cymongoose_transfer.py), with curl.

Three transfers of --transfer-mib MiB: a file download (sendfile(2) over HTTP/1.1; DATA frames
through the send buffer over HTTP/2), the same bytes from memory (reply()) and an upload.
Each is timed by curl (time_total), HTTP/1.1 and h2c alternating, --transfer-repeats times a
round; medians over all rounds. The ratio is HTTP/1.1's time over HTTP/2's: 1.0 is as fast.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from benchkit import contenders as ck
from benchkit.serverproc import ServerProcess

KINDS = ("file", "memory", "upload")
PROTOCOLS = {"h1": "--http1.1", "h2": "--http2-prior-knowledge"}


def _curl(kind: str, protocol: str, url: str, path: Path, args: argparse.Namespace) -> float:
    cmd = ["curl", "-sS", PROTOCOLS[protocol], "-o", "/dev/null", "-w", "%{time_total}"]
    if kind == "upload":
        cmd += ["-H", "Expect:", "--data-binary", f"@{path}", f"{url}/upload"]
    else:
        cmd.append(f"{url}/{kind}")
    if args.client_cpu is not None:
        cmd = ["taskset", "-c", str(args.client_cpu), *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)
    return float(out.stdout)


def run(args: argparse.Namespace, run_dir: Path, python: str, servers_dir: Path) -> dict[str, Any]:
    size = args.transfer_mib << 20
    path = run_dir / f"transfer-{args.transfer_mib}m.bin"
    if not path.exists() or path.stat().st_size != size:
        with path.open("wb") as f:
            for _ in range(args.transfer_mib):
                f.write(bytes(range(256)) * 4096)
    port = ck.free_port()
    server = ServerProcess([python, str(servers_dir / "cymongoose_transfer.py"), "--port",
                            str(port), "--file", str(path)], args.server_cpu,
                           run_dir / "transfer.log")
    url = f"http://127.0.0.1:{port}"
    times: dict[str, dict[str, list[float]]] = {k: {"h1": [], "h2": []} for k in KINDS}
    try:
        deadline = time.monotonic() + 60
        while subprocess.run(["curl", "-s", "-o", "/dev/null", f"{url}/memory"]).returncode:
            if server.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the transfer server did not come up")
            time.sleep(0.2)
        for _ in range(args.rounds):
            for kind in KINDS:
                for _ in range(args.transfer_repeats):
                    for protocol in ("h1", "h2"):
                        times[kind][protocol].append(_curl(kind, protocol, url, path, args))
    finally:
        server.stop()
    result: dict[str, Any] = {"mib": args.transfer_mib, "times_s": times, "medians": {}}
    for kind in KINDS:
        h1 = statistics.median(times[kind]["h1"])
        h2 = statistics.median(times[kind]["h2"])
        result["medians"][kind] = {"h1_s": round(h1, 4), "h2_s": round(h2, 4),
                                   "h1_over_h2": round(h1 / h2, 2)}
        print(f"transfer {kind:7} h1 {h1 * 1e3:7.1f} ms  h2 {h2 * 1e3:7.1f} ms  "
              f"ratio {h1 / h2:.2f}", flush=True)
    return result


def report_lines(result: dict[str, Any]) -> list[str]:
    rows = [f"One {result['mib']} MiB body over one stream (curl, medians):", "",
            "| transfer | HTTP/1.1 | h2c | HTTP/1.1 time / h2 time | goal |",
            "|---|---:|---:|---:|---:|"]
    for kind, m in result["medians"].items():
        rows.append(f"| {kind} | {m['h1_s'] * 1e3:.1f} ms | {m['h2_s'] * 1e3:.1f} ms | "
                    f"{m['h1_over_h2']:.2f} | 0.8 |")
    return rows
