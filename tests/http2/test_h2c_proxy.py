"""The reverse proxy's client side over HTTP/2: a client with prior knowledge reaches
HTTP/1.1 upstreams through it, many streams of one connection at once, bodies both ways."""

from __future__ import annotations

from typing import Any

import pytest
from support.h2_peer import H2Peer

from cymongoose._mongoose import HTTP2_LIBRARY

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(HTTP2_LIBRARY is None, reason="built without HTTP/2")]

BODY = bytes(range(256)) * 1024  # 256 KiB


def test_streams_of_one_connection_proxied_to_http11_upstreams(upstream: Any,
                                                               proxy: Any) -> None:
    def echo(conn: Any, msg: Any) -> None:
        conn.reply(200, msg.body_bytes, headers={"X-Got": str(len(msg.body_bytes))})

    def big(conn: Any, msg: Any) -> None:
        conn.reply(200, BODY * 8)

    up = upstream(answers={"/api/echo": echo, "/api/big": big})
    p = proxy({"/api": up.url})
    with H2Peer(p.port) as peer:
        gets = [peer.request(f"/api/n{i}") for i in range(20)]
        post = peer.request("/api/echo", "POST", [("content-length", str(len(BODY)))],
                            end=False)
        peer.send_all(post, BODY)
        download = peer.request("/api/big")
        app = peer.request("/not-proxied")
        answers = peer.wait_answers(*gets, post, download, app, timeout=30)
    assert [a.body for a in answers[:20]] == [f"up GET /api/n{i}\n".encode() for i in range(20)]
    assert answers[20].body == BODY and answers[20].header(b"x-got") == str(len(BODY)).encode()
    assert answers[21].body == BODY * 8
    assert answers[22].status == 404
    # The upstream got HTTP/1.1 requests: the authority as Host, the forwarding fields set.
    seen = up.seen[0]
    assert seen.header("Host") == "localhost" and seen.header("X-Forwarded-Proto") == "http"
