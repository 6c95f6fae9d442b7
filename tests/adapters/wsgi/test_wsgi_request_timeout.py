"""The request deadline of WSGIServer (request_timeout): 504 for an app that started no
response in time, its thread abandoned and replaced (bounded), what it does next dropped,
and the other requests served meanwhile. The command line's --request-timeout is tested in
tests/adapters/cli/test_operations.py (a subprocess: not under ASan)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from support.http_client import HttpConnection, Response, get
from support.wsgi_server import RunningServer, running_wsgi_server

from cymongoose.access_log import AccessLog
from cymongoose.errors import ClientDisconnected

TIMEOUT = 0.4


def wait_for(done: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


class StuckApp:
    """/stuck?<what> waits for `release`, then does <what>: answer, write, raise or return
    an iterable; /stream starts its response at once and finishes after `release`; anything
    else is answered at once. `events` records what the app saw."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.events: list[str] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        path, what = environ["PATH_INFO"], environ["QUERY_STRING"]
        if path == "/stream":
            write = start_response("200 OK", [("Content-Type", "text/plain")])
            write(b"first;")
            self.release.wait(10)
            return [b"rest"]
        if path != "/stuck":
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"fast"]
        self.release.wait(10)
        try:
            write = start_response("200 OK", [("Content-Type", "text/plain")])
            if what == "write":
                write(b"late")
            elif what == "raise":
                raise ValueError("late failure")
            elif what == "iterable":
                return self._body()
            return [b"late"]
        except ClientDisconnected:
            self.events.append("write refused")
            raise
        finally:
            self.events.append("returned")

    def _body(self) -> _Body:
        return _Body(self.events)


class _Body:
    """An app's iterable that records its close()."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def __iter__(self) -> Iterator[bytes]:
        yield b"late"

    def close(self) -> None:
        self.events.append("closed")


@contextmanager
def serving(app: StuckApp, threads: int = 2, **kwargs: Any) -> Iterator[RunningServer]:
    with running_wsgi_server(app, threads=threads,
                             server_kwargs={"request_timeout": TIMEOUT, **kwargs}) as running:
        try:
            yield running
        finally:
            app.release.set()  # the stuck apps return before the server stops


def in_background(port: int, target: str) -> tuple[threading.Thread, list[Response]]:
    out: list[Response] = []
    thread = threading.Thread(target=lambda: out.append(get(port, target)), daemon=True)
    thread.start()
    return thread, out


def test_stuck_app_gets_504_while_others_are_answered(
        caplog: pytest.LogCaptureFixture) -> None:
    app = StuckApp()
    caplog.set_level(logging.INFO)
    with serving(app, access_log=AccessLog()) as running:
        server = running.server
        thread, out = in_background(running.port, "/stuck?answer")
        answered = 0
        while thread.is_alive():  # served meanwhile, on a fresh connection each time
            assert get(running.port, "/fast").body == b"fast"
            answered += 1
        assert answered >= 2
        resp = out[0]
        assert resp.status == 504 and resp.header("Connection") == "close"
        assert b"Gateway Timeout" in resp.body
        assert (server.request_timeouts, server.threads_abandoned) == (1, 1)
        app.release.set()
        wait_for(lambda: server.threads_abandoned == 0)
        assert get(running.port, "/fast").body == b"fast"
    warning = [r.getMessage() for r in caplog.records if r.name == "cymongoose.error"]
    assert len(warning) == 1 and "GET /stuck?answer HTTP/1.1" in warning[0]
    assert "no response after " in warning[0] and "(request_timeout 0.4 s)" in warning[0]
    access = [r.getMessage() for r in caplog.records if r.name == "cymongoose.access"]
    assert any('"GET /stuck?answer HTTP/1.1" 504' in line for line in access), access


@pytest.mark.parametrize("what", ["write", "raise", "iterable"])
def test_abandoned_app_output_is_dropped_quietly(
        what: str, caplog: pytest.LogCaptureFixture) -> None:
    app = StuckApp()
    caplog.set_level(logging.INFO, "cymongoose.error")
    with serving(app) as running:
        with HttpConnection(running.port) as c:
            c.request("GET", "/fast")  # a keep-alive connection of its own, left alone
            assert get(running.port, f"/stuck?{what}").status == 504
            app.release.set()
            wait_for(lambda: running.server.threads_abandoned == 0)
            assert c.request("GET", "/fast").body == b"fast"
    expected = {"write": ["write refused", "returned"], "raise": ["returned"],
                "iterable": ["returned", "closed"]}[what]
    assert app.events == expected
    assert [r.levelname for r in caplog.records] == ["WARNING"], caplog.text


def test_abandoned_threads_are_bounded(caplog: pytest.LogCaptureFixture) -> None:
    app = StuckApp()
    caplog.set_level(logging.WARNING, "cymongoose.error")
    with serving(app, threads=1) as running:
        server = running.server
        first, out1 = in_background(running.port, "/stuck?answer")
        wait_for(lambda: server.threads_abandoned == 1)
        second, out2 = in_background(running.port, "/stuck?answer")
        first.join(5)
        second.join(5)
        assert [out1[0].status, out2[0].status] == [504, 504]
        assert server.threads_abandoned == 1  # the bound: the second kept its slot
        # Both slots are held by stuck apps: a request queues, and times out unrun.
        assert get(running.port, "/fast").status == 504
        app.release.set()
        wait_for(lambda: server.threads_abandoned == 0)
        assert get(running.port, "/fast").body == b"fast"
        assert server.request_timeouts == 3
    messages = [r.getMessage() for r in caplog.records]
    assert sum("the most allowed" in m for m in messages) == 1, messages
    assert any("its app never ran" in m for m in messages), messages


def test_started_response_is_not_cut() -> None:
    app = StuckApp()
    with serving(app) as running:
        with HttpConnection(running.port) as c:
            c.sock.sendall(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            seen = b""
            while b"first;" not in seen:
                seen += c.sock.recv(4096)
            # A request admitted later timing out shows the deadline has passed for this one.
            assert get(running.port, "/stuck?answer").status == 504
            app.release.set()
            while not seen.endswith(b"0\r\n\r\n"):
                seen += c.sock.recv(4096)
        assert seen.startswith(b"HTTP/1.1 200 OK") and b"rest" in seen
        assert running.server.request_timeouts == 1
