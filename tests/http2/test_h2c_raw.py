"""HTTP/2 with prior knowledge (h2c) on a raw handler: each stream reaches the handler as a
connection of its own carrying one request, answered with the same calls as HTTP/1.1, while
HTTP/1.1 clients of the same port are served as before. Peers: curl, httpx and the `h2`
library (support.h2_peer)."""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import h2.settings
import httpx
import pytest
from support.h2_peer import PREFACE, H2Peer, frame
from support.subprocess_env import tool_env
from support.waiting import wait_for

from cymongoose import MG_EV_ACCEPT, MG_EV_CLOSE, MG_EV_HTTP_MSG, MG_EV_OPEN, Connection
from cymongoose._mongoose import HTTP2_LIBRARY

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(HTTP2_LIBRARY is None, reason="built without HTTP/2")]


class Site:
    """A raw handler answering by path, recording what it saw."""

    def __init__(self) -> None:
        self.protocols: list[str] = []
        self.opened = 0
        self.accepted = 0
        self.closed = 0
        self.held: list[Connection] = []  # answered later, from the poll thread
        self.errors: list[BaseException] = []

    def __call__(self, conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_OPEN:
            self.opened += 1
        elif ev == MG_EV_ACCEPT:
            self.accepted += 1
        elif ev == MG_EV_CLOSE:
            self.closed += 1
        if ev != MG_EV_HTTP_MSG:
            return
        self.protocols.append(msg.proto)
        path = msg.uri
        if path == "/echo":
            conn.reply(200, msg.body_bytes, headers={"X-Method": msg.method,
                                               "X-Cookie": msg.header("Cookie") or ""})
        elif path == "/big":
            conn.reply(200, b"0123456789abcdef" * 65536)  # 1 MiB: 16 windows' worth
        elif path == "/chunked":
            conn.http_begin(200, headers=[("Content-Type", "text/plain")])
            for i in range(50):
                conn.http_write(f"part {i}\n".encode())
            conn.http_end()
        elif path == "/trailers":
            conn.http_begin(200, headers=[("Content-Type", "application/grpc")])
            conn.http_write(b"\x00\x00\x00\x00\x02hi")
            conn.http_end(trailers=[("grpc-status", "0"), ("Grpc-Message", "fine")])
        elif path == "/hop":
            conn.reply(200, b"x", headers={"Connection": "close", "Keep-Alive": "5",
                                           "X-Mixed-Case": "Kept"})
        elif path == "/boom":
            raise RuntimeError("boom on one stream")
        elif path == "/close":
            conn.http_begin(200, headers=[("Content-Length", "100")])
            conn.http_write(b"only part")
            conn.close()
        elif path == "/ws":
            conn.ws_upgrade(msg)  # RuntimeError on a stream: a 500 for it
        elif path == "/later":
            self.held.append(conn)  # answered by answer_held() on the poll thread
        else:
            conn.reply(200, f"{msg.method} {path} {msg.proto}\n".encode())

    def answer_held(self) -> int:
        n = len(self.held)
        for conn in self.held:
            conn.reply(200, b"answered later")
        self.held.clear()
        return n


@pytest.fixture
def site(server_thread: Any) -> tuple[int, Site, Any]:
    handler = Site()
    st = server_thread(handler, error_handler=handler.errors.append)
    port = st.listen()
    st.start()
    return port, handler, st


def test_curl_prior_knowledge_and_http11_share_the_port(site: tuple[int, Site, Any]) -> None:
    port, handler, _ = site
    url = f"http://127.0.0.1:{port}/hello"
    out = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-w", "\n%{http_version}",
                          url], capture_output=True, text=True, timeout=20, check=True,
                         env=tool_env())
    assert out.stdout == "GET /hello HTTP/2.0\n\n2"
    out = subprocess.run(["curl", "-sS", "--http1.1", "-w", "\n%{http_version}", url],
                         capture_output=True, text=True, timeout=20, check=True,
                         env=tool_env())
    assert out.stdout == "GET /hello HTTP/1.1\n\n1.1"
    assert handler.protocols == ["HTTP/2.0", "HTTP/1.1"]


def test_many_streams_on_one_connection_each_get_their_own_answer(
        site: tuple[int, Site, Any]) -> None:
    port, handler, _ = site

    async def run() -> list[httpx.Response]:
        async with httpx.AsyncClient(http1=False, http2=True, timeout=20) as client:
            return list(await asyncio.gather(*(
                client.get(f"http://127.0.0.1:{port}/n{i}") for i in range(60))))

    responses = asyncio.run(run())
    assert [r.http_version for r in responses] == ["HTTP/2"] * 60
    assert [r.text for r in responses] == [f"GET /n{i} HTTP/2.0\n" for i in range(60)]
    # One TCP connection (accepted once) whose 60 streams opened as connections of their
    # own (besides the listener and that connection).
    assert handler.accepted == 1 and handler.opened == 62


def test_request_bodies_known_and_unknown_length_reach_the_handler(
        site: tuple[int, Site, Any]) -> None:
    port, _, _ = site
    body = bytes(range(256)) * 1200  # 300 KiB: more than one stream window
    with H2Peer(port) as peer:
        known = peer.request("/echo", "POST", [("content-length", str(len(body)))], end=False)
        peer.send_all(known, body)
        unknown = peer.request("/echo", "PUT", [("cookie", "a=1"), ("cookie", "b=2")],
                               end=False)
        peer.send_all(unknown, body)
        a, b = peer.wait_answers(known, unknown, timeout=30)
    assert (a.status, a.body, a.header(b"x-method")) == (200, body, b"POST")
    # The unknown length was framed chunked for the handler; RFC 9113 section 8.2.3:
    # cookie fields are joined with "; ".
    assert (b.status, b.body, b.header(b"x-method")) == (200, body, b"PUT")
    assert b.header(b"x-cookie") == b"a=1; b=2"


def test_large_and_chunked_responses_follow_the_clients_window(
        site: tuple[int, Site, Any]) -> None:
    port, _, _ = site
    with H2Peer(port) as peer:
        big = peer.request("/big")
        chunked = peer.request("/chunked")
        a, b = peer.wait_answers(big, chunked, timeout=30)
    assert a.status == 200 and a.body == b"0123456789abcdef" * 65536
    assert a.header(b"content-length") == b"1048576"
    assert b.body == b"".join(f"part {i}\n".encode() for i in range(50))
    assert b.header(b"transfer-encoding") is None


def test_large_bodies_arrive_whole_both_ways(server_thread: Any, tmp_path: Path) -> None:
    """24 MiB each way over one stream with curl: a reply() from memory (the send buffer
    drained from its front and compacted as it goes), a file (the file sender refilling as
    frames leave) and an upload echoed as its digest. The connection's send buffer fills
    past its mark on the way, so frames also wait for the socket."""
    size = 24 << 20
    blob = hashlib.sha256(b"seed").digest() * (size // 32)
    (tmp_path / "blob.bin").write_bytes(blob)
    digest = hashlib.sha256(blob).hexdigest()

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev != MG_EV_HTTP_MSG:
            return
        if msg.uri == "/memory":
            conn.reply(200, blob)
        elif msg.uri == "/file":
            conn.serve_file(msg, str(tmp_path / "blob.bin"))
        else:
            conn.reply(200, hashlib.sha256(msg.body_bytes).hexdigest().encode())

    st = server_thread(handler)
    port = st.listen(max_body_size=size + 1024)
    st.start()
    base = f"http://127.0.0.1:{port}"
    for path in ("/memory", "/file"):
        out = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", base + path],
                             capture_output=True, timeout=30, check=True, env=tool_env())
        assert len(out.stdout) == size and hashlib.sha256(out.stdout).hexdigest() == digest
    out = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-H", "Expect:",
                          "--data-binary", "@" + str(tmp_path / "blob.bin"), base + "/up"],
                         capture_output=True, text=True, timeout=30, check=True,
                         env=tool_env())
    assert out.stdout == digest


def test_a_reset_mid_download_leaves_the_connection_serving(server_thread: Any) -> None:
    """The client opens its windows wide and stops reading, so 8 MiB of DATA frames pile up
    (in the socket, in the connection's send buffer, one waiting to be written from the
    stream's), then resets the stream and asks again on the same connection: what was left
    of the reset stream is dropped and the next answer arrives whole."""
    big = bytes(range(256)) * (32 << 10)  # 8 MiB

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            conn.reply(200, big if msg.uri == "/big" else b"after the reset")

    st = server_thread(handler)
    port = st.listen()
    st.start()
    with H2Peer(port, settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 2**31 - 1}) as peer:
        peer.conn.increment_flow_control_window(2**30)
        peer.flush()
        sid = peer.request("/big")
        peer.wait(lambda p: p.answers[sid].status != 0, timeout=10)
        peer.reset(sid)
        again = peer.request("/small")
        (answer,) = peer.wait_answers(again, timeout=30)
    assert (answer.status, answer.body) == (200, b"after the reset")
    assert peer.answers[sid].status == 200 and len(peer.answers[sid].body) < len(big)


def test_a_connection_kept_after_its_stream_ended_cannot_answer_the_next(
        server_thread: Any) -> None:
    """An ended stream's memory serves the connection's next streams. The Connection a
    handler kept from an ended stream is closed: writing to it raises, and nothing of it
    reaches the next request's answer."""
    kept: list[Connection] = []
    refused: list[RuntimeError] = []
    closes: list[Connection] = []

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_CLOSE:
            closes.append(conn)
        if ev != MG_EV_HTTP_MSG:
            return
        if msg.uri == "/first":
            kept.append(conn)
            conn.reply(200, b"first")
            return
        try:
            kept[0].reply(200, b"stale")
        except RuntimeError as exc:
            refused.append(exc)
        conn.reply(200, b"second")

    st = server_thread(handler)
    port = st.listen()
    st.start()
    with H2Peer(port) as peer:
        (first,) = peer.wait_answers(peer.request("/first"))
        wait_for(lambda: any(c is kept[0] for c in closes), 10, "the first stream's close")
        (second,) = peer.wait_answers(peer.request("/second"))
    assert (first.body, second.body) == (b"first", b"second")
    assert len(refused) == 1


def test_head_and_hop_by_hop_fields(site: tuple[int, Site, Any]) -> None:
    port, _, _ = site
    with H2Peer(port) as peer:
        head = peer.request("/big", "HEAD")
        hop = peer.request("/hop")
        a, b = peer.wait_answers(head, hop)
    assert (a.status, a.body, a.header(b"content-length")) == (200, b"", b"1048576")
    names = [k for k, _ in b.headers]
    # RFC 9113 section 8.2.2: no connection-specific fields; names lower-case.
    assert b"connection" not in names and b"keep-alive" not in names
    assert b.header(b"x-mixed-case") == b"Kept" and b.body == b"x"


def test_an_exception_or_a_close_ends_only_its_own_stream(site: tuple[int, Site, Any]) -> None:
    port, _, _ = site
    with H2Peer(port) as peer:
        boom = peer.request("/boom")
        cut = peer.request("/close")
        fine = peer.request("/fine")
        a, b, c = peer.wait_answers(boom, cut, fine)
        assert a.status == 500
        # A body cut short cannot end cleanly: the stream is reset, as HTTP/1.1 would close.
        assert b.status == 200 and b.reset == 2 and b.body == b"only part"
        assert (c.status, c.body) == (200, b"GET /fine HTTP/2.0\n")
        again = peer.request("/again")
        (d,) = peer.wait_answers(again)
    assert d.body == b"GET /again HTTP/2.0\n"


def test_a_websocket_upgrade_on_a_stream_raises(site: tuple[int, Site, Any]) -> None:
    port, handler, _ = site
    with H2Peer(port) as peer:
        (a,) = peer.wait_answers(peer.request("/ws"))
    assert a.status == 500
    assert "not upgraded" in str(handler.errors[0])


def test_an_answer_given_later_from_the_loop_goes_out(site: tuple[int, Site, Any]) -> None:
    port, handler, st = site
    with H2Peer(port) as peer:
        sid = peer.request("/later")
        wait_for(lambda: st.call(lambda: len(handler.held)), 10, "the request held")
        # Written from outside any event of the stream (as a WSGI thread's answer is).
        assert st.call(handler.answer_held) == 1
        (a,) = peer.wait_answers(sid)
    assert (a.status, a.body) == (200, b"answered later")


def test_a_head_past_the_limit_is_431_on_its_stream(server_thread: Any) -> None:
    handler = Site()
    st = server_thread(handler)
    port = st.listen(max_header_size=1024)
    st.start()
    with H2Peer(port) as peer:
        big = peer.request("/x", headers=[("x-big", "v" * 3000)])
        ok = peer.request("/y")
        a, b = peer.wait_answers(big, ok)
    assert a.status == 431 and b.status == 200
    assert handler.protocols == ["HTTP/2.0"]  # the refused one never reached the handler


def test_http2_off_answers_the_preface_as_bad_http11(server_thread: Any) -> None:
    st = server_thread(Site())
    port = st.listen(http2=False)
    st.start()
    with H2Peer(port) as peer:
        peer.send_raw(b"")
        data = b""
        peer.sock.settimeout(10)
        while b"\r\n" not in data:
            chunk = peer.sock.recv(4096)
            if not chunk:
                break
            data += chunk
    assert data.startswith(b"HTTP/1.1 505 ")  # "PRI * HTTP/2.0" read as HTTP/1.1


def test_protocol_errors_get_goaway_and_the_server_serves_on(
        site: tuple[int, Site, Any]) -> None:
    port, _, _ = site
    # DATA on stream 0 is a connection error (RFC 9113 section 6.1).
    with H2Peer(port) as peer:
        peer.send_raw(frame(0, 0, 0, b"x"))
        peer.wait_closed()
        assert peer.goaway is not None and peer.goaway.error_code == 1
    # An upper-case field name is a malformed request: that stream is reset, not the rest.
    with H2Peer(port, validate=False) as peer:
        bad = peer.request("/bad", headers=[("X-Upper", "1")])
        good = peer.request("/good")
        a, b = peer.wait_answers(bad, good)
        assert a.reset == 1 and b.status == 200
    # A connection-specific field too (RFC 9113 section 8.2.2).
    with H2Peer(port, validate=False) as peer:
        bad = peer.request("/bad", headers=[("connection", "keep-alive")])
        (a,) = peer.wait_answers(bad)
        assert a.reset == 1
    assert PREFACE.startswith(b"PRI")


@pytest.mark.skipif(shutil.which("h2load") is None, reason="h2load (nghttp2-client) missing")
def test_h2load_many_streams_all_succeed(site: tuple[int, Site, Any]) -> None:
    port, _, _ = site
    out = subprocess.run(["h2load", "-n", "2000", "-c", "4", "-m", "20",
                          f"http://127.0.0.1:{port}/load"], capture_output=True, text=True,
                         timeout=60, check=True, env=tool_env())
    assert "2000 succeeded, 0 failed, 0 errored, 0 timeout" in out.stdout, out.stdout


def test_files_from_serve_file_and_serve_dir(server_thread: Any, tmp_path: Path) -> None:
    blob = bytes(range(251)) * 9000  # about 2.2 MiB: the file sender refills many times
    (tmp_path / "blob.bin").write_bytes(blob)
    (tmp_path / "index.html").write_text("<p>home</p>")

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev != MG_EV_HTTP_MSG:
            return
        if msg.uri == "/one":
            conn.serve_file(msg, str(tmp_path / "blob.bin"))
        else:
            conn.serve_dir(msg, str(tmp_path))

    st = server_thread(handler)
    port = st.listen()
    st.start()
    with H2Peer(port) as peer:
        one = peer.request("/one")
        listed = peer.request("/blob.bin")
        home = peer.request("/")
        ranged = peer.request("/blob.bin", headers=[("range", "bytes=10-19")])
        missing = peer.request("/nothing")
        a, b, c, d, e = peer.wait_answers(one, listed, home, ranged, missing, timeout=30)
    assert a.status == 200 and a.body == blob
    assert b.status == 200 and b.body == blob
    assert c.status == 200 and c.body == b"<p>home</p>"
    assert d.status == 206 and d.body == blob[10:20]
    assert e.status == 404


def test_streams_count_against_limit_concurrency_and_in_the_metrics(
        server_thread: Any) -> None:
    handler = Site()
    st = server_thread(handler)
    port = st.listen()
    st.manager.limit_concurrency = 2
    st.manager.health_path = "/healthz"
    st.manager.ready = True
    st.start()
    with H2Peer(port) as peer:
        held = [peer.request("/later"), peer.request("/later")]
        wait_for(lambda: st.call(lambda: len(handler.held)) == 2, 10, "two requests held")
        over = peer.request("/over")
        health = peer.request("/healthz")
        a, b = peer.wait_answers(over, health)
        assert (a.status, a.header(b"retry-after")) == (503, b"1")
        assert (b.status, b.body) == (200, b"ok\n")  # the health probe passes the limit
        assert st.call(handler.answer_held) == 2
        answers = peer.wait_answers(*held)
        assert [x.body for x in answers] == [b"answered later"] * 2
        metrics = st.call(st.manager.metrics)
    # One TCP connection; its four requests each counted once, by status, as HTTP/2 (the
    # guard's own answers too: the probe and the 503).
    assert (metrics["connections_total"], metrics["connections_open"]) == (1, 1)
    assert (metrics["http2_connections_total"], metrics["http2_connections_open"]) == (1, 1)
    assert metrics["requests"] == {200: 3, 503: 1} and metrics["in_flight"] == 0
    assert metrics["requests_http2"] == metrics["requests"]
    assert metrics["refused"] == {503: 1}
    assert metrics["bytes_received"] > 0 and metrics["bytes_sent"] > 0


def test_metrics_tell_http11_requests_from_http2_ones(site: tuple[int, Site, Any]) -> None:
    port, _, st = site
    url = f"http://127.0.0.1:{port}"
    with httpx.Client(http1=True, http2=False, timeout=20) as h1:
        assert [h1.get(f"{url}/a{i}").http_version for i in range(3)] == ["HTTP/1.1"] * 3
    with httpx.Client(http1=False, http2=True, timeout=20) as h2:
        assert [h2.get(f"{url}/b{i}").http_version for i in range(5)] == ["HTTP/2"] * 5
        # A stream's request is counted when the stream closes, a moment after its answer.
        wait_for(lambda: st.call(st.manager.metrics)["requests_http2"] == {200: 5}, 10,
                 'st.call(st.manager.metrics)["requests_http2"] == {200: 5}')
        assert st.call(st.manager.metrics)["http2_connections_open"] == 1
    wait_for(lambda: st.call(st.manager.metrics)["connections_open"] == 0, 10,
             'st.call(st.manager.metrics)["connections_open"] == 0')
    m = st.call(st.manager.metrics)
    assert m["requests"] == {200: 8} and m["requests_http2"] == {200: 5}
    # Two TCP connections, one of them switched to HTTP/2 and now closed.
    assert (m["connections_total"], m["http2_connections_total"]) == (2, 1)
    assert m["http2_connections_open"] == 0


def test_trailers_end_the_stream_after_the_body(site: tuple[int, Site, Any]) -> None:
    port, _, _ = site
    with H2Peer(port) as peer:
        (a,) = peer.wait_answers(peer.request("/trailers", headers=[("te", "trailers")]))
    assert (a.status, a.body, a.ended) == (200, b"\x00\x00\x00\x00\x02hi", True)
    assert a.trailers == [(b"grpc-status", b"0"), (b"grpc-message", b"fine")]
    assert a.header(b"transfer-encoding") is None


def test_trailers_on_a_chunked_http11_response(site: tuple[int, Site, Any]) -> None:
    port, _, _ = site
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /trailers HTTP/1.1\r\nHost: x\r\nTE: trailers\r\n\r\n")
        data = b""
        while not data.endswith(b"\r\n\r\n") or b"0\r\n" not in data:
            chunk = sock.recv(4096)
            assert chunk, data
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert b"Transfer-Encoding: chunked" in head
    assert body == (b"7\r\n\x00\x00\x00\x00\x02hi\r\n"
                    b"0\r\ngrpc-status: 0\r\nGrpc-Message: fine\r\n\r\n")


def test_fields_that_may_not_be_trailers_are_refused(server_thread: Any) -> None:
    raised: list[BaseException] = []

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            conn.http_begin(200)
            for bad in ([("Content-Length", "5")], [("X-Ok", "a\r\nb")], [("x",)]):
                try:
                    conn.http_end(trailers=bad)
                except (ValueError, TypeError) as exc:
                    raised.append(exc)
            conn.http_end()

    st = server_thread(handler)
    port = st.listen()
    st.start()
    with H2Peer(port) as peer:
        (a,) = peer.wait_answers(peer.request("/"))
    assert a.status == 200 and a.ended and a.trailers == []
    assert [type(e) for e in raised] == [ValueError, ValueError, TypeError]


def test_hostile_request_lines_are_refused_on_their_stream_only(server_thread: Any) -> None:
    # The request line the engine writes for the guard comes from :method and :path: a space
    # or a control byte there must not split it into something else, and its length is
    # bounded as an HTTP/1.1 target's is.
    handler = Site()
    st = server_thread(handler)
    port = st.listen(max_uri_size=100)
    st.start()
    with H2Peer(port, validate=False) as peer:
        spaced = peer.request("/a HTTP/1.1\r\nX: y")
        long = peer.request("/" + "x" * 200)
        method = peer.request("/ok", method="G T")
        fine = peer.request("/fine")
        a, b, c, d = peer.wait_answers(spaced, long, method, fine)
    assert a.reset == 1 and c.reset == 1  # malformed (RFC 9113 section 8.1.1)
    assert b.status == 414 and d.status == 200
    assert handler.protocols == ["HTTP/2.0"]  # only /fine reached the handler
