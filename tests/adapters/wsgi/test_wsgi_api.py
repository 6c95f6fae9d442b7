"""Our server's own API (no reference): app import strings and factories, workers/threads,
stop() from another thread, run() in the main thread stopping on SIGINT/SIGTERM, serve()."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from typing import Any

import pytest
from support.app_state import wait_app_state
from support.gunicorn_server import TESTS_DIR
from support.http_client import HttpConnection, get
from support.ports import free_port
from support.subprocess_env import child_env
from support.waiting import wait_for
from support.wsgi_server import running_wsgi_server


def test_app_as_import_string(our_server: Any) -> None:
    served = our_server("support.wsgi_apps:app", pass_object=False)
    assert get(served.port, "/hello").body == b"hello"


@pytest.mark.parametrize("ref", ["support.wsgi_apps:make_app", "object"])
def test_factory(resource_check: None, ref: str) -> None:
    from support.wsgi_apps import make_app
    app: Any = make_app if ref == "object" else ref
    with running_wsgi_server(app, server_kwargs={"factory": True}) as running:
        assert get(running.port, "/hello").body == b"hello"


def _concurrency(port: int, n: int) -> float:
    """Time for n concurrent 0.5 s requests."""
    conns = [HttpConnection(port) for _ in range(n)]
    start = time.monotonic()
    try:
        for c in conns:
            c.send_request("GET", "/sleep?s=0.5")
        for c in conns:
            assert c.read_response().body == b"slept"
    finally:
        for c in conns:
            c.close()
    return time.monotonic() - start


def test_workers_is_the_number_of_app_threads(resource_check: None) -> None:
    from support.wsgi_apps import app

    from cymongoose.wsgi import WSGIServer

    srv = WSGIServer(app, workers=3)
    conn = srv.listen("http://127.0.0.1:0")
    port = conn.local_addr[1]
    t = threading.Thread(target=srv.run, kwargs={"poll_ms": 20})
    t.start()
    try:
        assert _concurrency(port, 3) < 0.95  # three at once
        assert _concurrency(port, 4) > 0.95  # the fourth waits for a thread
    finally:
        srv.stop()
        t.join(10)
        srv.close()
    assert not t.is_alive()


def test_threads_wins_over_workers(resource_check: None) -> None:
    from support.wsgi_apps import app
    with running_wsgi_server(app, threads=2, server_kwargs={"workers": 8}) as running:
        assert _concurrency(running.port, 3) > 0.95


def test_stop_lets_in_flight_requests_finish(resource_check: None) -> None:
    from support.wsgi_apps import app
    with running_wsgi_server(app) as running:
        with HttpConnection(running.port) as c:
            token = uuid.uuid4().hex
            c.send_request("GET", f"/sleep?s=0.5&token={token}")
            wait_app_state(running.port, token, "sleeping")  # the request is in the app
            running.server.stop()
            assert c.read_response().body == b"slept"
        running.thread.join(5)
        assert not running.thread.is_alive()


def test_manager_property(our_server: Any) -> None:
    from cymongoose import Manager
    served = our_server()
    assert isinstance(served.server.manager, Manager)


RUN_MAIN = textwrap.dedent("""
    import sys
    from cymongoose.wsgi import WSGIServer
    from support.wsgi_apps import app
    srv = WSGIServer(app, threads=2)
    conn = srv.listen("http://127.0.0.1:0")
    print(conn.local_addr[1], flush=True)
    srv.run(poll_ms=50)
    print("run returned", flush=True)
""")

SERVE_MAIN = textwrap.dedent("""
    import sys
    from cymongoose.wsgi import serve
    from support.wsgi_apps import app
    print("starting", flush=True)
    serve(app, url="http://127.0.0.1:" + sys.argv[1], workers=2)
    print("run returned", flush=True)
""")


def _env() -> dict[str, str]:
    import os
    env = child_env(str(TESTS_DIR))
    # Our extension may be an ASan build: keep its preload for a child that imports it.
    for key in ("LD_PRELOAD", "ASAN_OPTIONS"):
        if key in os.environ:
            env[key] = os.environ[key]
    return env


def _wait_get(port: int, timeout: float = 10) -> bytes:
    def answer() -> bytes | None:
        try:
            return get(port, "/hello").body
        except OSError:
            return None

    got = wait_for(answer, timeout, f"an answer on {port}", interval=0.05)
    assert got is not None
    return got


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_run_in_main_thread_stops_on_signal(sig: signal.Signals) -> None:
    proc = subprocess.Popen([sys.executable, "-c", RUN_MAIN], cwd=TESTS_DIR, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        assert _wait_get(port) == b"hello"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert b"run returned" in out, err.decode(errors="replace")[-2000:]


def test_serve_blocks_and_serves() -> None:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", SERVE_MAIN, str(port)], cwd=TESTS_DIR,
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert _wait_get(port) == b"hello"
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
