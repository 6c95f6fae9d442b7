"""Instructions and system calls per request: our raw-handler server against the C ceiling.

Wall-clock benchmarks on a shared or virtual machine are noisy; instruction counts are not.
Each server runs under ``valgrind --tool=callgrind`` with instrumentation off until it has
served a warm-up; then instrumentation is switched on (callgrind_control), a small client sends
a fixed number of requests, and the counters are dumped. Ir per request is the total over that
window divided by the requests. A second pass attaches ``strace -c`` for the same window to
count system calls per request (callgrind sees user space only). Results go to
results/callgrind/ (summary.json, summary.md); dumps and annotate listings under raw/.

    python tests/benchmarks/profile_callgrind.py [--requests 20000] [--connections 1,16]

Load shape: C connections kept open; each step sends one request on every connection, then
reads every answer (so each poll iteration sees up to C requests).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import contenders as ck  # noqa: E402

log = logging.getLogger("profile")
OUT = ck.BENCH_DIR / "results" / "callgrind"
REQUEST = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: profile\r\n\r\n"
ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 27\r\n\r\n"
          b'{"message":"Hello, World!"}')


def _read_answer(sock: socket.socket, buf: bytes) -> tuple[bytes, bytes, bytes]:
    """(head, body, leftover) of one Content-Length framed answer."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("server closed the connection")
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise RuntimeError("server closed the connection mid-body")
        rest += chunk
    return head, rest[:length], rest[length:]


def client(port: int, requests: int, connections: int, kind: str = "hello") -> None:
    socks = [socket.create_connection(("127.0.0.1", port), timeout=120)
             for _ in range(connections)]
    leftovers = [b""] * connections
    try:
        sent = 0
        while sent < requests:
            batch = range(min(connections, requests - sent))
            for k in batch:
                path = "/" if kind == "hello" else f"/file_{(sent + k) % 100:03d}.bin"
                socks[k].sendall(REQUEST.replace(b"GET / ", f"GET {path} ".encode()))
            for k in batch:
                head, body, leftovers[k] = _read_answer(socks[k], leftovers[k])
                if not head.startswith(b"HTTP/1.1 200"):
                    raise RuntimeError(f"unexpected answer {head[:80]!r}")
                if kind == "hello" and head + b"\r\n\r\n" + body != ANSWER:
                    raise RuntimeError(f"unexpected answer {(head + body)[:120]!r}")
            sent += len(batch)
    finally:
        for s in socks:
            s.close()


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} during start-up")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"server not listening after {timeout:g} s")


STATIC_DIR = ck.CACHE_DIR / "static"  # made by run.py (100 files of 100 KiB)


def server_argv(name: str, port: int, exe: Path | None) -> list[str]:
    python = str(ck.ROOT / ".venv" / "bin" / "python")
    if name == "cymongoose-raw":
        return [python, str(ck.BENCH_DIR / "demo_server.py"), "--port", str(port),
                "--log-level", "WARNING"]
    if name == "cymongoose-static":
        return [python, str(ck.SERVERS_DIR / "cymongoose_static.py"), "--port", str(port),
                "--root", str(STATIC_DIR)]
    assert exe is not None
    if name == "mongoose-c-static":
        return [str(exe), "--port", str(port), "--static", str(STATIC_DIR)]
    return [str(exe), "--port", str(port)]


def kind_of(name: str) -> str:
    return "static" if name.endswith("-static") else "hello"


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _build_id(path: Path) -> str | None:
    r = subprocess.run(["readelf", "-n", str(path)], capture_output=True, text=True)
    m = re.search(r"Build ID: ([0-9a-f]+)", r.stdout)
    return m.group(1) if m else None


def symbolized_env() -> dict[str, str]:
    """Environment that imports the unstripped twin of the installed extension.

    The wheel install strips the extension, leaving callgrind only addresses. The build tree
    keeps the unstripped file (same build id, so the same code); a copy of the package that
    links to it comes first on PYTHONPATH, and SKBUILD_EDITABLE_SKIP tells the editable
    install's import hook to stand aside.
    """
    installed = list((ck.ROOT / ".venv" / "lib").glob("python3*/site-packages/cymongoose/"
                                                       "_mongoose*.so"))
    for so in installed:
        bid = _build_id(so)
        for twin in ck.ROOT.glob(f"build/*/{so.name}"):
            if bid and _build_id(twin) == bid:
                pkg = ck.CACHE_DIR / "profile-pkg" / "cymongoose"
                if pkg.exists():
                    shutil.rmtree(pkg)
                pkg.mkdir(parents=True)
                for py in (ck.ROOT / "src" / "cymongoose").glob("*.py"):
                    shutil.copy(py, pkg / py.name)
                (pkg / so.name).symlink_to(twin.resolve())
                return {"PYTHONPATH": str(pkg.parent),
                        "SKBUILD_EDITABLE_SKIP": str(twin.parent.resolve())}
    log.warning("no unstripped twin of the installed extension: its functions stay unnamed")
    return {}


def callgrind_run(name: str, exe: Path | None, requests: int, connections: int,
                  warmup: int) -> dict[str, Any]:
    raw = OUT / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    port = ck.free_port()
    out_file = raw / f"{name}.c{connections}.callgrind"
    for old in raw.glob(f"{out_file.name}*"):
        old.unlink()
    argv = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--dump-instr=no",
            f"--callgrind-out-file={out_file}"] + server_argv(name, port, exe)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    if name.startswith("cymongoose"):
        env.update(symbolized_env())
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        wait_port(port, proc, 300)
        client(port, warmup, connections, kind_of(name))
        subprocess.run(["callgrind_control", "--instr=on", str(proc.pid)], check=True,
                       capture_output=True)
        started = time.monotonic()
        client(port, requests, connections, kind_of(name))
        elapsed = time.monotonic() - started
        subprocess.run(["callgrind_control", f"--dump={name}-c{connections}",
                        str(proc.pid)],
                       check=True, capture_output=True)
        subprocess.run(["callgrind_control", "--instr=off", str(proc.pid)], check=True,
                       capture_output=True)
    finally:
        stop(proc)
    dumps = sorted(p for p in raw.glob(f"{out_file.name}.*") if p.suffix != ".txt")
    if not dumps:
        raise RuntimeError(f"no callgrind dump for {name}: {proc.stderr.read()[-500:]!r}")
    dump = dumps[0]
    text = dump.read_text(errors="replace")
    m = re.search(r"^(?:summary|totals):\s+(\d+)", text, re.MULTILINE)
    total = int(m.group(1)) if m else 0
    annotate = {}
    for inclusive in ("no", "yes"):
        r = subprocess.run(["callgrind_annotate", f"--inclusive={inclusive}",
                            "--threshold=99.9", str(dump)], capture_output=True, text=True)
        what = "inclusive" if inclusive == "yes" else "self"
        path = raw / f"{name}.c{connections}.{what}.txt"
        path.write_text(r.stdout)
        annotate[inclusive] = r.stdout
    bridge = {}
    if name.startswith("cymongoose"):
        bridge = {
            # Cython's C names: __pyx_f_<module>__<cdef function>, __pyx_pw_..._<n><method>.
            "dispatch": call_tree(dump, r"_mongoose__on_event$", "caller"),
            "reply": call_tree(dump, r"Connection_\d+reply$", "calling"),
            "send_response": call_tree(dump, r"_mongoose__send_response$", "calling"),
            "header_block": call_tree(dump, r"_mongoose__header_block$", "calling"),
        }
    return {"server": name, "connections": connections, "requests": requests, **bridge,
            "ir_total": total, "ir_per_request": total / requests,
            "wall_s_under_valgrind": round(elapsed, 2),
            "top_self": top_functions(annotate["no"], total, 25),
            "by_object": by_object(annotate["no"], total)}


_LINE = re.compile(r"^\s*([\d,]+)\s+(?:\([\s\d.]+%\)\s+)?(.*?)\s*(?:\[(.*)\])?\s*$")


def _functions(listing: str) -> list[tuple[int, str, str]]:
    out = []
    started = False
    for line in listing.splitlines():
        if not started:
            started = line.strip().startswith("Ir") and "file:function" in line
            continue
        m = _LINE.match(line)
        if not m or not m.group(2):
            continue
        ir = int(m.group(1).replace(",", ""))
        func = m.group(2).split(":", 1)[-1] if ":" in m.group(2) else m.group(2)
        obj = Path(m.group(3)).name if m.group(3) else "?"
        out.append((ir, func, obj))
    return out


def top_functions(listing: str, total: int, n: int) -> list[dict[str, Any]]:
    return [{"ir": ir, "share": round(ir / total, 4) if total else 0, "function": f,
             "object": o} for ir, f, o in _functions(listing)[:n]]


def by_object(listing: str, total: int) -> dict[str, int]:
    objects: dict[str, int] = {}
    for ir, _f, o in _functions(listing):
        objects[o] = objects.get(o, 0) + ir
    return dict(sorted(objects.items(), key=lambda kv: -kv[1]))


def strace_run(name: str, exe: Path | None, requests: int, connections: int,
               warmup: int) -> dict[str, Any]:
    port = ck.free_port()
    proc = subprocess.Popen(server_argv(name, port, exe), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    out = OUT / "raw" / f"{name}.c{connections}.strace.txt"
    try:
        wait_port(port, proc, 60)
        client(port, warmup, connections, kind_of(name))
        tracer = subprocess.Popen(["strace", "-c", "-f", "-o", str(out), "-p", str(proc.pid)],
                                  stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # strace attaches asynchronously
        client(port, requests, connections, kind_of(name))
        tracer.send_signal(signal.SIGINT)
        tracer.wait(30)
    finally:
        stop(proc)
    calls: dict[str, int] = {}
    for line in out.read_text().splitlines():
        parts = line.split()
        # % time, seconds, usecs/call, calls, [errors], syscall
        if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1] != "total":
            calls[parts[-1]] = int(parts[3])
    total = sum(calls.values())
    return {"server": name, "connections": connections, "requests": requests,
            "syscalls_per_request": round(total / requests, 3),
            "by_call": {k: round(v / requests, 3) for k, v in
                        sorted(calls.items(), key=lambda kv: -kv[1])}}


_TREE_LINE = re.compile(r"^\s*([\d,]+) \([\s\d.]+%\)\s+([<>*])\s+(.*?)(?: \(([\d,]+)x\))?"
                        r"(?: \[.*\])?\s*$")


def call_tree(dump: Path, pattern: str, direction: str) -> list[dict[str, Any]]:
    """Callers (direction 'caller') or callees ('calling') of the function whose name matches
    the regular expression, with call counts.

    Parsed from callgrind_annotate --tree=...; 'ir' is inclusive cost along that edge.
    """
    r = subprocess.run(["callgrind_annotate", f"--tree={direction}", "--inclusive=yes",
                        "--threshold=100", str(dump)], capture_output=True, text=True)
    block: list[tuple[str, int, str, int]] = []
    edges: list[dict[str, Any]] = []
    for line in r.stdout.splitlines() + [""]:
        m = _TREE_LINE.match(line)
        if not m:
            if block:
                star = [b for b in block if b[0] == "*"]
                if star and re.search(pattern, star[0][2].split(":", 1)[-1]):
                    edges += [{"function": b[2].split(":", 1)[-1], "calls": b[3], "ir": b[1]}
                              for b in block if b[0] in "<>"]
                block = []
            continue
        block.append((m.group(2), int(m.group(1).replace(",", "")), m.group(3).strip(),
                      int((m.group(4) or "0").replace(",", ""))))
    return edges


# What the Python bridge costs, per Mongoose caller: each caller stands for event kinds.
DISPATCH_CALLERS = {"mg_mgr_poll": "MG_EV_POLL (every connection, every iteration)",
                    "iolog": "MG_EV_READ / MG_EV_WRITE", "http_cb.part.0":
                    "MG_EV_HTTP_HDRS + MG_EV_HTTP_MSG (the reply / serve_dir call included)",
                    "http_cb": "MG_EV_HTTP_HDRS + MG_EV_HTTP_MSG", "static_cb": "static file",
                    "mg_close_conn": "MG_EV_CLOSE", "accept_conn": "MG_EV_ACCEPT"}


def markdown(results: dict[str, Any]) -> str:
    out = ["# Instructions and system calls per request (callgrind, strace)", "",
           f"{results['date']}; after a warm-up of {results['warmup']:,} requests, a fixed number "
           "of keep-alive requests (below). Ir = instructions executed in user space "
           "(callgrind); system calls counted by strace over the same kind of window. "
           "Generated by `tests/benchmarks/profile_callgrind.py`.", "",
           "| Load | Connections | Requests | ours Ir/req | C Ir/req | ours ÷ C | "
           "ours syscalls/req | C syscalls/req |", "|---|---|---|---|---|---|---|---|"]
    for ours_name, c_name in results["pairs"]:
        for conns in results["connections"]:
            cg = {r["server"]: r for r in results["callgrind"] if r["connections"] == conns}
            st = {r["server"]: r for r in results["strace"] if r["connections"] == conns}
            ours, c = cg.get(ours_name), cg.get(c_name)
            if not ours or not c:
                continue
            ratio = ours["ir_per_request"] / c["ir_per_request"]
            out.append(
                f"| {kind_of(ours_name)} | {conns} | {ours['requests']:,} | "
                f"{ours['ir_per_request']:,.0f} | {c['ir_per_request']:,.0f} | {ratio:.2f} | "
                f"{st.get(ours_name, {}).get('syscalls_per_request', '–')} | "
                f"{st.get(c_name, {}).get('syscalls_per_request', '–')} |")
    for r in results["callgrind"]:
        n = r["requests"]
        out += ["", f"## {r['server']}, {r['connections']} connection(s): "
                f"{r['ir_per_request']:,.0f} Ir per request", "",
                "By object (self cost per request): " + ", ".join(
                    f"{o} {ir / n:,.0f}" for o, ir in list(r["by_object"].items())[:6]), ""]
        if r.get("dispatch"):
            out += ["Python bridge (`_on_event`, inclusive of the handler) by Mongoose caller:",
                    "", "| caller | events | calls/req | Ir/req | Ir/call |",
                    "|---|---|---|---|---|"]
            for e in r["dispatch"]:
                if e["calls"]:
                    out.append(f"| `{e['function']}` | {DISPATCH_CALLERS.get(e['function'], '')}"
                               f" | {e['calls'] / n:.2f} | {e['ir'] / n:,.0f} | "
                               f"{e['ir'] / e['calls']:,.0f} |")
            out.append("")
        for title, key in (("`Connection.reply()`", "reply"),
                           ("`_send_response()`", "send_response"),
                           ("`_header_block()`", "header_block")):
            if r.get(key):
                out += [f"{title} callees (Ir per request): " + ", ".join(
                    f"`{e['function']}` {e['ir'] / n:,.0f}" for e in r[key][:10]), ""]
        out += ["| Ir/req | share | function (self cost) | object |", "|---|---|---|---|"]
        for f in r["top_self"][:15]:
            out.append(f"| {f['ir'] / n:,.0f} | {f['share'] * 100:.1f}% | "
                       f"`{f['function']}` | {f['object']} |")
    for r in results["strace"]:
        out += ["", f"System calls per request, {r['server']}, {r['connections']} "
                "connection(s): " + ", ".join(f"{k} {v}" for k, v in r["by_call"].items())]
    return "\n".join(out) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=20000)
    p.add_argument("--static-requests", type=int, default=2000,
                   help="requests of 100 KiB files for the static pair (0 skips it)")
    p.add_argument("--warmup", type=int, default=2000)
    p.add_argument("--connections", default="1,16")
    p.add_argument("--no-strace", action="store_true")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s",
                        datefmt="%H:%M:%S")
    for tool in ("valgrind", "callgrind_control", "callgrind_annotate", "readelf") + (
            () if args.no_strace else ("strace",)):
        if shutil.which(tool) is None:
            pkg = {"strace": "strace", "readelf": "binutils"}.get(tool, "valgrind")
            sys.exit(f"profile: {tool} not found: apt-get install {pkg}")
    c_server = next(c for c in ck.discover() if c.name == "mongoose-c")
    try:
        exe, _info = ck.build_mongoose_c(c_server)
    except ck.Skip as exc:
        sys.exit(f"profile: cannot build the C server: {exc}")
    pairs = [("cymongoose-raw", "mongoose-c")]
    if args.static_requests:
        if not (STATIC_DIR / "file_099.bin").exists():
            sys.exit("profile: the static files are made by run.py: run `make bench-quick` "
                     "(or run.py --only cymongoose-static) once first")
        pairs.append(("cymongoose-static", "mongoose-c-static"))
    conns = [int(x) for x in args.connections.split(",")]
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
                               "warmup": args.warmup, "connections": conns, "pairs": pairs,
                               "callgrind": [], "strace": []}
    for ours_name, c_name in pairs:
        n = args.requests if kind_of(ours_name) == "hello" else args.static_requests
        warm = min(args.warmup, n)
        for c in conns:
            for name in (c_name, ours_name):
                log.info("callgrind: %s, %d connection(s), %d requests", name, c, n)
                r = callgrind_run(name, exe, n, c, warm)
                log.info("  %.0f Ir per request", r["ir_per_request"])
                results["callgrind"].append(r)
                if not args.no_strace:
                    s = strace_run(name, exe, n, c, warm)
                    log.info("  %.2f system calls per request", s["syscalls_per_request"])
                    results["strace"].append(s)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "summary.json").write_text(json.dumps(results, indent=1) + "\n")
    (OUT / "summary.md").write_text(markdown(results))
    log.info("wrote %s", (OUT / "summary.md").relative_to(ck.ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
