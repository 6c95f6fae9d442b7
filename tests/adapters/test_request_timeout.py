"""The request deadline (request_timeout) the same for WSGIServer and ASGIServer: 504 for an
app that started no response in time while other requests are served, logged as a warning
and in the access log; a started response is never cut. What differs is in
wsgi/test_wsgi_request_timeout.py (the abandoned thread) and
asgi/test_asgi_request_timeout.py (WebSockets). The command line's --request-timeout is
tested in tests/adapters/cli/test_operations.py (a subprocess: not under ASan)."""

from __future__ import annotations

import logging

import pytest
from support.http_client import HttpConnection, get
from support.stuck_apps import StuckASGI, in_background, serving_stuck
from support.waiting import wait_for

from cymongoose.access_log import AccessLog

KINDS = ["wsgi", "asgi"]


@pytest.mark.parametrize("kind", KINDS)
def test_stuck_app_gets_504_while_others_are_answered(
        kind: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with serving_stuck(kind, access_log=AccessLog()) as stuck:
        thread, out = in_background(stuck.port, "/stuck?answer")
        answered = 0
        while thread.is_alive():  # served meanwhile, on a fresh connection each time
            assert get(stuck.port, "/fast").body == b"fast"
            answered += 1
        assert answered >= 2
        resp = out[0]
        assert resp.status == 504 and resp.header("Connection") == "close"
        assert b"Gateway Timeout" in resp.body
        assert stuck.request_timeouts() == 1
        if stuck.wsgi is not None:
            # The app's thread is abandoned, and given back once the app returns.
            server = stuck.wsgi.server
            assert server.threads_abandoned == 1
            stuck.release()
            wait_for(lambda: server.threads_abandoned == 0, 5.0, "the thread given back")
            assert get(stuck.port, "/fast").body == b"fast"
        else:
            # The app's task is cancelled.
            assert isinstance(stuck.app, StuckASGI) and stuck.asgi is not None
            assert stuck.app.events == ["cancelled"]
            assert stuck.asgi.task_count() == 0
    errors = [r for r in caplog.records if r.name == "cymongoose.error"]
    assert [r.levelname for r in errors] == ["WARNING"], caplog.text
    warning = errors[0].getMessage()
    assert "GET /stuck?answer HTTP/1.1: no response after " in warning
    assert "(request_timeout 0.4 s)" in warning
    access = [r.getMessage() for r in caplog.records if r.name == "cymongoose.access"]
    assert any('"GET /stuck?answer HTTP/1.1" 504' in line for line in access), access


@pytest.mark.parametrize("kind", KINDS)
def test_started_response_is_not_cut(kind: str) -> None:
    with serving_stuck(kind) as stuck:
        with HttpConnection(stuck.port) as c:
            c.sock.sendall(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            seen = b""
            while b"first;" not in seen:
                seen += c.sock.recv(4096)
            # A request admitted later timing out shows the deadline has passed for this one.
            assert get(stuck.port, "/stuck?answer").status == 504
            stuck.release()
            while not seen.endswith(b"0\r\n\r\n"):
                seen += c.sock.recv(4096)
        assert seen.startswith(b"HTTP/1.1 200 OK") and b"rest" in seen
        assert stuck.request_timeouts() == 1
        if isinstance(stuck.app, StuckASGI):
            assert stuck.app.events == ["cancelled"]  # /stuck's, not /stream's
