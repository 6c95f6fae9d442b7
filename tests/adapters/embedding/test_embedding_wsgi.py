"""cymongoose.Server with a WSGI app or a raw handler, and its blocking run(): serve()
awaited in a running loop serves them on the server's own thread (the app never blocks the
caller's loop), run() owns its loop and process, SIGTERM included."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import httpx
import pytest
from support.embedding_apps import HoldingWSGI, RecordingASGI
from support.event_loops import LOOP_KINDS, Ticker, run_on
from support.gunicorn_server import TESTS_DIR
from support.http_client import get
from support.ports import HOST, bound_listener, free_port
from support.waiting import wait_for, wait_until

from cymongoose import MG_EV_HTTP_MSG, Server
from cymongoose.config import Config

pytestmark = pytest.mark.timeout(60)

WAIT_S = 10.0


@pytest.mark.parametrize("loop_kind", LOOP_KINDS)
def test_a_wsgi_app_runs_off_the_callers_loop(loop_kind: str) -> None:
    app = HoldingWSGI()

    async def main() -> None:

        ticker = Ticker()
        sock = bound_listener()
        port = sock.getsockname()[1]
        server = Server(Config(), app=app)
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        await wait_until(lambda: server.started or serving.done(), WAIT_S, "it to listen")
        async with httpx.AsyncClient(timeout=WAIT_S) as client:
            reply = await client.get(f"http://{HOST}:{port}/")
            assert reply.status_code == 200
            assert reply.text != threading.current_thread().name  # not the loop's thread
            slow = asyncio.ensure_future(client.get(f"http://{HOST}:{port}/slow"))
            await wait_until(app.entered.is_set, WAIT_S, "the app to block")
            # The app blocks its thread; the caller's loop goes on.
            before = ticker.ticks
            await wait_until(lambda: ticker.ticks > before + 3, WAIT_S, "the ticker to tick")
            server.should_exit = True
            await wait_until(lambda: not slow.done() and sock.fileno() == -1, WAIT_S,
                             "the server to start stopping")
            assert not serving.done()  # the drain waits for the request in flight
            app.release.set()
            assert (await slow).status_code == 200
        await asyncio.wait_for(serving, WAIT_S)
        ticker.task.cancel()

    run_on(loop_kind, main)


def test_a_raw_handler_runs_off_the_callers_loop() -> None:
    threads: list[str] = []

    def handler(conn: Any, ev: int, data: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            threads.append(threading.current_thread().name)
            conn.reply(200, b"raw")

    async def main() -> None:
        sock = bound_listener()
        port = sock.getsockname()[1]
        server = Server(Config(), app=handler)
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        await wait_until(lambda: server.started or serving.done(), WAIT_S, "it to listen")
        async with httpx.AsyncClient(timeout=WAIT_S) as client:
            assert (await client.get(f"http://{HOST}:{port}/")).text == "raw"
        await asyncio.wait_for(server.shutdown(), WAIT_S)
        assert serving.done()

    run_on("asyncio", main)
    assert threads == ["cymongoose-raw"]


def test_run_serves_a_wsgi_app_until_should_exit() -> None:
    port = free_port()
    server = Server(Config(host=HOST, port=port), app=HoldingWSGI())
    answers: list[int] = []

    def client() -> None:
        wait_for(lambda: server.started, WAIT_S, "run() to listen")
        answers.append(get(port, "/").status)
        server.should_exit = True  # from another thread

    thread = threading.Thread(target=client)
    thread.start()
    server.run()
    thread.join(WAIT_S)
    assert answers == [200]


def _run_in_a_child(port: int, options: str = "") -> subprocess.Popen[bytes]:
    """A program whose main thread calls Server(...).run() on lifespan_app at `port` (more
    Config keywords in `options`), then prints "run returned"; its output is one pipe."""
    code = ("from cymongoose import Server\n"
            "from cymongoose.config import Config\n"
            "Server(Config(app='support.embedding_apps:lifespan_app', "
            f"port={port}{options})).run()\n"
            "print('run returned', flush=True)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH")) if p))
    return subprocess.Popen([sys.executable, "-c", code], cwd=TESTS_DIR, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_run_stops_on_sigterm_after_the_lifespan_shutdown() -> None:
    port = free_port()
    proc = _run_in_a_child(port)
    try:
        wait_for(lambda: _answers(proc, port, "/") == 200, 20, "the child to serve",
                 interval=0.05)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0, out
    lines = out.decode().splitlines()
    assert [line for line in lines if not line.startswith("cymongoose")] == [
        "lifespan startup", "lifespan shutdown", "run returned"], out


def test_run_honours_the_drain_delay_on_sigterm() -> None:
    """run() owns the process's signals, so --drain-delay applies: the health path fails
    at once, the app answers on (each answer closing its connection), then it stops."""
    port = free_port()
    proc = _run_in_a_child(port, ", health_path='/healthz', drain_delay=1.5")
    try:
        wait_for(lambda: _answers(proc, port, "/healthz") == 200, 20, "the child to be ready",
                 interval=0.05)
        proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        wait_for(lambda: _answers(proc, port, "/healthz") == 503, 10,
                 "the health path to fail", interval=0.05)
        during = get(port, "/")
        assert during.body == b"ok" and during.header("connection") == "close"
        out, _ = proc.communicate(timeout=20)
        assert time.monotonic() - signalled >= 1.5  # not before the delay was over
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0, out
    # (The log line saying so goes to the program's logging, not configured here.)
    assert out.decode().splitlines() == ["lifespan startup", "lifespan shutdown",
                                         "run returned"], out


def _answers(proc: subprocess.Popen[bytes], port: int, path: str) -> int:
    """The status of a GET of `path`, 0 when nothing answers; fails once `proc` exited."""
    if proc.poll() is not None:
        raise AssertionError(f"it exited: {proc.stdout.read()!r}")  # type: ignore[union-attr]
    try:
        return get(port, path).status
    except OSError:
        return 0


def test_run_with_an_asgi_app_honours_should_exit_too() -> None:
    app = RecordingASGI()
    sock = bound_listener()
    server = Server(Config(), app=app)
    stopper = threading.Thread(target=lambda: (
        wait_for(lambda: server.started, WAIT_S, "run() to listen"),
        setattr(server, "should_exit", True)))
    def programs_own(signum: int, frame: object) -> None:
        pass

    before = signal.signal(signal.SIGTERM, programs_own)
    try:
        stopper.start()
        server.run(sockets=[sock])
        stopper.join(WAIT_S)
        # run() gave the signals back: the program's SIGTERM handler, Python's SIGINT one.
        assert signal.getsignal(signal.SIGTERM) is programs_own
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGTERM, before)
    assert app.events == ["startup", "shutdown"]
