"""Shared fixtures: managers that are always closed, a polling server thread, free ports."""

from __future__ import annotations

import importlib.metadata
import json
import os
import signal
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.poll_thread import PollThread
from support.routes import Route, Routes
from support.subprocess_env import child_env

import cymongoose
from cymongoose import Manager

# A shell without job control starts background commands with SIGINT ignored, and an
# ignored signal stays ignored in every child: the suite's SIGINT tests (and the servers
# they start) would then wait for a signal that never comes. Started that way, the suite
# puts Python's own handler back; its children then start with the default action.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

pytest_plugins = ["support.wsgi_fixtures", "support.asgi_fixtures", "support.proxy_fixtures"]

SOURCE_TREE = Path(__file__).resolve().parents[1] / "src"


def pytest_configure(config: pytest.Config) -> None:
    # `make test-installed` runs the suite against an installed wheel: make sure that is what
    # was imported, not the source tree or an editable install of it.
    if not os.environ.get("CYMONGOOSE_TEST_INSTALLED"):
        return
    origin = json.loads(importlib.metadata.distribution("cymongoose").read_text(
        "direct_url.json") or "{}")
    package = Path(cymongoose.__file__).resolve().parent
    if SOURCE_TREE in package.parents or not origin.get("url", "").endswith(".whl"):
        raise pytest.UsageError(f"CYMONGOOSE_TEST_INSTALLED is set, but cymongoose comes from "
                                f"{package} ({origin or 'no direct_url.json'}), not a wheel")


def pytest_report_header() -> str:
    return f"cymongoose {cymongoose.__version__}: {Path(cymongoose.__file__).parent}"


def tool_env() -> dict[str, str]:
    """Environment for external tools (curl, openssl, mosquitto, wrk...): without the
    AddressSanitizer preload that `make asan-test` sets for our extension, which would
    otherwise be injected into programs that are not built for it."""
    return child_env()


def poll_until(mgr: Manager, done: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Poll mgr in this thread until done() or timeout; returns done()."""
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        mgr.poll(10)
    return done()


def pump(mgr: Manager, cond: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll mgr until cond(); fail saying what was awaited if timeout passes first."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        mgr.poll(5)


def recv_polling(mgr: Manager, sock: socket.socket, want: bytes, timeout: float = 5.0) -> bytes:
    """Read from a non-blocking client socket while polling mgr in this thread, until the
    bytes read equal `want` or the timeout passes; returns what was read."""
    got = b""
    deadline = time.monotonic() + timeout
    while got != want and time.monotonic() < deadline:
        mgr.poll(5)
        try:
            got += sock.recv(65536)
        except BlockingIOError:
            pass
    return got


def wait_until(pred: Callable[[], object], timeout: float = 5.0) -> bool:
    """Sleep-poll pred() (for state a server thread updates); returns its last truth.
    pred() is called once per check: a predicate that acts (sends a probe, records what it
    saw) is not asked a second time after it said yes."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value or time.monotonic() >= deadline:
            return bool(value)
        time.sleep(0.005)


class ServerThread(PollThread):
    """A Manager made from these arguments, polled on a background thread (support.poll_thread);
    `errors` holds what ended the loop."""

    def __init__(self, handler: Any = None, **manager_kwargs: Any) -> None:
        super().__init__(Manager(handler, **manager_kwargs))
        self.errors = self.loop_errors

    def listen(self, url: str = "http://127.0.0.1:0", handler: Any = None, **kw: Any) -> int:
        conn = self.manager.listen(url, handler, **kw)
        return int(conn.local_addr[1])


@pytest.fixture
def manager() -> Iterator[Manager]:
    mgr = Manager()
    try:
        yield mgr
    finally:
        mgr.close()


@pytest.fixture
def server_thread() -> Iterator[Callable[..., ServerThread]]:
    started: list[ServerThread] = []

    def make(handler: Any = None, **kw: Any) -> ServerThread:
        st = ServerThread(handler, **kw)
        started.append(st)
        return st

    yield make
    for st in started:
        st.stop()


@pytest.fixture
def serve(server_thread: Any) -> Iterator[Callable[..., tuple[int, Routes]]]:
    """serve(routes, stream=True): a started server answering by URI (support.routes)."""
    def start(routes: dict[str, Route], stream: bool = True, **manager_kw: Any
              ) -> tuple[int, Routes]:
        handler = Routes(stream, routes)
        st = server_thread(handler, **manager_kw)
        handler.manager = st.manager
        port = st.listen(stream_body=stream)
        st.start()
        return port, handler

    yield start
