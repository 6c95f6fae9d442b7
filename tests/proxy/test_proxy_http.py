"""HTTP through the reverse proxy (RFC 9110 §7.6): what reaches the upstream and what comes
back to the client, read by a strict client (h11)."""

from __future__ import annotations

from typing import Any

import pytest
from support.http_client import HttpConnection
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(30)


def test_requests_reach_the_routes_upstream_and_the_rest_the_app(upstream: Any,
                                                                 proxy: Any) -> None:
    api, one = upstream("api"), upstream("one")
    p = proxy({"/api": api.url, "/one": f"{one.url}/v1"})
    with HttpConnection(p.port) as client:
        assert client.request("GET", "/api/x?a=1").body == b"api GET /api/x?a=1\n"
        assert client.request("GET", "/api").body == b"api GET /api\n"
        assert client.request("GET", "/apix").status == 404  # not the /api route
        # The upstream URL's path replaces the route's prefix.
        assert client.request("GET", "/one/z?q").body == b"one GET /v1/z?q\n"
        assert client.request("GET", "/one").body == b"one GET /v1\n"
        assert client.request("GET", "/other").body == b"app 404\n"
    assert [s.target for s in api.seen] == ["/api/x?a=1", "/api"]


def test_hop_by_hop_fields_are_removed_both_ways(upstream: Any, proxy: Any) -> None:
    def answer(conn: Any, msg: Any) -> None:
        conn.reply(200, "ok", headers={
            "Keep-Alive": "timeout=5", "Connection": "X-Private, keep-alive",
            "X-Private": "secret", "Proxy-Authenticate": "Basic", "X-Kept": "yes"})

    up = upstream(answers={"/h": answer})
    p = proxy({"/": up.url})
    with HttpConnection(p.port) as client:
        resp = client.request("GET", "/h", headers=[
            ("Connection", "X-Hop"), ("X-Hop", "1"), ("Keep-Alive", "timeout=9"),
            ("TE", "trailers"), ("Proxy-Authorization", "Basic eDp5"), ("X-End", "2"),
            ("Upgrade", "h2c"), ("Expect", "100-continue")])
        assert resp.status == 200 and resp.body == b"ok"
        assert resp.header("x-kept") == "yes"
        for gone in ("keep-alive", "x-private", "proxy-authenticate"):
            assert resp.header(gone) is None, gone
        assert resp.header("connection") in (None, "keep-alive")
    seen = up.seen[0]
    for gone in ("X-Hop", "Keep-Alive", "TE", "Proxy-Authorization", "Upgrade", "Expect"):
        assert seen.header(gone) is None, gone
    assert seen.header("X-End") == "2"
    assert seen.header("Connection") is None  # HTTP/1.1 to the upstream: persistent


def test_host_is_passed_unchanged_and_forwarded_fields_set(upstream: Any,
                                                           proxy: Any) -> None:
    up = upstream()
    p = proxy({"/": up.url}, via=True)
    with HttpConnection(p.port) as client:
        client.request("GET", "/a", headers=[("Host", "shop.example:8443")])
    seen = up.seen[0]
    assert seen.header("Host") == "shop.example:8443"
    assert seen.header("X-Forwarded-For") == "127.0.0.1"
    assert seen.header("X-Forwarded-Proto") == "http"
    assert seen.header("X-Forwarded-Host") == "shop.example:8443"
    assert seen.header("Via") == "1.1 cymongoose"


FORGED = [("X-Forwarded-For", "6.6.6.6"), ("X-Forwarded-Proto", "https"),
          ("X-Forwarded-Host", "evil.example"), ("Forwarded", "for=6.6.6.6"),
          ("X-Real-IP", "6.6.6.6"), ("X-Forwarded-Port", "1")]


@pytest.mark.parametrize(("trusted", "expected"), [
    ("10.0.0.0/8", {"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Proto": "http",
                    "X-Forwarded-Host": "h.example", "Forwarded": None, "X-Real-IP": None,
                    "X-Forwarded-Port": None}),
    ("127.0.0.1", {"X-Forwarded-For": "6.6.6.6, 127.0.0.1", "X-Forwarded-Proto": "https",
                   "X-Forwarded-Host": "evil.example", "Forwarded": "for=6.6.6.6",
                   "X-Real-IP": "6.6.6.6", "X-Forwarded-Port": "1"}),
], ids=["untrusted peer: dropped", "trusted peer: kept and appended to"])
def test_forwarded_fields_from_the_client(upstream: Any, proxy: Any, trusted: str,
                                          expected: dict[str, str | None]) -> None:
    up = upstream()
    p = proxy({"/": up.url}, forwarded_allow_ips=trusted)
    with HttpConnection(p.port) as client:
        client.request("GET", "/a", headers=[("Host", "h.example"), *FORGED])
    assert {name: up.seen[0].header(name) for name in expected} == expected


def test_bodies_with_a_length_and_chunked_reach_the_upstream(upstream: Any,
                                                             proxy: Any) -> None:
    up = upstream()
    p = proxy({"/": up.url})
    with HttpConnection(p.port) as client:
        assert client.request("POST", "/len", body=b"x" * 100_000).status == 200
        client.send_raw(b"POST /chunked HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
                        b"\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n")
        assert client.read_response("POST", "1.1").status == 200
        # Expect: 100-continue is answered by the proxy; the upstream never sees it.
        client.send_raw(b"PUT /expect HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n"
                        b"Expect: 100-continue\r\n\r\n")
        interim = client.sock.recv(64)
        assert interim.startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        client.send_raw(b"abc")
        assert client.read_response("PUT", "1.1").status == 200
    assert [(s.method, s.body) for s in up.seen] == [
        ("POST", b"x" * 100_000), ("POST", b"hello world"), ("PUT", b"abc")]
    assert up.seen[0].header("Content-Length") == "100000"
    assert up.seen[1].header("Transfer-Encoding") == "chunked"
    assert up.seen[1].header("X-Trailer") is None


def test_response_framings_reach_the_client(raw_upstream: Any, proxy: Any) -> None:
    replies = {
        b"/chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nT: 1\r\n\r\n",
        b"/close": b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the close",
        b"/http10": b"HTTP/1.0 200 OK\r\n\r\nold server",
        b"/nocontent": b"HTTP/1.1 204 No Content\r\n\r\n",
        b"/notmodified": b"HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n",
        b"/interim": b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n"
                     b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    }

    def reply(head: bytes) -> bytes:
        return replies[head.split(b" ")[1]]

    up = raw_upstream(reply)
    p = proxy({"/": up.url})
    with HttpConnection(p.port) as client:
        resp = client.request("GET", "/chunked")
        assert resp.body == b"abcde" and resp.header("transfer-encoding") == "chunked"
        resp = client.request("GET", "/close")  # re-chunked for an HTTP/1.1 client
        assert resp.body == b"until the close" and resp.header("transfer-encoding") == "chunked"
        assert client.request("GET", "/http10").body == b"old server"
        assert client.request("GET", "/nocontent").status == 204
        resp = client.request("GET", "/notmodified")
        assert resp.status == 304 and resp.body == b""
        assert client.request("GET", "/interim").body == b"ok"
        resp = client.request("HEAD", "/chunked")
        assert resp.status == 200 and resp.body == b""
    # An HTTP/1.0 client knows no chunks: the close ends its body.
    with HttpConnection(p.port) as client:
        client.send_raw(b"GET /chunked HTTP/1.0\r\n\r\n")
        resp = client.read_response(http_version="1.0")
        assert resp.body == b"abcde" and resp.header("transfer-encoding") is None


def test_pipelined_requests_are_answered_in_order(upstream: Any, proxy: Any) -> None:
    up = upstream()
    p = proxy({"/": up.url})
    with HttpConnection(p.port) as client:
        client.send_raw(b"".join(b"GET /p%d HTTP/1.1\r\nHost: t\r\n\r\n" % i for i in range(5)))
        bodies = [client.read_response("GET", "1.1").body for _ in range(5)]
    assert bodies == [b"up GET /p%d\n" % i for i in range(5)]


def test_a_chunked_body_over_max_body_size_is_a_413_and_never_completes_upstream(
        upstream: Any, proxy: Any) -> None:
    up = upstream()
    p = proxy({"/": up.url}, limits={"max_body_size": 1000})
    with HttpConnection(p.port) as client:
        client.send_raw(b"POST /big HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                        b"10\r\n" + b"x" * 16 + b"\r\n")
        wait_for(lambda: p.stats()[0]["busy"] == 1, 5,
                 'p.stats()[0]["busy"] == 1')  # the upstream has it
        client.send_raw(b"400\r\n" + b"x" * 1024 + b"\r\n0\r\n\r\n")
        resp = client.read_response("POST", "1.1")
        assert resp.status == 413
    assert up.seen == []  # the upstream's request was never completed, never answered
    assert p.stats()[0]["idle"] == 0
