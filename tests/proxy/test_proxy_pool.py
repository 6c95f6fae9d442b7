"""The upstream connection pool: reuse, its size, backends that close idle connections,
retries only where a request cannot have been acted on twice, and balancing."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest
from support.http_client import HttpConnection
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(30)


def later(up: Any, ms: int) -> Any:
    """An answer given `ms` after the request arrived (the upstream stays responsive)."""
    def answer(conn: Any, msg: Any) -> None:
        text = f"{up.name} {msg.uri}\n"
        up.thread.manager.timer_add(ms, lambda: conn.reply(200, text))
    return answer


def test_sequential_requests_share_one_upstream_connection(upstream: Any, proxy: Any) -> None:
    up = upstream()
    p = proxy({"/": up.url})
    for _ in range(3):  # three clients, one after the other
        with HttpConnection(p.port) as client:
            for i in range(10):
                assert client.request("GET", f"/r{i}").status == 200
    assert up.accepted == 1
    stats = p.stats()[0]
    assert (stats["opened"], stats["requests"], stats["idle"]) == (1, 30, 1)


def test_requests_beyond_the_pool_wait_for_a_connection(upstream: Any, proxy: Any) -> None:
    up = upstream()
    up.answers["/slow"] = later(up, 30)
    p = proxy({"/": up.url}, pool_size=2)
    statuses: list[int] = []

    def client() -> None:
        with HttpConnection(p.port, timeout=10) as c:
            for _ in range(3):
                statuses.append(c.request("GET", "/slow").status)

    threads = [threading.Thread(target=client) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert statuses == [200] * 18
    assert up.accepted <= 2
    assert p.stats()[0]["opened"] <= 2


def test_a_backend_closing_idle_connections_costs_no_request(upstream: Any,
                                                             proxy: Any) -> None:
    # The backend's keep-alive timeout (150 ms) is shorter than the pool's idle timeout: each
    # pooled connection is closed by the backend before the next request wants it.
    up = upstream(limits={"keepalive_timeout_ms": 150})
    p = proxy({"/": up.url}, idle_timeout=30)
    with HttpConnection(p.port) as client:
        for i in range(6):
            method = "POST" if i % 2 else "GET"
            assert client.request(method, f"/k{i}", body=b"b" if i % 2 else b"").status == 200
            closed = up.accepted
            wait_for(lambda: p.stats()[0]["open"] == 0, 5,
                     'p.stats()[0]["open"] == 0')  # the backend closed it
            assert up.accepted == closed
    assert [s.target for s in up.seen] == [f"/k{i}" for i in range(6)]  # each once
    assert up.accepted == 6


def test_a_post_whose_request_went_out_is_never_replayed(raw_upstream: Any,
                                                         proxy: Any) -> None:
    # The backend reads the request, then closes without an answer: it may have acted on it.
    up = raw_upstream(lambda head: b"", read_body=4)
    p = proxy({"/": up.url})
    with HttpConnection(p.port) as client:
        resp = client.request("POST", "/order", body=b"buy!")
        assert resp.status == 502
    assert len(up.requests) == 1


def test_an_idempotent_request_is_retried_once_on_a_fresh_connection(raw_upstream: Any,
                                                                     proxy: Any) -> None:
    # The answer says "close": the next request cannot find this connection in the pool.
    answers = [b"", b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"]
    up = raw_upstream(lambda head: answers.pop(0) if answers else b"")
    p = proxy({"/": up.url})
    with HttpConnection(p.port) as client:
        assert client.request("GET", "/again").body == b"ok"
        assert len(up.requests) == 2 and up.accepted == 2
        # Failing on the fresh connection too: one retry only, then 502.
        assert client.request("GET", "/again").status == 502
    assert len(up.requests) == 4


def test_round_robin_goes_on_when_one_upstream_is_killed(upstream: Any, proxy: Any) -> None:
    one, two = upstream("one"), upstream("two")
    p = proxy({"/": [one.url, two.url]}, max_fails=1)
    with HttpConnection(p.port) as client:
        names = [client.request("GET", "/rr").body.split()[0] for _ in range(4)]
        assert names == [b"one", b"two", b"one", b"two"]
    two.stop()  # its listener and pooled connection go
    with HttpConnection(p.port) as client:
        for _ in range(10):
            resp = client.request("GET", "/rr")
            assert (resp.status, resp.body.split()[0]) == (200, b"one")
    assert [s["up"] for s in p.stats()] == [True, False]


def test_least_conn_sends_requests_to_the_idle_upstream(upstream: Any, proxy: Any) -> None:
    one, two = upstream("one"), upstream("two")
    for up in (one, two):
        up.answers["/slow"] = later(up, 2000)
    p = proxy({"/": [one.url, two.url]}, lb="least_conn")
    slow = HttpConnection(p.port, timeout=10)
    try:
        slow.send_request("GET", "/slow")
        wait_for(lambda: sum(s["busy"] for s in p.stats()) == 1, 5,
                 'sum(s["busy"] for s in p.stats()) == 1')
        busy = [s["busy"] for s in p.stats()].index(1)
        with HttpConnection(p.port) as client:
            names = {client.request("GET", "/fast").body.split()[0] for _ in range(4)}
        assert names == {(b"two", b"one")[busy]}
    finally:
        slow.close()


def test_a_name_that_resolves_anew_moves_the_traffic(upstream: Any, proxy: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from cymongoose.proxy import resolver

    old, new = upstream("old"), upstream("new")
    moved = f"tcp://127.0.0.1:{new.port}"
    monkeypatch.setattr(resolver, "resolve", lambda upstream: moved)  # the name moved
    p = proxy({"/": f"http://localhost:{old.port}"}, resolve_interval=0.05)

    def answered_by() -> bytes:
        with HttpConnection(p.port) as client:
            return client.request("GET", "/who").body.split()[0]

    wait_for(lambda: answered_by() == b"new", 10, 'answered_by() == b"new"')


def test_a_client_that_leaves_costs_no_upstream_connection(upstream: Any, proxy: Any) -> None:
    up = upstream()
    up.answers["/big"] = lambda conn, msg: conn.reply(200, b"b" * 100_000)
    up.answers["/slow"] = later(up, 300)
    p = proxy({"/": up.url}, pool_size=1)
    # Mid-response: the rest of a small response is read and thrown away, and the
    # connection goes back to the pool.
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", p.port)) as sock:
            sock.sendall(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n")
            assert sock.recv(64).startswith(b"HTTP/1.1 200 OK")
    wait_for(lambda: p.stats()[0]["idle"] == 1, 5, 'p.stats()[0]["idle"] == 1')
    # Queued for the one connection: a client that leaves is never sent upstream.
    with HttpConnection(p.port, timeout=10) as slow:
        slow.send_request("GET", "/slow")
        wait_for(lambda: p.stats()[0]["busy"] == 1, 5, 'p.stats()[0]["busy"] == 1')
        with socket.create_connection(("127.0.0.1", p.port)) as gone:
            gone.sendall(b"GET /gone HTTP/1.1\r\nHost: t\r\n\r\n")
            wait_for(lambda: p.stats()[0]["waiting"] == 1, 5, 'p.stats()[0]["waiting"] == 1')
        wait_for(lambda: p.stats()[0]["waiting"] == 0, 5, 'p.stats()[0]["waiting"] == 0')
        assert slow.read_response().status == 200
    with HttpConnection(p.port) as client:
        assert client.request("GET", "/after").status == 200
    assert [s.target for s in up.seen] == ["/big"] * 3 + ["/slow", "/after"]
    assert up.accepted == 1
