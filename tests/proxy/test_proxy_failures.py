"""When no good response comes: 502 (refused, reset, malformed), 503 (every upstream out),
504 (no connection or no response head in time), each logged with its reason; a response
cut short is cut short for the client too; a bad request never reaches an upstream."""

from __future__ import annotations

import logging
import socket
import time
from typing import Any

import pytest
from support.http_client import HttpConnection, IncompleteResponse
from support.ports import HOST, free_port
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(30)


def test_a_refused_connection_is_a_502_with_its_reason_logged(
        proxy: Any, caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    p = proxy({"/": f"http://{HOST}:{port}"})
    with caplog.at_level(logging.WARNING, "cymongoose"):
        with HttpConnection(p.port) as client:
            resp = client.request("GET", "/x")
            assert (resp.status, resp.body) == (502, b"Bad Gateway\n")
            assert client.request("GET", "/y").status == 502  # the connection stays usable
    assert any("502" in r.getMessage() and "cannot connect" in r.getMessage()
               and "GET /x" in r.getMessage() for r in caplog.records), caplog.text
    assert p.refusals[0][:3] == (502, "proxied", "GET /x HTTP/1.1")


def test_no_response_head_within_the_read_timeout_is_a_504(raw_upstream: Any,
                                                           proxy: Any) -> None:
    up = raw_upstream(lambda head: None)  # reads the request, never answers
    p = proxy({"/": up.url}, read_timeout=0.3)
    with HttpConnection(p.port) as client:
        started = time.monotonic()
        resp = client.request("GET", "/silent")
        assert (resp.status, resp.body) == (504, b"Gateway Timeout\n")
        assert time.monotonic() - started >= 0.29


def test_no_connection_within_the_connect_timeout_is_a_504() -> None:
    # A listener with a backlog of 0 and one connection queued drops further SYNs: the
    # connect hangs, as to a host that does not answer.
    from support.proxy_rig import Proxy

    from cymongoose import ReverseProxy

    lsn = socket.socket()
    lsn.bind((HOST, 0))
    lsn.listen(0)
    filler = socket.create_connection(lsn.getsockname())
    p = Proxy(ReverseProxy({"/": f"http://{HOST}:{lsn.getsockname()[1]}"},
                           connect_timeout=0.3))
    try:
        with HttpConnection(p.port) as client:
            resp = client.request("GET", "/x")
            assert resp.status == 504
    finally:
        p.stop()
        filler.close()
        lsn.close()


def test_every_upstream_marked_down_is_still_tried(proxy: Any) -> None:
    # Passive marks never leave a route with nothing (test_proxy_passive_health.py): both
    # are tried again, and refuse again. Only the active check makes it a 503 (below).
    dead = [f"http://{HOST}:{free_port()}" for _ in range(2)]
    p = proxy({"/": dead}, max_fails=1, fail_timeout=30)
    with HttpConnection(p.port) as client:
        assert client.request("GET", "/a").status == 502  # both tried, both refused
        assert [s["up"] for s in p.stats()] == [False, False]
        resp = client.request("GET", "/b")
        assert (resp.status, resp.body) == (502, b"Bad Gateway\n")
    assert [s["opened"] for s in p.stats()] == [2, 2]


def test_an_upstream_failing_its_health_check_is_out_until_it_passes(upstream: Any,
                                                                     proxy: Any) -> None:
    healthy = [False]
    up = upstream()
    up.answers["/health"] = lambda conn, msg: conn.reply(200 if healthy[0] else 500, "h")
    p = proxy({"/": up.url}, health_path="/health", health_interval=0.05)
    wait_for(lambda: not p.stats()[0]["up"], 5, 'not p.stats()[0]["up"]')
    with HttpConnection(p.port) as client:
        assert client.request("GET", "/x").status == 503
    healthy[0] = True
    wait_for(lambda: p.stats()[0]["up"], 5, 'p.stats()[0]["up"]')
    with HttpConnection(p.port) as client:
        assert client.request("GET", "/x").status == 200


MALFORMED = {
    "status line": b"HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok",
    "not HTTP": b"SSH-2.0-OpenSSH_9.2\r\n\r\n",
    "conflicting lengths": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
    "length and chunked": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                          b"Transfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
    "bare LF": b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
    "folded field": b"HTTP/1.1 200 OK\r\nX-A: 1\r\n  2\r\nContent-Length: 2\r\n\r\nok",
    "control character": b"HTTP/1.1 200 OK\r\nX-A: a\x01b\r\nContent-Length: 2\r\n\r\nok",
    "oversized head": b"HTTP/1.1 200 OK\r\n" + b"X-Flood: " + b"a" * 70_000 + b"\r\n\r\n",
}


@pytest.mark.parametrize("reply", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_response_is_a_502_and_never_relayed(raw_upstream: Any, proxy: Any,
                                                         reply: bytes) -> None:
    up = raw_upstream(lambda head: reply, close_after=False)
    p = proxy({"/": up.url})
    with HttpConnection(p.port) as client:
        resp = client.request("GET", "/m")
        assert (resp.status, resp.body) == (502, b"Bad Gateway\n")
    assert p.stats()[0]["open"] == 0  # the upstream's connection is not pooled


def test_a_response_cut_short_is_cut_short_for_the_client(raw_upstream: Any,
                                                          proxy: Any) -> None:
    replies = {b"/length": b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b",
               b"/chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                            b"a\r\nonly ten b\r\n",
               b"/badchunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                             b"zz\r\noops\r\n"}
    up = raw_upstream(lambda head: replies[head.split(b" ")[1]])
    p = proxy({"/": up.url})
    for target in replies:
        with HttpConnection(p.port) as client:
            with pytest.raises(IncompleteResponse) as cut:
                client.request("GET", target.decode())
            assert cut.value.partial is not None and cut.value.partial.status == 200


def test_a_malformed_request_never_reaches_an_upstream(upstream: Any, proxy: Any) -> None:
    up = upstream()
    p = proxy({"/": up.url})
    with HttpConnection(p.port) as client:
        client.send_raw(b"GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
        assert client.read_response("GET", "1.1").status == 400
    with HttpConnection(p.port) as client:
        client.send_raw(b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                        b"zz\r\n")
        assert client.read_response("POST", "1.1").status == 400
    assert up.accepted == 0 and up.seen == []


def test_an_upstream_url_that_is_malformed_or_unresolvable_is_refused_at_start() -> None:
    from cymongoose import ReverseProxy

    for routes, words in (({"/": "ftp://x"}, "must start with http://"),
                          ({"api": "http://x"}, "PREFIX starting with '/'"),
                          ({"/": "http://nowhere.invalid"}, "cannot resolve"),
                          ({"/": "http://h:99999"}, "out of range")):
        with pytest.raises(ValueError, match=words):
            ReverseProxy(routes)
