"""Manager.metrics(): the counters the core keeps in C, checked against real clients (the
requests by status, the guard's refusals, the duration histogram, the gauges, the bytes of
buffered, streamed and sendfile bodies and of WebSockets), and their shared-memory form
(share_metrics, read_metrics, METRICS_SIZE); then cymongoose.metrics on snapshots: combine(),
settled() and the Prometheus document (render()). The HTTP/2 counts are checked against
real HTTP/2 clients in tests/http2."""

from __future__ import annotations

import http.client
import mmap
import os
import socket
import struct
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.poll_thread import ServerThread
from support.routes import read_to_eof
from support.waiting import wait_for
from websockets.sync.client import connect as ws_connect

from cymongoose import (
    DURATION_BOUNDS,
    METRICS_SIZE,
    MG_EV_HTTP_HDRS,
    MG_EV_HTTP_MSG,
    MG_EV_READ,
    MG_EV_WS_MSG,
    Connection,
    Manager,
    read_metrics,
)
from cymongoose.metrics import combine, render, settled

pytestmark = pytest.mark.timeout(30)

_FILE_SIZE = 300_000


def _metrics(st: ServerThread) -> dict[str, Any]:
    return st.call(st.manager.metrics)  # type: ignore[no-any-return]


def _settled(st: ServerThread, **want: Any) -> dict[str, Any]:
    """The metrics once every `want` item holds (the guard counts a response's end at its
    connection's next event, a moment after the client has it)."""
    got: dict[str, Any] = {}

    def check() -> bool:
        nonlocal got
        got = _metrics(st)
        return all(got[k] == v for k, v in want.items())

    wait_for(check, 5.0, lambda: f"metrics {want} (last seen {got})")
    return got


def _handler(path: Path) -> Any:
    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev != MG_EV_HTTP_MSG:
            return
        uri = data.uri
        if uri == "/hang":
            return  # never answered: the client gives up
        if uri == "/ws":
            conn.ws_upgrade(data)
        elif uri == "/file":
            fd = os.open(path, os.O_RDONLY)
            try:
                conn.http_begin(200, [("Content-Length", str(_FILE_SIZE))])
                conn.http_sendfile(fd)
                conn.http_end()
            finally:
                os.close(fd)
        elif uri == "/static":
            conn.serve_file(data, str(path))
        else:
            conn.reply({"/nf": 404, "/err": 500}.get(uri, 200), b"body")

    return handler


def _ws_echo(conn: Connection, ev: int, data: Any) -> None:
    if ev == MG_EV_WS_MSG:
        conn.ws_send(data.data)


@pytest.fixture
def served(server_thread: Any, tmp_path: Path) -> tuple[ServerThread, int]:
    path = tmp_path / "blob"
    path.write_bytes(os.urandom(_FILE_SIZE))
    handler = _handler(path)

    def both(conn: Connection, ev: int, data: Any) -> None:
        handler(conn, ev, data)
        _ws_echo(conn, ev, data)

    st = server_thread(both)
    port = st.listen()
    st.start()
    return st, port


def _get(port: int, *paths: str) -> list[tuple[int, bytes]]:
    """GET each path on one keep-alive connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    out = []
    for p in paths:
        conn.request("GET", p)
        r = conn.getresponse()
        out.append((r.status, r.read()))
    conn.close()
    return out


def test_counts_by_status_with_a_refusal(served: tuple[ServerThread, int]) -> None:
    st, port = served
    assert [s for s, _ in _get(port, "/", "/nf", "/err", "/")] == [200, 404, 500, 200]
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /a HTTP/1.1\r\nHost: a b\r\n\r\n")
        assert read_to_eof(s).startswith(b"HTTP/1.1 400 ")
    m = _settled(st, connections_open=0, in_flight=0)
    assert m["requests"] == {200: 2, 404: 1, 500: 1, 400: 1}
    assert m["refused"] == {400: 1}
    assert (m["requests_http2"], m["http2_connections_total"]) == ({}, 0)  # all HTTP/1.1
    # Refusals never reach a handler: the histogram holds the four delivered requests.
    assert len(m["duration_buckets"]) == len(DURATION_BOUNDS) + 1 == 16
    assert sum(m["duration_buckets"]) == 4
    assert 0 < m["duration_sum"] < 4 * 5.0
    assert m["connections_total"] == 2
    assert m["bytes_received"] > 4 * len("GET / HTTP/1.1\r\n\r\n")
    assert m["bytes_sent"] > 5 * len("HTTP/1.1 200 OK\r\n\r\n")
    assert m["websockets_total"] == 0


def test_streamed_body(server_thread: Any) -> None:
    body = os.urandom(200_000)

    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev in (MG_EV_HTTP_HDRS, MG_EV_READ) and conn.userdata is None \
                and conn.body_complete:
            conn.userdata = "answered"
            conn.reply(201, str(len(conn.body_read())).encode())

    st = server_thread(handler)
    port = st.listen(stream_body=True)
    st.start()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("POST", "/up", body=body)
    r = conn.getresponse()
    assert (r.status, r.read()) == (201, str(len(body)).encode())
    conn.close()
    m = _settled(st, connections_open=0)
    assert m["requests"] == {201: 1}
    assert m["in_flight"] == 0
    assert m["bytes_received"] > len(body)


@pytest.mark.parametrize("path", ["/file", "/static"])
def test_sendfile_bytes_are_counted(served: tuple[ServerThread, int], path: str) -> None:
    st, port = served
    [(status, data)] = _get(port, path)
    assert status == 200 and len(data) == _FILE_SIZE
    m = _settled(st, connections_open=0)
    assert m["requests"] == {200: 1}
    assert m["bytes_sent"] > _FILE_SIZE


def test_client_gone_mid_request_counts_as_status_0(served: tuple[ServerThread, int]) -> None:
    st, port = served
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /hang HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _settled(st, in_flight=1)["in_flight"] == 1
        # A reset, not a FIN: a half-closed client still gets what it is owed.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    m = _settled(st, in_flight=0, connections_open=0)
    assert m["requests"] == {0: 1}
    assert sum(m["duration_buckets"]) == 1


def test_websocket_upgrade(served: tuple[ServerThread, int]) -> None:
    st, port = served
    with ws_connect(f"ws://127.0.0.1:{port}/ws", open_timeout=5) as ws:
        m = _settled(st, websockets_open=1)
        # The 101 ends the request: an open WebSocket is not in flight.
        assert (m["websockets_total"], m["requests"], m["in_flight"]) == (1, {101: 1}, 0)
        before = m["bytes_received"], m["bytes_sent"]
        ws.send("x" * 5000)
        assert ws.recv(timeout=5) == "x" * 5000
        m = _settled(st)
        assert m["bytes_received"] - before[0] > 5000
        assert m["bytes_sent"] - before[1] > 5000
    m = _settled(st, websockets_open=0, connections_open=0)
    assert (m["websockets_total"], m["connections_total"]) == (1, 1)
    assert m["requests"] == {101: 1}


def test_shared_through_mmap(served: tuple[ServerThread, int]) -> None:
    st, port = served
    _get(port, "/")
    _settled(st, requests={200: 1}, connections_open=0)
    mm = mmap.mmap(-1, METRICS_SIZE)
    st.call(lambda: st.manager.share_metrics(mm))
    # The counts so far moved into the buffer; counting goes on there.
    assert read_metrics(mm)["requests"] == {200: 1}
    _get(port, "/nf")
    wait_for(lambda: read_metrics(mm)["requests"] == {200: 1, 404: 1}, 5.0,
             'read_metrics(mm)["requests"] == {200: 1, 404: 1}')
    assert read_metrics(mm) == _metrics(st)
    with pytest.raises(BufferError):
        mm.close()  # held by the Manager until it closes
    st.stop()
    assert st.manager.metrics() == read_metrics(mm)  # the final counts stay readable
    mm.close()  # released by close()


def test_bad_buffers_and_names() -> None:
    with Manager() as mgr:
        with pytest.raises(ValueError, match="METRICS_SIZE"):
            read_metrics(bytes(METRICS_SIZE - 1))
        with pytest.raises(ValueError, match="METRICS_SIZE"):
            mgr.share_metrics(bytearray(METRICS_SIZE + 8))
        with pytest.raises(ValueError, match="writable"):
            mgr.share_metrics(bytes(METRICS_SIZE))
        with pytest.raises(ValueError, match="request_timeouts"):
            mgr.add_metric("requests", 1)
        mgr.add_metric("request_timeouts", 2)
        mgr.add_metric("threads_abandoned", 3)
        mgr.add_metric("threads_abandoned", -1)
        m = mgr.metrics()
        assert (m["request_timeouts"], m["threads_abandoned"]) == (2, 2)
        assert m["requests"] == {} and read_metrics(bytes(METRICS_SIZE))["requests"] == {}


# A snapshot with HTTP/2 in it (statuses 200 and none on both protocols, 404 on HTTP/1.1
# only), and one as 0.2.x wrote it: no requests_http2, no http2_connections_*.
_MIXED = {"requests": {200: 7, 404: 2, 0: 2}, "requests_http2": {200: 3, 0: 1},
          "refused": {404: 1}, "duration_buckets": (1,) * 16, "duration_sum": 0.5,
          "connections_open": 2, "connections_total": 5, "http2_connections_open": 1,
          "http2_connections_total": 4}
_OLD = {"requests": {200: 2, 503: 1}, "refused": {503: 1}, "connections_total": 1}


def _requests_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("cymongoose_requests_total")]


def test_render_labels_requests_by_protocol() -> None:
    text = render(_MIXED, interface="raw")
    assert _requests_lines(text) == [
        'cymongoose_requests_total{interface="raw",protocol="1.1",status="none"} 1',
        'cymongoose_requests_total{interface="raw",protocol="2",status="none"} 1',
        'cymongoose_requests_total{interface="raw",protocol="1.1",status="200"} 4',
        'cymongoose_requests_total{interface="raw",protocol="2",status="200"} 3',
        'cymongoose_requests_total{interface="raw",protocol="1.1",status="404"} 2',
    ]
    for name, kind, value in (("http2_connections_open", "gauge", 1),
                              ("http2_connections_total", "counter", 4)):
        assert f"# TYPE cymongoose_{name} {kind}\ncymongoose_{name} {value}\n" in text
        assert f"# HELP cymongoose_{name} " in text
    # A valid document, as a Prometheus server reads it.
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["cymongoose_http2_connections"].type == "counter"
    assert families["cymongoose_http2_connections_open"].type == "gauge"


def test_render_of_a_snapshot_without_http2_counts_is_all_http11() -> None:
    text = render(_OLD, interface="wsgi")
    assert _requests_lines(text) == [
        'cymongoose_requests_total{interface="wsgi",protocol="1.1",status="200"} 2',
        'cymongoose_requests_total{interface="wsgi",protocol="1.1",status="503"} 1',
    ]
    assert "\ncymongoose_http2_connections_open 0\n" in text
    assert "\ncymongoose_http2_connections_total 0\n" in text


def test_combine_adds_http2_counts_and_settled_drops_its_gauge() -> None:
    total = combine([_MIXED, _OLD, settled(_MIXED)])
    assert total["requests"] == {200: 16, 404: 4, 0: 4, 503: 1}
    assert total["requests_http2"] == {200: 6, 0: 2}
    assert (total["http2_connections_total"], total["http2_connections_open"]) == (8, 1)
    assert (total["connections_total"], total["connections_open"]) == (11, 2)
    gone = settled(_MIXED)
    assert (gone["http2_connections_total"], gone["http2_connections_open"]) == (4, 0)
    assert gone["requests_http2"] == _MIXED["requests_http2"]
    assert combine([])["requests_http2"] == {}
