"""--loop-threads on a free-threaded Python with the GIL off (run this file with
`PYTHON_GIL=0 python3.13t -m pytest`; it is skipped elsewhere): a raw handler, a Flask app
and a FastAPI app served by 2 to 4 loops with requests handled by more than one of them,
a drain mid-request across the loops, --max-requests counted for the process, /metrics
adding up every loop, and a dying loop taking its process down."""

from __future__ import annotations

import concurrent.futures
import re
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import h11
import pytest
from support.cli_run import CLI, cli_env
from support.http_client import get
from support.ports import free_port
from support.waiting import wait_for

# No timeout mark of its own: the suite's (pyproject) applies, and make tsan's --timeout
# can raise it for the instrumented interpreter (a mark would win over the option).
pytestmark = [
    pytest.mark.skipif(getattr(sys, "_is_gil_enabled", lambda: True)(),
                       reason="needs a free-threaded Python with the GIL off "
                              "(PYTHON_GIL=0 python3.13t)"),
]

# Each answer names the thread that made it and the process: `thread|pid`.
APPS = '''\
import os, threading, time
from pathlib import Path

from cymongoose import MG_EV_HTTP_MSG


def _who():
    return f"{threading.current_thread().name}|{threading.get_ident()}|{os.getpid()}"


def raw(conn, ev, data):
    if ev == MG_EV_HTTP_MSG:
        if data.uri == "/die":
            raise SystemExit("this loop thread dies")
        conn.reply(200, _who().encode())


def wsgi(environ, start_response):
    if environ["PATH_INFO"] == "/slow":
        Path(f"started-{threading.get_ident()}-{time.monotonic_ns()}").touch()
        time.sleep(1.0)
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [_who().encode()]


from flask import Flask

flask_app = Flask(__name__)


@flask_app.get("/")
def flask_index():
    return _who()


from fastapi import FastAPI
from fastapi.responses import PlainTextResponse

fastapi_app = FastAPI()


@fastapi_app.get("/", response_class=PlainTextResponse)
async def fastapi_index():
    return _who()


async def stalling(scope, receive, send):
    """/stall blocks its loop thread (a blocking call in async code) until a file `release`
    appears, 60 s at most; any other path names its thread."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["path"] == "/stall":
        Path(f"stalled-{threading.current_thread().name}").touch()
        deadline = time.monotonic() + 60
        while not Path("release").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": _who().encode()})
'''


def _serve(tmp: Path, app: str, *args: str) -> tuple[CLI, int]:
    (tmp / "ft_apps.py").write_text(APPS)
    port = free_port()
    cli = CLI(tmp, app, "--port", str(port), *args, env=cli_env(PYTHON_GIL="0"))

    def first_answer() -> bool:
        """One GET, retried only while the port refuses (nothing reached a server): the
        tests count requests, and a probe that timed out and was sent again would count
        twice (CLI.wait_http's does, under a CPU hog)."""
        if cli.proc.poll() is not None:
            raise AssertionError(f"exited: {cli.stop()} {cli.err}")
        try:
            get(port, "/", timeout=60)
        except ConnectionRefusedError:
            return False
        return True

    wait_for(first_answer, 60, f"the first answer on {port}", interval=0.05)
    return cli, port


def _answers(port: int, count: int, path: str = "/") -> list[str]:
    """`count` GETs, 8 at a time on fresh connections: the bodies."""
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        return [r.body.decode() for r in pool.map(lambda _: get(port, path, timeout=20),
                                                  range(count))]


def _until_spread(port: int, enough: Callable[[set[str]], bool]) -> set[str]:
    """Batches of concurrent GETs until the `thread|ident` parts seen are `enough`."""
    seen: set[str] = set()

    def spread() -> bool:
        seen.update(body.rsplit("|", 1)[0] for body in _answers(port, 16))
        return enough(seen)

    wait_for(spread, 30, lambda: f"answers from more than one loop thread: {sorted(seen)}")
    return seen


def _per_loop(err: str) -> list[int]:
    match = re.search(r"requests per loop thread: ([\d, ]+)", err)
    assert match, err
    return [int(n) for n in match.group(1).split(",")]


def _loop_names(seen: set[str]) -> set[str]:
    return {who.split("|")[0] for who in seen if who.startswith("cymongoose-loop-")}


@pytest.mark.parametrize(("app", "loops"), [("ft_apps:raw", 2), ("ft_apps:fastapi_app", 4)])
def test_raw_and_asgi_requests_are_answered_on_several_loop_threads(
        tmp_path: Path, app: str, loops: int) -> None:
    """The raw handler and the ASGI app run on their loop's own thread: its name says which."""
    cli, port = _serve(tmp_path, app, "--loop-threads", str(loops),
                       *(("--interface", "raw") if app.endswith("raw") else ()))
    names = _loop_names(_until_spread(port, lambda s: len(_loop_names(s)) >= 2))
    assert names <= {f"cymongoose-loop-{i}" for i in range(loops)}
    assert cli.stop() == 0, cli.err
    counts = _per_loop(cli.err)
    assert len(counts) == loops and sum(1 for n in counts if n) >= 2, cli.err


def test_a_flask_app_is_answered_by_the_app_threads_of_several_loops(tmp_path: Path) -> None:
    """With --threads 1 one loop runs its apps on two threads at most (its loop thread, which
    takes turns, and its one app thread): a third thread proves a second loop."""
    cli, port = _serve(tmp_path, "ft_apps:flask_app", "--loop-threads", "3", "--threads", "1")
    _until_spread(port, lambda s: len(s) >= 3)
    assert cli.stop() == 0, cli.err
    assert sum(1 for n in _per_loop(cli.err) if n) >= 2, cli.err
    assert "(WSGI, 1 app threads) on http://127.0.0.1" in cli.err


def test_a_stalled_loop_takes_no_new_connections_while_the_others_answer(
        tmp_path: Path) -> None:
    """Every loop accepts on the one listening socket, and a loop stuck in the app does not
    get back to accept(): new clients go to the loops that do. (Per-loop SO_REUSEPORT
    sockets would hash about half of them to the stuck loop's socket to wait there;
    docs/free-threading.md has the measurement.)"""
    cli, port = _serve(tmp_path, "ft_apps:stalling", "--loop-threads", "2")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        stalled = pool.submit(get, port, "/stall", (), 90)
        wait_for(lambda: any(tmp_path.glob("stalled-*")), 30, "a loop stalled in the app")
        stuck = next(tmp_path.glob("stalled-*")).name.removeprefix("stalled-")
        try:
            answered = {body.split("|")[0] for body in _answers(port, 24)}
            still_stalled = not stalled.done()
        finally:
            (tmp_path / "release").touch()
        assert stalled.result().status == 200
    assert still_stalled and answered and stuck not in answered, (stuck, answered)
    assert cli.stop() == 0, cli.err


def test_sigterm_drains_every_loop_and_the_requests_in_flight_finish(tmp_path: Path) -> None:
    cli, port = _serve(tmp_path, "ft_apps:wsgi", "--loop-threads", "2", "--threads", "2",
                       "--graceful-timeout", "20")
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        slow = [pool.submit(get, port, "/slow", (), 30) for _ in range(4)]
        wait_for(lambda: len(list(tmp_path.glob("started-*"))) == 4, 30,
                 "four slow requests started")
        cli.send(signal.SIGTERM)
        answers = [f.result() for f in slow]
    assert [a.status for a in answers] == [200] * 4
    assert cli.proc.wait(timeout=30) == 0  # (a second SIGTERM now would kill it: no stop())
    cli.stop()
    assert sum(_per_loop(cli.err)) == 4 + 1  # and the first answer


def test_the_drain_delay_fails_every_loops_health_path_while_they_serve_on(
        tmp_path: Path) -> None:
    """--drain-delay with --loop-threads: each loop's health path answers 503 at the signal
    (whichever loop a probe reaches), the app answers on with Connection: close, then the
    process stops by itself."""
    cli, port = _serve(tmp_path, "ft_apps:raw", "--interface", "raw", "--loop-threads", "2",
                       "--health-path", "/healthz", "--drain-delay", "2")
    # The port answers 503 while the app loads: the signal comes once every loop serves.
    wait_for(lambda: get(port, "/healthz").status == 200, 60, "the loops to be ready")
    cli.send(signal.SIGTERM)
    wait_for(lambda: get(port, "/healthz").status == 503, 20, "the health path to fail")
    probes = [get(port, "/healthz").status for _ in range(8)]  # fresh connections, any loop
    answer = get(port, "/")
    assert probes == [503] * 8
    assert answer.status == 200 and answer.header("connection") == "close"
    assert cli.proc.wait(timeout=30) == 0  # by itself, after the delay (stop() would signal)
    cli.stop()
    assert "serving on for --drain-delay 2 s" in cli.err, cli.err


def test_max_requests_counts_the_requests_of_every_loop(tmp_path: Path) -> None:
    """10 requests spread over two loops recycle the process; a count per loop would not
    reach 10 on either."""
    cli, port = _serve(tmp_path, "ft_apps:fastapi_app", "--loop-threads", "2",
                       "--max-requests", "12")  # the first answer is one of them
    first = get(port, "/").body.decode().rsplit("|", 1)[1]
    served: list[str] = []
    for _ in range(5):  # two at a time: 10 more, the 12th the last
        served += _answers(port, 2)
    assert len(_loop_names(set(served))) == 2, served
    pids = {body.rsplit("|", 1)[1] for body in served}
    assert pids == {first}, served
    # The probe waits for the replacement to start (its app imported): under make tsan's
    # instrumented interpreter that takes tens of seconds, where it takes one here.
    wait_for(lambda: get(port, "/", timeout=90).body.decode().rsplit("|", 1)[1] != first, 120,
             "an answer from the replacement worker")
    assert cli.stop() == 0, cli.err
    assert "reached --max-requests" in cli.err


def test_metrics_add_up_every_loops_counts(tmp_path: Path) -> None:
    metrics_port = free_port()
    cli, port = _serve(tmp_path, "ft_apps:raw", "--interface", "raw", "--loop-threads", "3",
                       "--metrics", "--metrics-port", str(metrics_port))
    served = _answers(port, 40)
    assert len(_loop_names(set(served))) >= 2, served
    total = 40 + 1  # and the first answer

    def counted() -> int:
        text = get(metrics_port, "/metrics").body.decode()
        return sum(int(n) for n in re.findall(r'^cymongoose_requests_total\{[^}]*\} (\d+)$',
                                              text, re.M))

    wait_for(lambda: counted() == total, 10, lambda: f"{total} requests counted, not "
             f"{counted()}")
    assert cli.stop() == 0, cli.err


def test_a_loop_thread_that_dies_takes_its_process_down(tmp_path: Path) -> None:
    cli, port = _serve(tmp_path, "ft_apps:raw", "--interface", "raw", "--loop-threads", "2")
    with pytest.raises((OSError, h11.RemoteProtocolError)):  # closed with its loop
        get(port, "/die", timeout=10)
    assert cli.proc.wait(timeout=30) == 1
    cli.stop()
    assert re.search(r"loop thread \d died \(SystemExit\('this loop thread dies'\)\): "
                     r"stopping the process", cli.err), cli.err
