"""Instructions and system calls per request: our servers against the C ceiling.

Wall-clock benchmarks on a shared or virtual machine are noisy; instruction counts are not.
Each server runs under ``valgrind --tool=callgrind`` with instrumentation off until it has
served a warm-up; then instrumentation is switched on (callgrind_control), a small client sends
a fixed number of requests, and the counters are dumped. Ir per request is the total over that
window divided by the requests. A second pass attaches ``strace -c`` for the same window to
count system calls per request (callgrind sees user space only). Results go to
results/callgrind/ (summary.json, summary.md); dumps and annotate listings under raw/.

    python tests/benchmarks/profile_callgrind.py [--servers c,raw,wsgi,asgi]
        [--shapes keepalive,close] [--requests 20000] [--close-requests 5000]
        [--connections 16] [--static-requests 2000]

Servers (as the wall-clock benchmark runs them, from their CONTENDER declarations): Mongoose
in C (``c``), the raw handler (``raw``: every event delivered to Python), the WSGI and ASGI
hello servers (``wsgi``, ``asgi``), and on request the raw handler declaring
``@handles(MG_EV_HTTP_MSG)`` (``handles``) and the static pair (``static``: ours and C
serving 100 KiB files, keep-alive only).

Load shapes, with C = --connections:

- ``keepalive``: C connections kept open; each step sends one request on every connection,
  then reads every answer (so each poll iteration sees up to C requests).
- ``close``: connection per request; each step opens C new connections, sends one request
  with ``Connection: close`` on each, then reads each answer until the server closes. Ir per
  request is then Ir per connection (accept, parse, answer, close).
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
VENV = ck.ROOT / ".venv"  # whose Python and extension the servers run (--venv)
REQUEST = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: profile\r\n\r\n"
CLOSE_REQUEST = REQUEST.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n")
BODY = b'{"message":"Hello, World!"}'
SHAPES = ("keepalive", "close")
SHAPE_LABELS = {"keepalive": "keep-alive", "close": "connection per request"}
HELLO_SERVERS = ("mongoose-c", "cymongoose-raw", "cymongoose-handles", "cymongoose-wsgi",
                 "cymongoose-asgi")
STATIC_SERVERS = ("mongoose-c-static", "cymongoose-static")
ALIASES = {"c": ("mongoose-c",), "raw": ("cymongoose-raw",),
           "handles": ("cymongoose-handles",), "wsgi": ("cymongoose-wsgi",),
           "asgi": ("cymongoose-asgi",), "static": STATIC_SERVERS}
LABELS = {"mongoose-c": "Mongoose C", "cymongoose-raw": "raw",
          "cymongoose-handles": "raw @handles", "cymongoose-wsgi": "WSGI",
          "cymongoose-asgi": "ASGI", "mongoose-c-static": "Mongoose C static",
          "cymongoose-static": "serve_dir"}
# (numerator, denominator) of the ratios the tables give.
RATIOS = (("cymongoose-raw", "mongoose-c"), ("cymongoose-handles", "mongoose-c"),
          ("cymongoose-wsgi", "cymongoose-raw"),
          ("cymongoose-asgi", "cymongoose-raw"), ("cymongoose-static", "mongoose-c-static"))
# Inclusive cost of these entry points (where present: -O3 inlines some) says where a request
# or a connection goes: the loop, accepting, closing, HTTP parsing and delivery, the bridge.
KEY_INCLUSIVE = ("mg_mgr_poll", "accept_conn", "mg_close_conn", "iolog", "http_cb.part.0",
                 "mg_http_parse", "__pyx_f_10cymongoose_9_mongoose__http_guard",
                 "__pyx_f_10cymongoose_9_mongoose__on_event",
                 "__pyx_f_10cymongoose_9_mongoose__dispatch", "_PyEval_EvalFrameDefault",
                 "start_thread")


def _check_answer(head: bytes, body: bytes, kind: str) -> None:
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"unexpected answer {head[:80]!r}")
    # The WSGI and ASGI servers add Date and Server: the body is what all hellos share.
    if kind == "hello" and body != BODY:
        raise RuntimeError(f"unexpected body {body[:120]!r}")


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


def _path(kind: str, n: int) -> bytes:
    return b"/" if kind == "hello" else f"/file_{n % 100:03d}.bin".encode()


def client(port: int, requests: int, connections: int, kind: str = "hello",
           shape: str = "keepalive") -> None:
    if shape == "close":
        client_close(port, requests, connections, kind)
        return
    socks = [socket.create_connection(("127.0.0.1", port), timeout=120)
             for _ in range(connections)]
    leftovers = [b""] * connections
    try:
        sent = 0
        while sent < requests:
            batch = range(min(connections, requests - sent))
            for k in batch:
                socks[k].sendall(REQUEST.replace(b"GET / ", b"GET " + _path(kind, sent + k)
                                                 + b" "))
            for k in batch:
                head, body, leftovers[k] = _read_answer(socks[k], leftovers[k])
                _check_answer(head, body, kind)
            sent += len(batch)
    finally:
        for s in socks:
            s.close()


def client_close(port: int, requests: int, connections: int, kind: str) -> None:
    """A new connection per request: each step connects C sockets, sends one request with
    Connection: close on each, then reads each until the server closes it."""
    sent = 0
    while sent < requests:
        batch = min(connections, requests - sent)
        socks = [socket.create_connection(("127.0.0.1", port), timeout=120)
                 for _ in range(batch)]
        try:
            for k, s in enumerate(socks):
                s.sendall(CLOSE_REQUEST.replace(b"GET / ", b"GET " + _path(kind, sent + k)
                                                + b" "))
            for s in socks:
                data = b""
                while chunk := s.recv(1 << 20):
                    data += chunk
                head, body, extra = _read_answer(s, data)  # all of it read already
                if extra:
                    raise RuntimeError(f"bytes after the answer: {extra[:80]!r}")
                _check_answer(head, body, kind)
        finally:
            for s in socks:
                s.close()
        sent += batch


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


def server_argv(c: ck.Contender, port: int) -> list[str]:
    """The contender's own command (as the wall-clock benchmark starts it), substituted."""
    values = {"python": str(VENV / "bin" / "python"), "file": str(c.file),
              "dir": str(c.file.parent), "bench": str(ck.BENCH_DIR), "port": str(port),
              "exe": str(c.exe or ""), "static_dir": str(STATIC_DIR), "root": str(ck.ROOT),
              "workers": "1"}
    return [re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), a)
            for a in c.command]


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
    keeps the unstripped file (same build id, so the same code); a copy of the package with a
    copy of it comes first on PYTHONPATH, and SKBUILD_EDITABLE_SKIP tells the editable
    install's import hook to stand aside.
    """
    installed = list((VENV / "lib").glob("python3*/site-packages/cymongoose/"
                                                       "_mongoose*.so"))
    for so in installed:
        bid = _build_id(so)
        for twin in ck.ROOT.glob(f"build/*/{so.name}"):
            if bid and _build_id(twin) == bid:
                pkg = ck.CACHE_DIR / "profile-pkg" / "cymongoose"
                if pkg.exists():
                    shutil.rmtree(pkg)
                # The Python subpackages too (wsgi, asgi, serving, ...): the servers import
                # them. A copy of the twin, not a link: a rebuild while a profile runs must
                # not replace the file under it.
                shutil.copytree(ck.ROOT / "src" / "cymongoose", pkg,
                                ignore=shutil.ignore_patterns("__pycache__", "*.so", "_pxi",
                                                              "includes", "*.pyx", "*.pxd"))
                shutil.copy2(twin, pkg / so.name)
                if _build_id(pkg / so.name) != bid:
                    continue  # rebuilt while being copied
                return {"PYTHONPATH": str(pkg.parent),
                        "SKBUILD_EDITABLE_SKIP": str(twin.parent.resolve())}
    log.warning("no unstripped twin of the installed extension: its functions stay unnamed")
    return {}


def _stem(name: str, shape: str, connections: int) -> str:
    # Keep-alive files keep the names they had before there were shapes.
    return f"{name}.c{connections}" if shape == "keepalive" else f"{name}.{shape}.c{connections}"


def callgrind_run(c: ck.Contender, shape: str, requests: int, connections: int,
                  warmup: int) -> dict[str, Any]:
    name = c.name
    raw = OUT / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    port = ck.free_port()
    stem = _stem(name, shape, connections)
    out_file = raw / f"{stem}.callgrind"
    for old in raw.glob(f"{out_file.name}*"):
        old.unlink()
    argv = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--dump-instr=no",
            f"--callgrind-out-file={out_file}"] + server_argv(c, port)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("VIRTUAL_ENV", None)
    if name.startswith("cymongoose"):
        env.update(symbolized_env())
    # The server files import their neighbours (hello_apps): run them from servers/.
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                            cwd=c.file.parent)
    try:
        wait_port(port, proc, 300)
        client(port, warmup, connections, kind_of(name), shape)
        subprocess.run(["callgrind_control", "--instr=on", str(proc.pid)], check=True,
                       capture_output=True)
        started = time.monotonic()
        client(port, requests, connections, kind_of(name), shape)
        elapsed = time.monotonic() - started
        subprocess.run(["callgrind_control", f"--dump={name}-{shape}-c{connections}",
                        str(proc.pid)],
                       check=True, capture_output=True)
        subprocess.run(["callgrind_control", "--instr=off", str(proc.pid)], check=True,
                       capture_output=True)
    finally:
        stop(proc)
    dumps = sorted(p for p in raw.glob(f"{out_file.name}.*") if p.suffix != ".txt")
    if not dumps:
        err = proc.stderr.read()[-500:] if proc.stderr else b""
        raise RuntimeError(f"no callgrind dump for {name}: {err!r}")
    dump = dumps[0]
    text = dump.read_text(errors="replace")
    m = re.search(r"^(?:summary|totals):\s+(\d+)", text, re.MULTILINE)
    total = int(m.group(1)) if m else 0
    annotate = {}
    for inclusive in ("no", "yes"):
        r = subprocess.run(["callgrind_annotate", f"--inclusive={inclusive}",
                            "--threshold=99.9", str(dump)], capture_output=True, text=True)
        what = "inclusive" if inclusive == "yes" else "self"
        path = raw / f"{stem}.{what}.txt"
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
    # glibc's memset clears large blocks with `rep stosb`, which valgrind counts as one
    # instruction per byte: Mongoose's 16 KiB buffers (calloc, and the wipe when freed) make
    # it the largest entry of a connection per request, far above its cost in cycles.
    memset_ir = sum(ir for ir, f, _o in _merged(annotate["no"]) if f.startswith("__memset"))
    polls = sum(e["calls"] for e in call_tree(dump, r"^mg_mgr_poll$", "caller"))
    inclusive_all = _merged(annotate["yes"])
    key = [{"function": f, "ir": ir, "object": o} for ir, f, o in inclusive_all
           if f in KEY_INCLUSIVE]
    key.sort(key=lambda e: KEY_INCLUSIVE.index(e["function"]))
    return {"server": name, "shape": shape, "connections": connections,
            "requests": requests, **bridge,
            "ir_total": total, "ir_per_request": total / requests,
            "memset_ir": memset_ir, "polls": polls,
            "wall_s_under_valgrind": round(elapsed, 2),
            "top_self": top_functions(annotate["no"], total, 25),
            "top_inclusive": top_functions(annotate["yes"], total, 40),
            "key_inclusive": key,
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


def _merged(listing: str) -> list[tuple[int, str, str]]:
    """_functions() with the entries of one function summed, largest first.

    callgrind_annotate lists a function once per source file its code came from (inlined
    headers of CPython); an entry without an object inherits the one named before."""
    merged: dict[str, list[Any]] = {}
    for ir, f, o in _functions(listing):
        entry = merged.setdefault(f, [0, o])
        entry[0] += ir
        if entry[1] == "?":
            entry[1] = o
    return sorted(((ir, f, o) for f, (ir, o) in merged.items()), key=lambda t: -t[0])


def top_functions(listing: str, total: int, n: int) -> list[dict[str, Any]]:
    return [{"ir": ir, "share": round(ir / total, 4) if total else 0, "function": f,
             "object": o} for ir, f, o in _merged(listing)[:n]]


def by_object(listing: str, total: int) -> dict[str, int]:
    objects: dict[str, int] = {}
    for ir, _f, o in _functions(listing):
        objects[o] = objects.get(o, 0) + ir
    return dict(sorted(objects.items(), key=lambda kv: -kv[1]))


def strace_run(c: ck.Contender, shape: str, requests: int, connections: int,
               warmup: int) -> dict[str, Any]:
    name = c.name
    port = ck.free_port()
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("VIRTUAL_ENV", None)
    proc = subprocess.Popen(server_argv(c, port), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env, cwd=c.file.parent)
    out = OUT / "raw" / f"{_stem(name, shape, connections)}.strace.txt"
    try:
        wait_port(port, proc, 60)
        client(port, warmup, connections, kind_of(name), shape)
        tracer = subprocess.Popen(["strace", "-c", "-f", "-o", str(out), "-p", str(proc.pid)],
                                  stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # strace attaches asynchronously
        client(port, requests, connections, kind_of(name), shape)
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
    return {"server": name, "shape": shape, "connections": connections, "requests": requests,
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
DISPATCH_CALLERS = {"mg_mgr_poll": "MG_EV_POLL (every connection, every iteration; with "
                    "@handles most return before Python), and MG_EV_OPEN/ACCEPT (accept_conn "
                    "is inlined)",
                    "iolog": "MG_EV_READ / MG_EV_WRITE", "http_cb.part.0":
                    "MG_EV_HTTP_HDRS + MG_EV_HTTP_MSG (the reply / serve_dir call included)",
                    "http_cb": "MG_EV_HTTP_HDRS + MG_EV_HTTP_MSG", "static_cb": "static file",
                    "mg_close_conn": "MG_EV_CLOSE", "accept_conn": "MG_EV_ACCEPT",
                    "mg_alloc_conn": "MG_EV_OPEN", "mg_call": "events Mongoose raises "
                    "through mg_call (MG_EV_OPEN, MG_EV_ACCEPT, ...)"}


def _ir(r: dict[str, Any] | None) -> str:
    return f"{r['ir_per_request']:,.0f}" if r else "–"


def _ir_of(r: dict[str, Any]) -> float:
    return float(r["ir_per_request"])


def _ir_without_memset(r: dict[str, Any]) -> float:
    return float(r["ir_total"] - r.get("memset_ir", 0)) / float(r["requests"])


MEMSET_NOTE = (
    "The same without libc's memset: glibc clears large blocks with `rep stosb`, which "
    "callgrind counts as one instruction per byte. Mongoose zeroes each connection's 16 KiB "
    "receive and send buffers when it allocates them (calloc) and again when it frees them: "
    "64 KiB, about 65,000 Ir per connection, in C as in ours, for a few thousand cycles on "
    "the CPU. The ratios below are those of the code that differs.")


def markdown(results: dict[str, Any]) -> str:
    out = ["# Instructions and system calls per request (callgrind, strace)", "",
           f"{results['date']}; git {results.get('git', '?')}. After a warm-up of "
           f"{results['warmup']:,} requests, a fixed number of requests (below) in each load "
           "shape: keep-alive (C connections kept open, one request on each per step) and "
           "connection per request (C new connections per step, `Connection: close`, each "
           "read until the server closes it: Ir per request is Ir per connection). Ir = "
           "instructions executed in user space (callgrind, all threads); system calls "
           "counted by strace over the same kind of window. Generated by "
           "`tests/benchmarks/profile_callgrind.py`."]
    cg = {(r["server"], r.get("shape", "keepalive"), r["connections"]): r
          for r in results["callgrind"]}
    st = {(r["server"], r.get("shape", "keepalive"), r["connections"]): r
          for r in results["strace"]}
    rows = sorted({(k[1], k[2]) for k in cg}, key=lambda t: (SHAPES.index(t[0]), t[1]))
    for group in (HELLO_SERVERS, STATIC_SERVERS):
        servers = [s for s in group if s in results["servers"]]
        ratios = [(a, b) for a, b in RATIOS if a in servers and b in servers]
        if not servers:
            continue
        for title, value in (("", _ir_of), (MEMSET_NOTE, _ir_without_memset)):
            out += [""] + ([title, ""] if title else []) + [
                "| Load | Shape | Connections | Requests | "
                + " | ".join(f"{LABELS[s]} Ir/req" for s in servers) + " | "
                + " | ".join(f"{LABELS[a]} ÷ {LABELS[b]}" for a, b in ratios) + " |",
                "|---" * (4 + len(servers) + len(ratios)) + "|"]
            for shape, conns in rows:
                got = [cg.get((s, shape, conns)) for s in servers]
                if not any(got):
                    continue
                requests = next(r["requests"] for r in got if r)
                cells = [f"{value(r):,.0f}" if r else "–" for r in got]
                for a, b in ratios:
                    ra, rb = cg.get((a, shape, conns)), cg.get((b, shape, conns))
                    cells.append(f"{value(ra) / value(rb):.2f}" if ra and rb else "–")
                out.append(f"| {kind_of(servers[0])} | {SHAPE_LABELS[shape]} | {conns} | "
                           f"{requests:,} | " + " | ".join(cells) + " |")
        if results["strace"]:
            out += ["", "System calls per request:", "", "| Load | Shape | Connections | "
                    + " | ".join(LABELS[s] for s in servers) + " |",
                    "|---" * (3 + len(servers)) + "|"]
            for shape, conns in rows:
                got_st = [st.get((s, shape, conns)) for s in servers]
                if any(got_st):
                    out.append(f"| {kind_of(servers[0])} | {SHAPE_LABELS[shape]} | {conns} | "
                               + " | ".join(f"{r['syscalls_per_request']:.2f}" if r else "–"
                                            for r in got_st) + " |")
    # What a connection costs: connection per request minus keep-alive, same server and C.
    extra = []
    for s in HELLO_SERVERS:
        for conns in results["connections"]:
            ka, cl = cg.get((s, "keepalive", conns)), cg.get((s, "close", conns))
            if ka and cl:
                extra.append(f"| {LABELS[s]} | {conns} | {_ir(ka)} | {_ir(cl)} | "
                             f"{cl['ir_per_request'] - ka['ir_per_request']:,.0f} | "
                             f"{_ir_without_memset(cl) - _ir_without_memset(ka):,.0f} |")
    if extra:
        out += ["", "What a connection adds (connection per request minus keep-alive):", "",
                "| Server | Connections | keep-alive Ir/req | connection per request Ir/req | "
                "difference | difference without memset |", "|---|---|---|---|---|---|"]
        out += extra
    for r in results["callgrind"]:
        n = r["requests"]
        shape = r.get("shape", "keepalive")
        out += ["", f"## {r['server']}, {SHAPE_LABELS[shape]}, {r['connections']} "
                f"connection(s): {r['ir_per_request']:,.0f} Ir per request", "",
                f"Loop iterations (`mg_mgr_poll` calls) per request: "
                f"{r.get('polls', 0) / n:.2f}; libc memset {r.get('memset_ir', 0) / n:,.0f} "
                "Ir/req.", "",
                "By object (self cost per request): " + ", ".join(
                    f"{o} {ir / n:,.0f}" for o, ir in list(r["by_object"].items())[:6]), ""]
        if r.get("key_inclusive"):
            out += ["Inclusive cost of entry points (Ir per request): " + ", ".join(
                f"`{e['function']}` {e['ir'] / n:,.0f}" for e in r["key_inclusive"]), ""]
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
        sr = st.get((r["server"], shape, r["connections"]))
        if sr:
            out += ["", f"System calls per request: {sr['syscalls_per_request']:.2f}: "
                    + ", ".join(f"{k} {v}" for k, v in sr["by_call"].items())]
    return "\n".join(out) + "\n"


def _same_mongoose(exe: Path) -> bool | None:
    """Whether the C ceiling compiled the same fixed mongoose.c as the extension in the build
    tree (None: no build tree to compare with). They differ while build_fixes.py has changed
    and the extension is not rebuilt yet: the comparison would then be of two Mongooses."""
    ours = sorted(ck.ROOT.glob("build/*/mongoose/mongoose.c"))
    theirs = exe.parent / "mongoose.c"
    ours = [p for p in ours if "asan" not in p.parts and "fuzz" not in p.parts]
    if not ours or not theirs.exists():
        return None
    return any(p.read_bytes() == theirs.read_bytes() for p in ours)


def _git_state() -> str:
    head = subprocess.run(["git", "-C", str(ck.ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ck.ROOT), "status", "--porcelain", "--", "src",
                            "vendor", "CMakeLists.txt"], capture_output=True, text=True).stdout
    state = head + (" with uncommitted changes under src/ or vendor/" if dirty.strip() else "")
    for so in (VENV / "lib").glob("python3*/site-packages/cymongoose/_mongoose*.so"):
        state += f"; extension build id {(_build_id(so) or '?')[:12]}"
    return state


def _selected(spec: str) -> list[str]:
    names: list[str] = []
    for part in spec.split(","):
        part = part.strip()
        for name in ALIASES.get(part, (part,)):
            if name not in HELLO_SERVERS + STATIC_SERVERS:
                sys.exit(f"profile: unknown server {part!r} (one of "
                         f"{', '.join(ALIASES)} or a contender name)")
            if name not in names:
                names.append(name)
    return [s for s in HELLO_SERVERS + STATIC_SERVERS if s in names]


def main() -> int:
    global OUT, VENV
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--servers", default="c,raw,wsgi,asgi,static",
                   help="c, raw, handles, wsgi, asgi, static (ours and C serving files), "
                   "comma-separated")
    p.add_argument("--shapes", default="keepalive,close",
                   help="keepalive, close (connection per request); static files: keepalive")
    p.add_argument("--requests", type=int, default=20000, help="keep-alive hello requests")
    p.add_argument("--close-requests", type=int, default=5000,
                   help="hello requests (so connections) in the connection-per-request shape")
    p.add_argument("--static-requests", type=int, default=2000,
                   help="requests of 100 KiB files for the static pair (0 skips it)")
    p.add_argument("--warmup", type=int, default=2000)
    p.add_argument("--connections", default="16")
    p.add_argument("--no-strace", action="store_true")
    p.add_argument("--report-only", action="store_true",
                   help="rewrite summary.md from summary.json, measuring nothing")
    p.add_argument("--venv", type=Path, default=VENV,
                   help="the environment whose Python and cymongoose the servers run "
                   "(another CPython's: uv sync with UV_PROJECT_ENVIRONMENT and --python)")
    p.add_argument("--out", type=Path, default=OUT,
                   help="where summary.json/md and raw/ go (default results/callgrind)")
    args = p.parse_args()
    OUT, VENV = args.out.resolve(), args.venv.resolve()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s",
                        datefmt="%H:%M:%S")
    if args.report_only:
        (OUT / "summary.md").write_text(markdown(json.loads((OUT / "summary.json").read_text())))
        return 0
    for tool in ("valgrind", "callgrind_control", "callgrind_annotate", "readelf") + (
            () if args.no_strace else ("strace",)):
        if shutil.which(tool) is None:
            pkg = {"strace": "strace", "readelf": "binutils"}.get(tool, "valgrind")
            sys.exit(f"profile: {tool} not found: apt-get install {pkg}")
    servers = _selected(args.servers)
    if not args.static_requests:
        servers = [s for s in servers if s not in STATIC_SERVERS]
    shapes = [s.strip() for s in args.shapes.split(",")]
    if not set(shapes) <= set(SHAPES):
        sys.exit(f"profile: --shapes takes {', '.join(SHAPES)}")
    contenders = {c.name: c for c in ck.discover()}
    for name in servers:
        contender = contenders[name]
        if contender.build == "mongoose-c":
            try:
                contender.exe, _info = ck.build_mongoose_c(contender)
            except ck.Skip as exc:
                sys.exit(f"profile: cannot build the C server: {exc}")
            if _same_mongoose(contender.exe) is False:
                log.warning("the C server's fixed mongoose.c differs from the one the "
                            "extension was built from: rebuild the extension (make build)")
    if set(servers) & set(STATIC_SERVERS) and not (STATIC_DIR / "file_099.bin").exists():
        sys.exit("profile: the static files are made by run.py: run `make bench-quick` "
                 "(or run.py --only cymongoose-static) once first")
    conns = [int(x) for x in args.connections.split(",")]
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
                               "git": _git_state(), "warmup": args.warmup,
                               "connections": conns, "servers": servers, "shapes": shapes,
                               "callgrind": [], "strace": []}
    for shape in shapes:
        for name in servers:
            kind = kind_of(name)
            if kind == "static" and shape != "keepalive":
                continue
            n = {"static": args.static_requests, "hello": args.requests}[kind]
            if shape == "close":
                n = args.close_requests
            warm = min(args.warmup, n)
            for k in conns:
                log.info("callgrind: %s, %s, %d connection(s), %d requests", name, shape, k, n)
                r = callgrind_run(contenders[name], shape, n, k, warm)
                log.info("  %.0f Ir per request", r["ir_per_request"])
                results["callgrind"].append(r)
                if not args.no_strace:
                    s = strace_run(contenders[name], shape, n, k, warm)
                    log.info("  %.2f system calls per request", s["syscalls_per_request"])
                    results["strace"].append(s)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "summary.json").write_text(json.dumps(results, indent=1) + "\n")
    (OUT / "summary.md").write_text(markdown(results))
    log.info("wrote %s", OUT / "summary.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
