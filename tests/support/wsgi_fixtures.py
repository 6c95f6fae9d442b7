"""Fixtures of the WSGI suite, loaded by tests/conftest.py as a plugin (a second conftest.py
would shadow the root one as module `conftest`). Every generic case runs against our
WSGIServer and against the reference server (gunicorn, gthread workers, in a subprocess);
our runs also check that file descriptors and threads return to their baseline."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from support.gunicorn_server import GunicornServer
from support.resources import fd_count, thread_count, wait_back_to
from support.served import OURS, REFERENCE, Served
from support.wsgi_server import running_wsgi_server

GENERIC_APP = "support.wsgi_apps:app"

ServeApp = Callable[..., Served]


class GunicornPool:
    """Reference servers, one per distinct configuration, started on first use and kept for
    the session (starting gunicorn costs about a second)."""

    def __init__(self) -> None:
        self._servers: dict[tuple[str, int, str], GunicornServer] = {}

    def get(self, app: str, threads: int, root_path: str) -> GunicornServer:
        key = (app, threads, root_path)
        srv = self._servers.get(key)
        if srv is None or srv.proc is None or srv.proc.poll() is not None:
            srv = GunicornServer(app, threads=threads, root_path=root_path).start()
            self._servers[key] = srv
        return srv

    def close(self) -> None:
        for srv in self._servers.values():
            srv.stop()


@pytest.fixture(scope="session")
def gunicorn_pool() -> Iterator[GunicornPool]:
    pool = GunicornPool()
    yield pool
    pool.close()


@pytest.fixture
def resource_check() -> Iterator[None]:
    """Fails the test when, after its servers stopped, this process holds more file
    descriptors or threads than before it (after a short grace wait)."""
    fds, threads = fd_count(), thread_count()
    yield
    wait_back_to(fds, threads)


def _import(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    mod = __import__(module, fromlist=[attr])
    return getattr(mod, attr)


@pytest.fixture
def our_server(resource_check: None) -> Iterator[ServeApp]:
    """`our_server(app=..., threads=4, root_path="", **limits)` starts our WSGIServer; it is
    stopped and closed (and resources checked) when the test ends."""
    with ExitStack() as stack:
        def start(app: Any = GENERIC_APP, *, threads: int = 4, root_path: str = "",
                  pass_object: bool = True, **limits: Any) -> Served:
            target = _import(app) if pass_object and isinstance(app, str) else app
            kwargs: dict[str, Any] = {"root_path": root_path} if root_path else {}
            running = stack.enter_context(
                running_wsgi_server(target, threads=threads, server_kwargs=kwargs, **limits))
            return Served(OURS, running.port, lambda: "self", running.server)
        yield start


@pytest.fixture
def reference_server(gunicorn_pool: GunicornPool) -> ServeApp:
    def start(app: str = GENERIC_APP, *, threads: int = 4, root_path: str = "",
              pass_object: bool = True, **limits: Any) -> Served:
        # gunicorn has no body-size limit to set; it needs spare threads for the cases
        # that block one, so it always gets at least 8.
        srv = gunicorn_pool.get(app, max(threads, 8), root_path)
        return Served(REFERENCE, srv.port, lambda: srv.worker_pids()[0])
    return start


@pytest.fixture(params=[OURS, REFERENCE])
def serve_app(request: pytest.FixtureRequest) -> ServeApp:
    """Parametrized over both servers: our WSGIServer and the gunicorn reference."""
    if request.param == OURS:
        return request.getfixturevalue("our_server")  # type: ignore[no-any-return]
    return request.getfixturevalue("reference_server")  # type: ignore[no-any-return]


@pytest.fixture
def served(serve_app: ServeApp) -> Served:
    """The generic app on both servers, default settings."""
    return serve_app()
