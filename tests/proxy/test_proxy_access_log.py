"""Manager.proxy_log_handler: a proxied request's access-log record carries the request
line, the client's Referer and User-Agent and the time from its head to the response's end
(0.2.x reported it to refusal_handler with neither fields nor duration)."""

from __future__ import annotations

from typing import Any

import pytest
from support.http_client import HttpConnection
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(30)


def test_the_record_has_the_fields_and_the_duration(upstream: Any, proxy: Any) -> None:
    up = upstream()
    up.answers["/slow"] = lambda conn, msg: up.thread.manager.timer_add(
        200, lambda: conn.reply(200, "late\n"))
    p = proxy({"/": up.url})
    records: list[tuple[Any, ...]] = []
    p.thread.manager.proxy_log_handler = lambda conn, *rest: records.append(rest)
    with HttpConnection(p.port) as client:
        resp = client.request("GET", "/slow?x=1", headers=[("Referer", "http://r.example/"),
                                                          ("User-Agent", "agent/2")])
        assert resp.status == 200
        assert client.request("GET", "/fast").status == 200
    wait_for(lambda: len(records) == 2, 5, lambda: f"len(records) == 2 ({records})")
    (status, line, size, took, referer, agent), fast = records
    assert (status, line, size, referer, agent) == (
        200, "GET /slow?x=1 HTTP/1.1", 5, "http://r.example/", "agent/2")
    # The upstream's 200 ms timer counts whole milliseconds from the clock its loop read at
    # the start of a step (mg_timer_expired), so it may fire a little before 200 ms of real
    # time have passed (199.9 ms seen on the poll() build): the slow answer's duration, with
    # that slack, not the fast one's.
    assert 0.19 <= took < 10
    assert fast[:2] == (200, "GET /fast HTTP/1.1") and fast[4:] == (None, None)
    assert p.refusals == []  # refusal_handler no longer hears of proxied requests


def test_a_handler_that_is_not_callable_is_refused() -> None:
    from cymongoose import Manager

    with Manager() as mgr:
        with pytest.raises(TypeError, match="proxy_log_handler must be a callable"):
            mgr.proxy_log_handler = "log"  # type: ignore[assignment]
        mgr.proxy_log_handler = None
        assert mgr.proxy_log_handler is None
