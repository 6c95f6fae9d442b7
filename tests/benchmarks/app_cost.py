"""What a WSGI or ASGI app costs by itself: CPU time per call, with no server around it.

The app is called in-process with the environ (WSGI) or scope (ASGI) a server would build for
wrk's request (``GET / HTTP/1.1`` with only a ``Host`` header), built once and copied per call,
and its answer is consumed: for WSGI the iterable is iterated and closed, for ASGI every
message is taken by ``send``. That is the least any server must spend on a request of this
app, so a server's CPU per request minus this figure is the server's own overhead
(benchkit/report.py). By hand:

    python tests/benchmarks/app_cost.py --app hello_apps:flask_app [--interface wsgi]
        [--cpu 0] [--seconds 0.6] [--repeats 5] [--json]
    python tests/benchmarks/app_cost.py --app realworld.apps.flask_psycopg:app \
        --path '/queries?queries=20' --cpu 0      # REALWORLD_DSN: a database to ask

`--path` asks for another target than `/` (its answer must be a 200, any body): with the
realworld apps (tests/realworld/apps), it tells the app's own CPU per request from what the
server adds around it, which is how docs/performance.md splits a database test's time.
`--threads N` (WSGI) calls the app from N threads at once, each call after the last, as a
threaded server with no I/O of its own would: an app that waits on a database needs several
in flight to fill a CPU, and pays for the GIL changing hands between them; that is the
floor a threaded server's CPU per request is compared with.

The runner (`run.py`, phase ``app``) starts this script with ``--serve`` once per app and
environment, each in the contender's own interpreter and pinned to the server's CPU, and
interleaves their repeats (A B C ... A B C ...) as it does wrk's rounds, so that the same app
measured in two environments is measured under the same conditions. ``--serve`` protocol, one
JSON object per line on stdout: after set-up (import, check, warm-up, sizing) ``{"ready":
...}``; then per ``run`` line on stdin one repeat ``{"cpu_us": ..., "wall_us": ...}``; on
``check`` the answer is checked again (``{"ok": true}``); EOF ends it.

Apps are imported from servers/. The first answer is checked against the benchmark's hello
(status 200, Content-Type, exact body); a wrong one is an error, as in the runner's check.
Stdlib only (it runs in every peer's environment).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import importlib.metadata
import io
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
from benchkit.httpcheck import HELLO_BODY, HELLO_TYPE  # noqa: E402

# Distributions whose versions are reported when their module was imported by the app.
_DISTRIBUTIONS = {"flask": "flask", "werkzeug": "werkzeug", "fastapi": "fastapi",
                  "starlette": "starlette", "pydantic": "pydantic", "pydantic_core":
                  "pydantic-core", "django": "django"}

# What a server sees from wrk: `GET / HTTP/1.1` and `Host: 127.0.0.1:<port>`, nothing else.
HOST, PORT, CLIENT_PORT = "127.0.0.1", 8000, 50000


def wsgi_environ(target: str = "/") -> dict[str, Any]:
    path, _, query = target.partition("?")
    return {
        "REQUEST_METHOD": "GET",
        "SCRIPT_NAME": "",
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "SERVER_NAME": HOST,
        "SERVER_PORT": str(PORT),
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": HOST,
        "REMOTE_PORT": str(CLIENT_PORT),
        "HTTP_HOST": f"{HOST}:{PORT}",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(b""),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }


def asgi_scope(target: str = "/") -> dict[str, Any]:
    path, _, query = target.partition("?")
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "server": (HOST, PORT),
        "client": (HOST, CLIENT_PORT),
        "scheme": "http",
        "method": "GET",
        "root_path": "",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "headers": [(b"host", f"{HOST}:{PORT}".encode())],
        "state": {},
    }


class WrongAnswer(Exception):
    pass


def _check(status: int, headers: list[tuple[str, str]], body: bytes,
           hello: bool = True) -> None:
    """The benchmark's hello, or (`hello` False: another target) any 200."""
    ctype = next((v for k, v in headers if k.lower() == "content-type"), None)
    if status != 200:
        raise WrongAnswer(f"status {status}, expected 200")
    if not hello:
        return
    if ctype is None or ctype.split(";")[0].strip().lower() != HELLO_TYPE:
        raise WrongAnswer(f"Content-Type {ctype!r}, expected {HELLO_TYPE}")
    if body != HELLO_BODY:
        raise WrongAnswer(f"body {body[:80]!r} differs from {HELLO_BODY!r}")


def wsgi_runner(app: Any, target: str = "/") -> tuple[Any, Any]:
    """(check, run(n)): run(n) calls the app n times the way a minimal server would."""
    base = wsgi_environ(target)
    answer: list[Any] = []

    def write(data: bytes) -> None:
        answer.append(data)

    def start_response(status: str, headers: list[tuple[str, str]],
                       exc_info: Any = None) -> Any:
        answer[:] = [status, headers]
        return write

    def check() -> None:
        result = app(dict(base), start_response)
        try:
            chunks = [bytes(c) for c in result]
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        status, headers, *written = answer
        _check(int(status.split()[0]), headers, b"".join(written + chunks), target == "/")

    def run(n: int) -> None:
        for _ in range(n):
            result = app(base.copy(), start_response)
            for _chunk in result:
                pass
            close = getattr(result, "close", None)
            if close is not None:
                close()

    return check, run


def asgi_runner(app: Any, target: str = "/") -> tuple[Any, Any]:
    """(check, run(n)). The calls are awaited in one task on an asyncio loop (no task per
    call); an app that never suspends never touches the loop."""
    base = asgi_scope(target)
    request = {"type": "http.request", "body": b"", "more_body": False}
    gone = {"type": "http.disconnect"}
    sent: list[dict[str, Any]] = []
    loop = asyncio.new_event_loop()
    # The call in progress: whether its request was given, and once the app asked again
    # (it listens for the client leaving while it answers, as Django's ASGIHandler does),
    # the future its receive() waits on until the answer is complete, then told the client
    # left, as a server would. Closure cells, reset per call: an app that never asks twice
    # pays about what it did when receive() only returned the request.
    given = False
    answered: asyncio.Future[None] | None = None

    async def receive() -> dict[str, Any]:
        nonlocal given, answered
        if not given:
            given = True
            return request
        if answered is None:
            answered = loop.create_future()
        await answered
        return gone

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if (answered is not None and not answered.done()
                and message["type"] == "http.response.body" and not message.get("more_body")):
            answered.set_result(None)

    async def calls(n: int) -> None:
        nonlocal given, answered
        for _ in range(n):
            given = False
            answered = None
            await app(base.copy(), receive, send)
            sent.clear()

    def check() -> None:
        nonlocal given, answered
        given = False
        answered = None
        sent.clear()
        loop.run_until_complete(app(base.copy(), receive, send))
        start = next((m for m in sent if m["type"] == "http.response.start"), None)
        if start is None:
            raise WrongAnswer(f"no http.response.start among {[m['type'] for m in sent]}")
        headers = [(bytes(k).decode("latin-1"), bytes(v).decode("latin-1"))
                   for k, v in start.get("headers", [])]
        body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        _check(start["status"], headers, body, target == "/")
        sent.clear()

    def run(n: int) -> None:
        loop.run_until_complete(calls(n))

    return check, run


def threaded_runner(app: Any, target: str, threads: int) -> tuple[Any, Any]:
    """(check, run(n)): run(n) makes n calls from `threads` threads at once (WSGI), each
    thread with its own environ and start_response."""
    check, _ = wsgi_runner(app, target)
    runs = [wsgi_runner(app, target)[1] for _ in range(threads)]

    def run(n: int) -> None:
        share, extra = divmod(n, threads)
        workers = [threading.Thread(target=r, args=(share + (i < extra),))
                   for i, r in enumerate(runs)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()

    return check, run


def prepare(app: Any, interface: str, seconds: float, warmup: float,
            target: str = "/", threads: int = 1) -> tuple[Any, Any, int]:
    """(check, run, calls): the answer checked, the app warmed up (lazy set-up, caches), and
    the number of calls that takes about `seconds` of CPU."""
    if threads > 1:
        check, run = threaded_runner(app, target, threads)
    else:
        check, run = (wsgi_runner if interface == "wsgi" else asgi_runner)(app, target)
    check()
    n, spent = 16, 0.0
    deadline = time.process_time() + warmup
    while time.process_time() < deadline:
        t0 = time.process_time()
        run(n)
        spent = time.process_time() - t0
        if spent < warmup / 10:
            n *= 2
    per_call = max(spent / n, 1e-8)
    return check, run, max(100, int(seconds / per_call))


def repeat(run: Any, calls: int) -> tuple[float, float]:
    """One repeat: (CPU µs, wall µs) per call."""
    gc.collect()
    w0, c0 = time.perf_counter_ns(), time.process_time_ns()
    run(calls)
    c1, w1 = time.process_time_ns(), time.perf_counter_ns()
    return (c1 - c0) / calls / 1000, (w1 - w0) / calls / 1000


def summarize(calls: int, cpu_us: list[float], wall_us: list[float]) -> dict[str, Any]:
    return {"calls_per_repeat": calls, "repeats_us": [round(v, 3) for v in cpu_us],
            "per_call_us": round(statistics.median(cpu_us), 3),
            "min_us": round(min(cpu_us), 3), "max_us": round(max(cpu_us), 3),
            "wall_per_call_us": round(statistics.median(wall_us), 3)}


def measure(app: Any, interface: str, seconds: float, repeats: int,
            warmup: float, target: str = "/", threads: int = 1) -> dict[str, Any]:
    check, run, calls = prepare(app, interface, seconds, warmup, target, threads)
    cpu_us, wall_us = zip(*(repeat(run, calls) for _ in range(repeats)), strict=True)
    check()  # still the right answer after all those calls
    return summarize(calls, list(cpu_us), list(wall_us))


def versions() -> dict[str, str]:
    out = {}
    for module, dist in _DISTRIBUTIONS.items():
        if module in sys.modules:
            try:
                out[dist] = importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                pass
    return out


def serve(app: Any, args: argparse.Namespace) -> int:
    """The runner's side of the interleaving: one repeat per `run` line (module docstring)."""
    def say(obj: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    try:
        check, run, calls = prepare(app, args.interface, args.seconds, args.warmup,
                                    args.path, args.threads)
    except WrongAnswer as exc:
        say({"error": f"{args.app} answered wrongly: {exc}"})
        return 1
    say({"ready": True, "app": args.app, "interface": args.interface, "cpu": args.cpu,
         "python": sys.version.split()[0], "executable": sys.executable,
         "versions": versions(), "calls_per_repeat": calls})
    for line in sys.stdin:
        command = line.strip()
        if command == "run":
            cpu_us, wall_us = repeat(run, calls)
            say({"cpu_us": cpu_us, "wall_us": wall_us})
        elif command == "check":
            try:
                check()
            except WrongAnswer as exc:
                say({"error": f"{args.app} answered wrongly after the calls: {exc}"})
                return 1
            say({"ok": True})
        else:
            say({"error": f"unknown command {command!r}"})
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--app", required=True,
                   help="module:attr, imported from servers/ or tests/ (realworld.apps...)")
    p.add_argument("--path", default="/", help="the request target (path?query); not / "
                   "means any 200 answer passes the check")
    p.add_argument("--interface", choices=["wsgi", "asgi"], default="wsgi")
    p.add_argument("--threads", type=int, default=1,
                   help="WSGI: call the app from this many threads at once")
    p.add_argument("--cpu", type=int, help="pin to this CPU (the server's)")
    p.add_argument("--seconds", type=float, default=0.6, help="CPU seconds per repeat")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=float, default=0.3, help="CPU seconds of warm-up")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--serve", action="store_true",
                   help="the runner's interleaved mode: one repeat per 'run' line on stdin")
    args = p.parse_args(argv)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    if not args.path.startswith("/"):
        p.error(f"--path must start with /, got {args.path!r}")
    if args.threads < 1 or (args.threads > 1 and args.interface != "wsgi"):
        p.error(f"--threads takes a count of 1 or more, and more than 1 only with "
                f"--interface wsgi; got {args.threads} with {args.interface}")
    sys.path.insert(0, str(BENCH_DIR.parent))  # tests/: the realworld apps
    sys.path.insert(0, str(BENCH_DIR / "servers"))
    module_name, _, attr = args.app.partition(":")
    app: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        app = getattr(app, part)
    if args.serve:
        return serve(app, args)
    try:
        result = measure(app, args.interface, args.seconds, args.repeats, args.warmup,
                         args.path, args.threads)
    except WrongAnswer as exc:
        sys.exit(f"app_cost: {args.app} answered wrongly: {exc}")
    out = {"app": args.app, "path": args.path, "threads": args.threads,
           "interface": args.interface, "cpu": args.cpu,
           "python": sys.version.split()[0], "executable": sys.executable,
           "versions": versions(), **result}
    if args.json:
        print(json.dumps(out))
    else:
        target = "" if args.path == "/" else f" {args.path}"
        on = f", {args.threads} threads" if args.threads > 1 else ""
        print(f"{args.app}{target} ({args.interface}{on}, Python {out['python']}): "
              f"{out['per_call_us']:.2f} µs CPU per call (median of {args.repeats} x "
              f"{out['calls_per_repeat']:,} calls; {out['min_us']:.2f}–{out['max_us']:.2f}), "
              f"wall {out['wall_per_call_us']:.2f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
