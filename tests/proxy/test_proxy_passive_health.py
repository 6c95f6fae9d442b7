"""Passive health (max_fails failures take an upstream out for fail_timeout) never holds out
a route's last candidates: a route's only upstream, or every member of a route once all
are marked, is tried by each request, so a backend that restarts is served again the moment
it listens (nginx 1.22 never marks a sole server down). Only the active check holds a whole
route out (its 503 is in test_proxy_failures.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.backend_process import BackendProcess
from support.http_client import HttpConnection
from support.ports import HOST, free_port

pytestmark = pytest.mark.timeout(90)


def _status(port: int, target: str = "/x") -> int:
    with HttpConnection(port, timeout=20) as client:
        return client.request("GET", target).status


@pytest.fixture
def backend() -> Iterator[BackendProcess]:
    b = BackendProcess()
    yield b
    b.stop()


def test_a_restarted_sole_backend_is_served_as_soon_as_it_listens(
        backend: BackendProcess, proxy: Any) -> None:
    backend.start()
    # fail_timeout far longer than the test: the old rule's 503s could not end by themselves.
    p = proxy({"/": backend.url}, max_fails=3, fail_timeout=300)
    assert _status(p.port) == 200
    backend.stop()
    down = [_status(p.port) for _ in range(6)]
    marked = p.stats()[0]["up"] is False
    backend.start()  # returns once it accepts connections again
    back = [_status(p.port) for _ in range(20)]
    assert back.count(503) == 0 and back == [200] * 20, back
    assert down == [502] * 6  # refused each time, never held out as "down" (503)
    assert marked  # it was marked, as stats() showed, but still tried
    assert p.stats()[0]["up"] is True  # its answer ended the mark


def test_every_member_marked_down_is_tried_anyway(proxy: Any) -> None:
    first, second = BackendProcess(), BackendProcess()
    try:
        p = proxy({"/": [first.url, second.url]}, max_fails=1, fail_timeout=300)
        assert _status(p.port) == 502  # both tried, both refused
        assert [s["up"] for s in p.stats()] == [False, False]
        second.start()
        # (the first request may try `first` again on its way to `second`)
        assert [_status(p.port) for _ in range(4)] == [200] * 4
        assert [s["up"] for s in p.stats()] == [False, True]
        # With a usable member, the marked one is held out: every request goes to `second`.
        opened = p.stats()[0]["opened"]
        first.start()
        assert [_status(p.port) for _ in range(4)] == [200] * 4
        assert p.stats()[0]["opened"] == opened
    finally:
        first.stop()
        second.stop()


def test_the_routing_hooks_choice_is_tried_although_marked(backend: BackendProcess,
                                                          proxy: Any) -> None:
    other = f"http://{HOST}:{free_port()}"
    p = proxy(upstreams=[backend.url, other], max_fails=1, fail_timeout=300,
              route=lambda method, path, headers: backend.url)
    assert _status(p.port) == 502
    assert p.stats()[0]["up"] is False
    backend.start()
    assert [_status(p.port) for _ in range(3)] == [200] * 3
