"""Apps that compute: with the GIL off (free-threaded CPython) and CPUs to spare, the loop's
owner hands apps that run for long to the app threads, which run them at once
(WSGILoop.run_batch, wsgi/server.py's _apps_can_run_at_once); with the GIL they stay on the
owner, where threads would only take turns."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

import pytest
from support.http_client import get
from support.waiting import wait_for
from support.wsgi_server import running_wsgi_server

GIL_OFF = not getattr(sys, "_is_gil_enabled", lambda: True)()
CPUS = len(os.sched_getaffinity(0))


class _Overlap:
    """How many apps ran at once, at most."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now = 0
        self.most = 0

    def __enter__(self) -> None:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)

    def __exit__(self, *exc: Any) -> None:
        with self._lock:
            self.now -= 1


def _computing_app(overlap: _Overlap) -> Any:
    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        with overlap:
            end = time.perf_counter() + 0.002  # 2 ms on the CPU, no wait
            while time.perf_counter() < end:
                pass
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
        return [b"ok"]
    return app


@pytest.mark.skipif(not GIL_OFF or CPUS < 2,
                    reason="needs the GIL off (free-threaded CPython) and 2 CPUs or more")
def test_apps_that_compute_run_on_several_threads_at_once_with_the_gil_off() -> None:
    overlap = _Overlap()
    with running_wsgi_server(_computing_app(overlap), threads=4) as running:
        loop_side = running.server._loop_side
        wait_for(lambda: loop_side.apps_in_parallel, 10, "run() to judge the interpreter")
        stop = threading.Event()
        statuses: list[int] = []

        def client() -> None:
            while not stop.is_set() and len(statuses) < 2000:
                statuses.append(get(running.port, "/", timeout=30).status)

        clients = [threading.Thread(target=client) for _ in range(4)]
        for c in clients:
            c.start()
        try:
            deadline = time.monotonic() + 20
            while overlap.most < 2 and time.monotonic() < deadline and len(statuses) < 2000:
                time.sleep(0.01)
        finally:
            stop.set()
            for c in clients:
                c.join(30)
    assert overlap.most >= 2, f"{len(statuses)} requests, never two apps at once"
    assert set(statuses) == {200}


@pytest.mark.skipif(GIL_OFF, reason="the GIL is off here")
def test_with_the_gil_apps_that_compute_are_not_handed_to_threads_for_it() -> None:
    with running_wsgi_server(_computing_app(_Overlap()), threads=4) as running:
        assert get(running.port, "/").status == 200  # run() has judged the interpreter
        assert not running.server._loop_side.apps_in_parallel
