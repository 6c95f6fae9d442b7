"""App errors and app messages that break the protocol: a logged 500 before the response
started, a closed connection after; never a malformed response, and the server goes on."""

from __future__ import annotations

import logging
import socket

import h11
import pytest
from support.asgi_fixtures import ServeASGI
from support.http_client import HttpConnection, IncompleteResponse, raw_request
from support.served import Served
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(60)

BEFORE_START = ["/raise-before", "/unknown-type", "/body-before-start", "/str-body",
                "/crlf-header", "/nul-header", "/cl-more", "/no-response"]


@pytest.mark.parametrize("target", BEFORE_START)
def test_broken_before_the_response_is_a_500(asgi_served: Served, target: str) -> None:
    # Ours answers 500. uvicorn closes the connection for the messages h11 refuses (a str
    # body, CR/LF/NUL in a header, too long a body), after a head already sent for some:
    # the case this suite shows it gets wrong. Never a malformed response (h11 reads it).
    with HttpConnection(asgi_served.port) as c:
        try:
            resp = c.request("GET", target)
        except (IncompleteResponse, h11.RemoteProtocolError) as exc:
            assert not asgi_served.ours, exc
        else:
            assert resp.status == 500
            assert "injected" not in dict(resp.headers)
    with HttpConnection(asgi_served.port) as c:  # the server goes on
        assert c.request("GET", "/_ctl/ping").body == b"pong"


@pytest.mark.parametrize("target", ["/raise-after", "/cl-less"])
def test_broken_after_the_response_started_closes(asgi_served: Served, target: str) -> None:
    with HttpConnection(asgi_served.port) as c:
        with pytest.raises(IncompleteResponse):
            c.request("GET", target)
    with HttpConnection(asgi_served.port) as c:
        assert c.request("GET", "/_ctl/ping").body == b"pong"


def test_errors_are_logged_on_cymongoose_error(our_asgi: ServeASGI,
                                               caplog: pytest.LogCaptureFixture) -> None:
    served = our_asgi()
    with caplog.at_level(logging.ERROR, logger="cymongoose.error"):
        for target in ("/raise-before", "/crlf-header", "/raise-after", "/no-response"):
            with HttpConnection(served.port) as c:
                try:
                    c.request("GET", target)
                except IncompleteResponse:
                    pass
        wait_for(lambda: len(caplog.records) >= 4, 5,
                 lambda: f"4 error records ({len(caplog.records)} seen)")
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "/raise-before" in text and "/crlf-header" in text
    assert "/raise-after" in text and "/no-response" in text
    assert all(r.name == "cymongoose.error" for r in caplog.records)


def test_error_handler_receives_app_exceptions(our_asgi: ServeASGI) -> None:
    seen: list[BaseException] = []
    served = our_asgi(server_kwargs={"error_handler": seen.append})
    with HttpConnection(served.port) as c:
        assert c.request("GET", "/raise-before").status == 500
    assert [str(e) for e in seen] == ["boom before the response"]


def test_malformed_requests_get_4xx_and_the_server_goes_on(asgi_served: Served) -> None:
    for bad in (b"GET / HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n",
                b"GET /\x01 HTTP/1.1\r\nHost: x\r\n\r\n",
                b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"):
        with socket.create_connection(("127.0.0.1", asgi_served.port), timeout=5) as sock:
            sock.sendall(bad)
            data = sock.recv(4096)
            assert data.startswith(b"HTTP/1.1 4"), data
    with HttpConnection(asgi_served.port) as c:
        assert c.request("GET", "/_ctl/ping").body == b"pong"


def test_clients_vanishing_mid_request_leave_nothing_behind(our_asgi: ServeASGI) -> None:
    # Half a body, then gone; a request whose app waits for the disconnect; a streamed
    # response abandoned. The fixture checks tasks, fds and threads afterwards.
    served = our_asgi()
    for _ in range(20):
        with socket.create_connection(("127.0.0.1", served.port)) as sock:
            sock.sendall(raw_request("POST", "/echo", [("Content-Length", "100000")],
                                     b"x" * 5000))
        with socket.create_connection(("127.0.0.1", served.port)) as sock:
            sock.sendall(raw_request("GET", "/stream?size=50000000&chunk=65536"))
            sock.recv(1000)
    with HttpConnection(served.port) as c:
        assert c.request("GET", "/_ctl/ping").body == b"pong"
