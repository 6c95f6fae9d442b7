"""Fixtures of the ASGI suite, loaded by tests/conftest.py as a plugin. Every generic case
runs against our ASGIServer and against uvicorn (the reference, in a subprocess); our runs
also check that the server's tasks, this process's file descriptors and its threads return
to their baseline."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from support.asgi_server import RunningASGI, UvicornServer, running_asgi_server
from support.resources import fd_count, thread_count, wait_back_to
from support.served import OURS, REFERENCE, Served
from support.waiting import wait_for

RAW_APP = "support.asgi_apps:raw_app"

ServeASGI = Callable[..., Served]


def import_app(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    mod = __import__(module, fromlist=[attr])
    return getattr(mod, attr)


def _wait_tasks_done(running: RunningASGI, timeout: float = 5.0) -> None:
    """Wait for the server's request tasks to end; fails saying how many still run."""
    wait_for(lambda: running.task_count() == 0, timeout,
             lambda: f"the request tasks to end ({running.task_count()} still running)")


class UvicornPool:
    """Reference servers, one per app, started on first use and kept for the session."""

    def __init__(self) -> None:
        self._servers: dict[str, UvicornServer] = {}

    def get(self, app: str) -> UvicornServer:
        srv = self._servers.get(app)
        if srv is None or srv.proc is None or srv.proc.poll() is not None:
            srv = UvicornServer(app).start()
            self._servers[app] = srv
        return srv

    def close(self) -> None:
        for srv in self._servers.values():
            srv.stop()


@pytest.fixture(scope="session")
def uvicorn_pool() -> Iterator[UvicornPool]:
    pool = UvicornPool()
    yield pool
    pool.close()


@pytest.fixture
def our_asgi(request: pytest.FixtureRequest) -> Iterator[ServeASGI]:
    """`our_asgi(app=RAW_APP, **limits)` starts our ASGIServer in this process; at the end
    its tasks must be done, then it is stopped and the fds and threads must be back."""
    fds, threads = fd_count(), thread_count()
    with ExitStack() as stack:
        runs: list[RunningASGI] = []

        def start(app: Any = RAW_APP, *, uvloop: bool = False,
                  server_kwargs: dict[str, Any] | None = None, **limits: Any) -> Served:
            target = import_app(app) if isinstance(app, str) else app
            running = stack.enter_context(
                running_asgi_server(target, uvloop=uvloop, server_kwargs=server_kwargs,
                                    **limits))
            runs.append(running)
            return Served(OURS, running.port, lambda: "self", running)

        yield start
        for running in runs:
            _wait_tasks_done(running)
    wait_back_to(fds, threads)


@pytest.fixture
def reference_asgi(uvicorn_pool: UvicornPool) -> ServeASGI:
    def start(app: str = RAW_APP, **ignored: Any) -> Served:
        srv = uvicorn_pool.get(app)
        pid = srv.proc.pid if srv.proc is not None else 0
        return Served(REFERENCE, srv.port, lambda: pid)
    return start


@pytest.fixture(params=[OURS, REFERENCE])
def serve_asgi(request: pytest.FixtureRequest) -> ServeASGI:
    """Parametrized over both servers: our ASGIServer and the uvicorn reference."""
    if request.param == OURS:
        return request.getfixturevalue("our_asgi")  # type: ignore[no-any-return]
    return request.getfixturevalue("reference_asgi")  # type: ignore[no-any-return]


@pytest.fixture
def asgi_served(serve_asgi: ServeASGI) -> Served:
    """The raw app on both servers, default settings."""
    return serve_asgi()
