"""The WSGI server wires the guard's options from its Config: health_path answers 200 once
run() serves and 503 from the moment it drains; limit_concurrency reaches the Manager;
WSGIServer.metrics() is the Manager's snapshot."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from support.http_client import get
from support.waiting import wait_for

from cymongoose.config import Config
from cymongoose.wsgi import WSGIServer

pytestmark = pytest.mark.timeout(30)


def test_ready_while_serving_then_draining() -> None:
    release = threading.Event()
    entered = threading.Event()

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ["PATH_INFO"] == "/slow":
            entered.set()
            release.wait(10)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"app"]

    srv = WSGIServer(app, config=Config(health_path="/healthz", limit_concurrency=5))
    port = srv.listen("http://127.0.0.1:0").local_addr[1]
    assert (srv.manager.limit_concurrency, srv.manager.ready) == (5, False)
    t = threading.Thread(target=srv.run, kwargs={"poll_ms": 20})
    t.start()
    slow: list[Any] = []
    try:
        wait_for(lambda: srv.manager.ready, 5.0, "srv.manager.ready")
        resp = get(port, "/healthz")
        assert (resp.status, resp.body) == (200, b"ok\n")
        assert get(port, "/").body == b"app"
        waiter = threading.Thread(target=lambda: slow.append(get(port, "/slow")))
        waiter.start()
        assert entered.wait(5)
        srv.stop()  # drains: the request in flight keeps the server up
        wait_for(lambda: not srv.manager.ready, 5.0, "not srv.manager.ready")
        release.set()
        waiter.join(10)
    finally:
        release.set()
        srv.stop()
        t.join(10)
    assert slow and slow[0].body == b"app"
    m = srv.metrics()
    assert m["requests"] == {200: 3}
    assert m["refused"] == {} and m["in_flight"] == 0
