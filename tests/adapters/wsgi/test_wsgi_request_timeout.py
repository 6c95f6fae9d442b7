"""The request deadline of WSGIServer (request_timeout) where it differs from ASGIServer's:
the app's thread is abandoned and replaced (bounded) and what the app does next is dropped.
The cases both servers share are in tests/adapters/test_request_timeout.py."""

from __future__ import annotations

import logging

import pytest
from support.http_client import HttpConnection, get
from support.stuck_apps import StuckWSGI, in_background, serving_wsgi
from support.waiting import wait_for


@pytest.mark.parametrize("what", ["write", "raise", "iterable"])
def test_abandoned_app_output_is_dropped_quietly(
        what: str, caplog: pytest.LogCaptureFixture) -> None:
    app = StuckWSGI()
    caplog.set_level(logging.INFO, "cymongoose.error")
    with serving_wsgi(app) as running:
        with HttpConnection(running.port) as c:
            c.request("GET", "/fast")  # a keep-alive connection of its own, left alone
            assert get(running.port, f"/stuck?{what}").status == 504
            app.release.set()
            wait_for(lambda: running.server.threads_abandoned == 0, 5.0,
                     "the abandoned thread given back")
            assert c.request("GET", "/fast").body == b"fast"
    expected = {"write": ["write refused", "returned"], "raise": ["returned"],
                "iterable": ["returned", "closed"]}[what]
    assert app.events == expected
    assert [r.levelname for r in caplog.records] == ["WARNING"], caplog.text


def test_abandoned_threads_are_bounded(caplog: pytest.LogCaptureFixture) -> None:
    app = StuckWSGI()
    caplog.set_level(logging.WARNING, "cymongoose.error")
    with serving_wsgi(app, threads=1) as running:
        server = running.server
        first, out1 = in_background(running.port, "/stuck?answer")
        wait_for(lambda: server.threads_abandoned == 1, 5.0, "the first thread abandoned")
        second, out2 = in_background(running.port, "/stuck?answer")
        first.join(5)
        second.join(5)
        assert [out1[0].status, out2[0].status] == [504, 504]
        assert server.threads_abandoned == 1  # the bound: the second kept its slot
        # Both slots are held by stuck apps: a request queues, and times out unrun.
        assert get(running.port, "/fast").status == 504
        app.release.set()
        wait_for(lambda: server.threads_abandoned == 0, 5.0, "the abandoned thread given back")
        assert get(running.port, "/fast").body == b"fast"
        assert server.request_timeouts == 3
    messages = [r.getMessage() for r in caplog.records]
    assert sum("the most allowed" in m for m in messages) == 1, messages
    assert any("its app never ran" in m for m in messages), messages
