"""Fixtures and plugins only: managers that are always closed, polling server threads, the
installed-wheel check. Helpers live in the `support` package (waits in support.waiting)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import signal
import sys
import sysconfig
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cli_run import end_leftovers
from support.poll_thread import ServerThread
from support.routes import Route, Routes

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
    # CYMONGOOSE_TEST_LOOP=uvloop (make test-poll's second half): every asyncio loop the
    # suites make themselves (asyncio.run, asyncio.new_event_loop) is uvloop's. The command
    # line's ASGI servers run on uvloop whenever it is installed, whatever this says.
    if os.environ.get("CYMONGOOSE_TEST_LOOP", "asyncio") == "uvloop":
        import asyncio

        import uvloop
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
        # uvloop's first loop opens two process-wide descriptors for good: open them now,
        # before a test counts the descriptors it must leave as it found them.
        asyncio.new_event_loop().close()
    elif os.environ.get("CYMONGOOSE_TEST_LOOP", "asyncio") != "asyncio":
        raise pytest.UsageError("CYMONGOOSE_TEST_LOOP is asyncio or uvloop")
    # `make test-py313t` runs the suites with the GIL off: make sure it is, with cymongoose
    # and every test dependency imported (an extension that does not declare itself safe
    # turns the GIL back on as it is imported), so a pass means a pass without the GIL.
    if os.environ.get("CYMONGOOSE_EXPECT_GIL") == "off":
        if not sysconfig.get_config_var("Py_GIL_DISABLED"):
            raise pytest.UsageError("CYMONGOOSE_EXPECT_GIL=off on a Python built with a GIL")
        if sys._is_gil_enabled():
            raise pytest.UsageError("CYMONGOOSE_EXPECT_GIL=off, but the GIL is on")
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


@pytest.fixture(scope="session", autouse=True)
def _no_server_outlives_the_suite() -> Iterator[None]:
    """A `cymongoose` command a test left running (it failed, or pytest-timeout ended it,
    before its stop()) is stopped when the suite ends, not left serving after it. Not after
    each test: module-scoped fixtures share one server between their tests."""
    yield
    end_leftovers()


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
