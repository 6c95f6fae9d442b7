"""--drain-delay end to end: after SIGTERM the health path answers 503 at once while every
other request is still served (each answer closing its connection), for the delay; then
the usual drain. A second signal, a second or more after the first, skips the rest of the
delay; one that comes with the first (a process group's signal reaching a worker directly
and through its supervisor) does not. Each server kind, one process and --workers."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from support.cli_run import CLI, run_cli
from support.http_client import get
from support.ports import free_port
from support.waiting import wait_for

from cymongoose.serving.drain_delay import SAME_STOP_S, DelayedStop

pytestmark = pytest.mark.timeout(90)

ASGI_APP = '''\
async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            kind = (await receive())["type"]
            await send({"type": kind + ".complete"})
            if kind == "lifespan.shutdown":
                return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"asgi"})
'''

# The kinds of server behind the command line: APP and options (the backend of the proxy
# is a WSGI server the test starts first).
KINDS = {
    "wsgi": ["cli_app:app"],
    "asgi": ["drain_asgi:app"],
    "raw": ["cli_app:handler"],
    "proxy": [],
    "wsgi-workers": ["cli_app:app", "--workers", "2"],
}


def _start(tmp_path: Path, kind: str, port: int, *options: str) -> tuple[CLI, CLI | None]:
    (tmp_path / "drain_asgi.py").write_text(ASGI_APP)
    backend = None
    args = list(KINDS[kind])
    if kind == "proxy":
        backend_port = free_port()
        backend = CLI(tmp_path, "cli_app:app", "--port", str(backend_port))
        backend.wait_http(backend_port)
        args = ["--proxy", f"/=http://127.0.0.1:{backend_port}"]
    cli = CLI(tmp_path, *args, "--port", str(port), "--health-path", "/healthz", *options)
    try:
        if "--workers" in args:  # every worker, not just the first to answer
            cli.log_until(r"workers of \S+ ready")
        cli.wait_http(port, "/healthz")
        wait_for(lambda: get(port, "/healthz").status == 200, 30,
                 lambda: f'get(port, "/healthz").status == 200 ({cli.err})')
    except BaseException:
        cli.stop()
        if backend is not None:
            backend.stop()
        raise
    return cli, backend


def _all_draining(cli: CLI, kind: str, port: int) -> None:
    """Wait until every process of the server fails its health checks. With --workers the
    supervisor passes the signal on to each worker in turn, and either may take the next
    connection: each worker says so in its log once it fails them."""
    if "--workers" in KINDS[kind]:
        for _ in range(2):
            cli.log_until(r"serving on for --drain-delay")
    wait_for(lambda: get(port, "/healthz").status == 503, 10,
             lambda: f'get(port, "/healthz").status == 503 ({cli.err})')


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_delay_serves_on_with_the_health_path_failing(tmp_path: Path, kind: str) -> None:
    port = free_port()
    delay = 3.0
    cli, backend = _start(tmp_path, kind, port, "--drain-delay", str(delay))
    try:
        before = get(port, "/")
        assert before.status == 200 and before.header("connection") != "close"
        cli.send(signal.SIGTERM)
        signalled = time.monotonic()
        _all_draining(cli, kind, port)
        health = get(port, "/healthz")
        assert health.body == b"draining\n"
        # Until the delay is over, the app answers as before, and each answer ends its
        # connection: a client moves on while this server still serves. (The last request
        # starts a second before the drain, which a busy machine's request stays within.)
        answered = 0
        while time.monotonic() - signalled < delay - 1.0:
            during = get(port, "/")
            assert during.status == 200, (during.status, during.body)
            assert during.header("connection") == "close"
            answered += 1
        assert answered > 0
        cli.proc.wait(timeout=30)  # it ends by itself (stop() would signal again)
        assert time.monotonic() - signalled >= delay  # not before the delay was over
        assert cli.stop() == 0, cli.err
        assert "serving on for --drain-delay 3 s" in cli.err, cli.err
        assert "--drain-delay over: stopping" in cli.err, cli.err
    finally:
        cli.stop()
        if backend is not None:
            backend.stop()


@pytest.mark.parametrize("kind", ["wsgi", "asgi", "wsgi-workers"])
def test_a_second_signal_skips_the_rest_of_the_delay(tmp_path: Path, kind: str) -> None:
    port = free_port()
    cli, _ = _start(tmp_path, kind, port, "--drain-delay", "60", "--graceful-timeout", "60")
    try:
        cli.send(signal.SIGTERM)
        _all_draining(cli, kind, port)
        # The supervisor passes its own stop on to the workers: that is one request to stop,
        # however many signals a worker counts.
        time.sleep(SAME_STOP_S + 0.1)  # a second signal counts only after this
        again = time.monotonic()
        cli.send(signal.SIGTERM)
        assert cli.stop(timeout=30) == 0, cli.err
        assert time.monotonic() - again < 20  # well within the 60 s delay
        assert "again: skipping the rest of --drain-delay" in cli.err, cli.err
        if kind == "wsgi-workers":
            # A signal to the supervisor reaches each worker once, then once more: no
            # worker took the supervisor's first relay for a second signal.
            assert cli.err.count("serving on for --drain-delay") == 2
    finally:
        cli.stop()


@pytest.mark.parametrize(("args", "line"), [
    (["--drain-delay", "-1"], "--drain-delay must be a number of seconds >= 0, not -1.0"),
    (["--drain-delay", "soon"], "--drain-delay must be a number of seconds >= 0, not 'soon'"),
    # A timer cannot wait for ever: infinity is refused like any other wrong number.
    (["--drain-delay", "inf"], "--drain-delay must be a number of seconds >= 0, not inf"),
    (["--graceful-timeout", "inf"],
     "--graceful-timeout must be a number of seconds >= 0, not inf"),
    (["--drain-delay", "40"], "--drain-delay must be at most --graceful-timeout (30 s), not 40"),
    (["--drain-delay", "5", "--graceful-timeout", "2"],
     "--drain-delay must be at most --graceful-timeout (2 s), not 5"),
])
def test_a_wrong_drain_delay_is_one_line_and_exit_2(tmp_path: Path, args: list[str],
                                                    line: str) -> None:
    done = run_cli(tmp_path, "cli_app:app", "--port", str(free_port()), *args)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"cymongoose: {line}"]


def test_the_variable_sets_the_delay_and_is_checked_like_the_flag(tmp_path: Path) -> None:
    from support.cli_run import cli_env

    done = run_cli(tmp_path, "cli_app:app", "--port", str(free_port()),
                   env=cli_env(CYMONGOOSE_DRAIN_DELAY="3600"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "cymongoose: CYMONGOOSE_DRAIN_DELAY must be at most --graceful-timeout (30 s), not "
        "3600"]


class _Timers:
    """call_later for DelayedStop that runs nothing by itself: the test fires it."""

    def __init__(self) -> None:
        self.armed: list[tuple[float, object]] = []
        self.cancelled = 0

    def __call__(self, seconds: float, fn: object) -> _Timers:
        self.armed.append((seconds, fn))
        return self

    def cancel(self) -> None:
        self.cancelled += 1


def test_delayed_stop_rules() -> None:
    calls: list[str] = []
    timers = _Timers()
    stops = DelayedStop(lambda: calls.append("stop"), delay=5.0,
                        unready=lambda: calls.append("unready"), call_later=timers)
    stops.signal("SIGTERM")
    assert calls == ["unready"] and [s for s, _ in timers.armed] == [5.0]
    stops.signal("SIGTERM")  # at once: the same request to stop
    assert calls == ["unready"]
    _, fire = timers.armed[0]
    fire()  # type: ignore[operator]
    assert calls == ["unready", "stop"]
    fire()  # type: ignore[operator]
    assert calls == ["unready", "stop"]  # stop() runs once

    # Without a delay: the first signal stops; unready() is the stop's own business.
    calls.clear()
    now = DelayedStop(lambda: calls.append("stop"), delay=0.0,
                      unready=lambda: calls.append("unready"), call_later=timers)
    now.signal("SIGINT")
    assert calls == ["stop"]

    # cancel(): the server stopped some other way, the timer goes and nothing fires.
    calls.clear()
    timers = _Timers()
    later = DelayedStop(lambda: calls.append("stop"), delay=5.0, unready=lambda: None,
                        call_later=timers)
    later.signal("SIGTERM")
    later.cancel()
    assert timers.cancelled == 1
    timers.armed[0][1]()  # type: ignore[operator]
    assert calls == []
