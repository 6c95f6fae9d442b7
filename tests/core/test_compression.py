"""Response compression in the core (Manager.set_compression): whole bodies (http_respond,
reply, reply_json), streamed ones (http_begin/http_write/http_sendfile/http_end), what is
never compressed, Vary, the opt-out, and each write reaching the client decodable at once.
Decoded with Python's zlib and the zstandard library, and checked with httpx and curl."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import zstandard
from support.http_client import HttpConnection, Response
from support.subprocess_env import tool_env

from cymongoose import MG_EV_HTTP_MSG, Connection

pytestmark = pytest.mark.timeout(30)

JSON_BODY = json.dumps([{"id": i, "name": f"item {i}", "tags": ["a", "b"]}
                        for i in range(400)]).encode()
TEXT = b"".join(b"line %d of a text file that compresses well\n" % i for i in range(8000))
Route = Callable[[Connection], None]


def decode(resp: Response) -> bytes:
    coding = resp.header("content-encoding")
    if coding == "gzip":
        return zlib.decompress(resp.body, 16 + 15)
    if coding == "zstd":
        return zstandard.ZstdDecompressor().decompressobj().decompress(resp.body)
    assert coding is None, coding
    return resp.body


def start(server_thread: Any, routes: dict[str, Route], **settings: Any) -> tuple[int, Any]:
    errors: list[str] = []

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            try:
                routes[msg.uri](conn)
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                conn.close()

    st = server_thread(handler)
    st.manager.set_compression(**settings)
    port = st.listen()
    st.start()
    st.route_errors = errors
    return port, st


def respond(body: bytes, *headers: tuple[str, str], status: int = 200) -> Route:
    return lambda conn: conn.http_respond(status, list(headers), body)


JSON = ("Content-Type", "application/json")


@pytest.mark.parametrize("coding", ["gzip", "zstd"])
def test_whole_bodies_are_compressed_for_a_client_that_takes_it(
        server_thread: Any, coding: str) -> None:
    port, st = start(server_thread, {
        "/respond": respond(JSON_BODY, JSON),
        "/reply": lambda conn: conn.reply(200, JSON_BODY, {"Content-Type": "text/html"}),
        "/reply-json": lambda conn: conn.reply_json({"items": ["an item"] * 500}),
    })
    with HttpConnection(port) as c:  # one keep-alive connection for all of them
        for target, plain in [("/respond", JSON_BODY), ("/reply", JSON_BODY),
                              ("/reply-json", json.dumps({"items": ["an item"] * 500}).encode())]:
            resp = c.request("GET", target, [("Accept-Encoding", f"{coding}, br")])
            assert resp.header("content-encoding") == coding
            assert resp.header("vary") == "Accept-Encoding"
            assert resp.header("content-length") == str(len(resp.body))
            assert len(resp.body) < len(plain) // 4
            assert decode(resp).replace(b" ", b"") == plain.replace(b" ", b"")
        assert c.keep_alive
    assert st.route_errors == []


def test_negotiation_prefers_zstd_then_gzip_and_honours_q(server_thread: Any) -> None:
    port, _ = start(server_thread, {"/": respond(JSON_BODY, JSON)})
    with HttpConnection(port) as c:
        for accept, coding in [("gzip, deflate, br, zstd", "zstd"), ("gzip", "gzip"),
                               ("zstd;q=0.5, gzip", "gzip"), ("br", None), ("", None),
                               ("gzip;q=2", None), ("*", "zstd"), ("gzip;q=0", None)]:
            resp = c.request("GET", "/", [("Accept-Encoding", accept)])
            assert resp.header("content-encoding") == coding, accept
            assert decode(resp) == JSON_BODY
        resp = c.request("GET", "/")  # no Accept-Encoding at all: the identity
        assert resp.header("content-encoding") is None and resp.body == JSON_BODY
        assert resp.header("vary") == "Accept-Encoding"


def test_only_gzip_offered(server_thread: Any) -> None:
    port, _ = start(server_thread, {"/": respond(JSON_BODY, JSON)}, codings="gzip")
    with HttpConnection(port) as c:
        resp = c.request("GET", "/", [("Accept-Encoding", "zstd, gzip")])
    assert resp.header("content-encoding") == "gzip"
    assert decode(resp) == JSON_BODY


def test_what_is_never_compressed(server_thread: Any) -> None:
    gz = zlib.compress(JSON_BODY)
    port, _ = start(server_thread, {
        "/small": respond(b"{}" * 100, JSON),  # 200 bytes < min_length
        "/png": respond(JSON_BODY, ("Content-Type", "image/png")),
        "/untyped": respond(JSON_BODY),
        "/encoded": respond(gz, JSON, ("Content-Encoding", "deflate")),
        "/no-transform": respond(JSON_BODY, JSON, ("Cache-Control", "public, no-transform")),
        "/partial": respond(JSON_BODY[:1000], JSON, ("Content-Range", "bytes 0-999/20000"),
                            status=206),
        "/no-content": respond(b"", JSON, status=204),
        "/opt-out": respond(JSON_BODY, JSON, ("Content-Encoding", "identity")),
    })
    ae = [("Accept-Encoding", "gzip, zstd")]
    with HttpConnection(port) as c:
        small = c.request("GET", "/small", ae)
        assert small.header("content-encoding") is None and small.body == b"{}" * 100
        assert small.header("vary") == "Accept-Encoding"  # the type could be, so it varies
        for target in ["/png", "/untyped"]:
            resp = c.request("GET", target, ae)
            assert resp.header("content-encoding") is None and resp.header("vary") is None
            assert resp.body == JSON_BODY
        encoded = c.request("GET", "/encoded", ae)
        assert encoded.header("content-encoding") == "deflate" and encoded.body == gz
        no_transform = c.request("GET", "/no-transform", ae)
        assert no_transform.header("content-encoding") is None
        assert no_transform.body == JSON_BODY
        partial = c.request("GET", "/partial", ae)
        assert partial.status == 206 and partial.header("content-encoding") is None
        assert c.request("GET", "/no-content", ae).status == 204
        # The opt-out: the field is left out (RFC 9110 reserves "identity" for requests).
        opt_out = c.request("GET", "/opt-out", ae)
        assert opt_out.header("content-encoding") is None and opt_out.body == JSON_BODY
        assert opt_out.header("vary") is None
        head = c.request("HEAD", "/small", ae)
        assert head.header("content-encoding") is None and head.body == b""
        head = c.request("HEAD", "/png", ae)
        assert head.header("content-encoding") is None
        assert c.keep_alive


def test_an_apps_vary_is_kept_and_not_repeated(server_thread: Any) -> None:
    port, _ = start(server_thread, {
        "/cookie": respond(JSON_BODY, JSON, ("Vary", "Cookie")),
        "/already": respond(JSON_BODY, JSON, ("Vary", "Cookie, accept-encoding")),
    })
    with HttpConnection(port) as c:
        cookie = c.request("GET", "/cookie", [("Accept-Encoding", "gzip")])
        assert cookie.header_list("vary") == ["Cookie", "Accept-Encoding"]
        already = c.request("GET", "/already", [("Accept-Encoding", "gzip")])
        assert already.header_list("vary") == ["Cookie, accept-encoding"]
        assert already.header("content-encoding") == "gzip"


@pytest.mark.parametrize("coding", ["gzip", "zstd"])
def test_each_streamed_write_reaches_the_client_decodable_at_once(
        server_thread: Any, coding: str) -> None:
    """An event stream: the second event is written only after the client decoded the
    first, so a server that held compressed output back would hang here."""
    held: list[Connection] = []

    def events(conn: Connection) -> None:
        conn.http_begin(200, [("Content-Type", "text/event-stream")])
        conn.http_write(b"data: first\n\n")
        held.append(conn)

    port, st = start(server_thread, {"/events": events})
    decoder = (zlib.decompressobj(16 + 15) if coding == "gzip"
               else zstandard.ZstdDecompressor().decompressobj())
    with HttpConnection(port) as c:
        c.send_request("GET", "/events", [("Accept-Encoding", coding)])
        resp = c.read_head()
        assert resp.header("content-encoding") == coding
        assert resp.header("transfer-encoding") == "chunked"
        seen = b""

        def read_until(text: bytes) -> None:
            nonlocal seen
            while text not in seen:  # bounded by the connection's 5 s read timeout
                c.read_body(resp, limit=len(resp.body) + 1)
                while resp.chunks:
                    seen += decoder.decompress(resp.chunks.pop(0))

        read_until(b"data: first\n\n")
        st.call(lambda: held[0].http_write(b"data: second\n\n"))
        read_until(b"data: second\n\n")
        st.call(lambda: held[0].http_end())
        assert c.read_body(resp)
        while resp.chunks:
            seen += decoder.decompress(resp.chunks.pop(0))
        assert seen == b"data: first\n\ndata: second\n\n"
        assert c.keep_alive
    assert st.route_errors == []


def test_a_streamed_body_keeps_its_content_length_promise(server_thread: Any) -> None:
    def exact(conn: Connection) -> None:
        conn.http_begin(200, [JSON, ("Content-Length", str(len(JSON_BODY)))])
        conn.http_write(JSON_BODY[:5000])
        conn.http_write(JSON_BODY[5000:])
        conn.http_end()

    def too_much(conn: Connection) -> None:
        conn.http_begin(200, [JSON, ("Content-Length", "600")])
        conn.http_write(JSON_BODY[:600])
        try:
            conn.http_write(b"x")
        except ValueError as exc:
            conn.userdata = str(exc)
        conn.http_end()

    def short(conn: Connection) -> None:
        conn.http_begin(200, [JSON, ("Content-Length", str(len(JSON_BODY)))])
        conn.http_write(JSON_BODY[:1000])
        conn.http_end()

    port, st = start(server_thread, {"/exact": exact, "/too-much": too_much, "/short": short})
    ae = [("Accept-Encoding", "gzip")]
    with HttpConnection(port) as c:
        resp = c.request("GET", "/exact", ae)
        assert resp.header("content-encoding") == "gzip"
        assert resp.header("content-length") is None
        assert decode(resp) == JSON_BODY
        resp = c.request("GET", "/too-much", ae)
        assert decode(resp) == JSON_BODY[:600]
    with HttpConnection(port) as c:
        c.send_request("GET", "/short", ae)
        resp = c.read_head()
        with pytest.raises(Exception, match="closed"):
            c.read_body(resp)  # no last chunk: the client sees an incomplete body
    assert st.route_errors == []


def test_a_file_is_compressed_as_it_is_read(server_thread: Any, tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    path.write_bytes(TEXT)

    def send(conn: Connection) -> None:
        conn.http_begin(200, [("Content-Type", "text/plain; charset=utf-8"),
                              ("Content-Length", str(len(TEXT)))])
        fd = os.open(path, os.O_RDONLY)
        try:
            conn.http_sendfile(fd, 0, len(TEXT))
        finally:
            os.close(fd)
        conn.http_end()

    port, st = start(server_thread, {"/file": send})
    with HttpConnection(port) as c:
        for coding in ["gzip", "zstd", "identity"]:
            resp = c.request("GET", "/file", [("Accept-Encoding", coding)])
            assert decode(resp) == TEXT
            if coding != "identity":
                assert len(resp.body) < len(TEXT) // 5
        # HTTP/1.0: no chunks, so the compressed body ends with the connection.
        c.send_raw(b"GET /file HTTP/1.0\r\nAccept-Encoding: gzip\r\n\r\n")
        resp = c.read_response("GET", "1.0")
        assert resp.header("content-encoding") == "gzip" and decode(resp) == TEXT
    assert st.route_errors == []


def test_httpx_and_curl_decode_what_is_sent(server_thread: Any) -> None:
    def stream(conn: Connection) -> None:
        conn.http_begin(200, [("Content-Type", "text/html; charset=utf-8")])
        for k in range(0, len(TEXT), 7000):
            conn.http_write(TEXT[k:k + 7000])
        conn.http_end()

    port, _ = start(server_thread, {"/": respond(JSON_BODY, JSON), "/stream": stream})
    url = f"http://127.0.0.1:{port}"
    for accept in ["gzip", "zstd"]:
        with httpx.Client(headers={"Accept-Encoding": accept}) as client:
            whole = client.get(url + "/")
            assert whole.headers["content-encoding"] == accept
            assert whole.content == JSON_BODY
            streamed = client.get(url + "/stream")
            assert streamed.headers["content-encoding"] == accept
            assert streamed.content == TEXT
    curl = shutil.which("curl")
    assert curl is not None
    out = subprocess.run([curl, "-sS", "--compressed", url + "/stream"], capture_output=True,
                         timeout=20, check=True, env=tool_env())
    assert out.stdout == TEXT


def test_a_malformed_accept_encoding_gets_the_identity(server_thread: Any) -> None:
    port, _ = start(server_thread, {"/": respond(JSON_BODY, JSON)})
    with HttpConnection(port) as c:
        for accept in ["gzip;q=x", "gzip zstd", "gzip;", "\"gzip\""]:
            resp = c.request("GET", "/", [("Accept-Encoding", accept)])
            assert resp.status == 200 and resp.header("content-encoding") is None
            assert resp.body == JSON_BODY
        # Two Accept-Encoding fields: read as the identity too (never half of them).
        resp = c.request("GET", "/", [("Accept-Encoding", "gzip"), ("Accept-Encoding", "zstd")])
        assert resp.header("content-encoding") is None


def test_settings_are_checked_and_read_back(server_thread: Any) -> None:
    st = server_thread(None)
    m = st.manager
    assert m.compression is None
    m.set_compression()  # "on": every coding the build makes
    assert m.compression is not None and m.compression["codings"] == ("zstd", "gzip")
    m.set_compression("ON")
    assert m.compression["codings"] == ("zstd", "gzip")
    m.set_compression("gzip", min_length=0, gzip_level=6, types=["application/json"])
    assert m.compression == {"codings": ("gzip",), "min_length": 0, "gzip_level": 6,
                             "zstd_level": 3, "types": ("application/json",)}
    for kwargs, message in [
        ({"codings": "brotli"}, "compression codings are 'zstd' and 'gzip', not 'brotli'"),
        ({"codings": []}, "at least one coding"),
        ({"min_length": -1}, "min_length must be >= 0"),
        ({"gzip_level": 0}, "gzip_level must be 1 to 9"),
        ({"zstd_level": 20}, "zstd_level must be 1 to 19"),
        ({"types": ["json"]}, "compression types are MIME types"),
    ]:
        with pytest.raises(ValueError, match=message):
            m.set_compression(**kwargs)
    with pytest.raises(TypeError):
        m.set_compression(types="text/html")
    assert m.compression is not None and m.compression["gzip_level"] == 6  # unchanged
    m.set_compression(None)
    assert m.compression is None


def test_http2_streams_are_compressed_too(server_thread: Any) -> None:
    """An h2c stream's response is written through the same calls: curl over HTTP/2
    (prior knowledge) gets the same compressed bodies, whole and streamed."""
    def stream(conn: Connection) -> None:
        conn.http_begin(200, [("Content-Type", "text/plain")])
        for k in range(0, len(TEXT), 50000):
            conn.http_write(TEXT[k:k + 50000])
        conn.http_end()

    port, st = start(server_thread, {"/": respond(JSON_BODY, JSON), "/stream": stream})
    curl = shutil.which("curl")
    assert curl is not None
    for target, plain in [("/", JSON_BODY), ("/stream", TEXT)]:
        for coding in ["gzip", "zstd"]:
            done = subprocess.run(
                [curl, "-sS", "--http2-prior-knowledge", "-D", "-", "-o", "-",
                 "-H", f"Accept-Encoding: {coding}", f"http://127.0.0.1:{port}{target}"],
                capture_output=True, timeout=20, check=True, env=tool_env())
            head, _, body = done.stdout.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/2 200")
            assert f"content-encoding: {coding}".encode() in head.lower()
            decoded = (zlib.decompress(body, 16 + 15) if coding == "gzip"
                       else zstandard.ZstdDecompressor().decompressobj().decompress(body))
            assert decoded == plain
    assert st.route_errors == []


def test_a_client_gone_mid_stream_frees_the_encoder_and_the_server_serves_on(
        server_thread: Any) -> None:
    """Streams left unfinished by clients that went away: each encoder is freed at the
    close (the ASan leg runs this), and the next client is served."""
    import socket

    held: list[Connection] = []

    def endless(conn: Connection) -> None:
        conn.http_begin(200, [("Content-Type", "text/event-stream")])
        conn.http_write(b"data: " + b"x" * 2000 + b"\n\n")
        held.append(conn)

    port, st = start(server_thread, {"/events": endless, "/": respond(JSON_BODY, JSON)})
    for k in range(20):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"GET /events HTTP/1.1\r\nHost: x\r\nAccept-Encoding: "
                         + (b"gzip" if k % 2 else b"zstd") + b"\r\n\r\n")
            assert sock.recv(100).startswith(b"HTTP/1.1 200")
    def write_late() -> None:
        # A write to a stream whose client has gone: harmless, or refused once its close
        # was seen (the Connection is then closed).
        for conn in held:
            try:
                conn.http_write(b"data: late\n\n")
            except RuntimeError:
                pass

    st.call(write_late)
    with HttpConnection(port) as c:
        resp = c.request("GET", "/", [("Accept-Encoding", "gzip")])
        assert decode(resp) == JSON_BODY


def test_encoders_kept_from_earlier_streams_start_clean(server_thread: Any) -> None:
    """A finished stream's encoder is kept and reset for the next (of either coding): each
    body still decodes alone, whatever came before it, finished or cut short."""
    def stream(conn: Connection) -> None:
        conn.http_begin(200, [("Content-Type", "application/json")])
        conn.http_write(JSON_BODY[:3000])
        conn.http_write(JSON_BODY[3000:])
        conn.http_end()

    port, st = start(server_thread, {"/": stream})
    with HttpConnection(port) as c:
        for k in range(24):
            coding = ["gzip", "zstd", "zstd", "gzip"][k % 4]
            resp = c.request("GET", "/", [("Accept-Encoding", coding)])
            assert resp.header("content-encoding") == coding
            assert decode(resp) == JSON_BODY
    assert st.route_errors == []
