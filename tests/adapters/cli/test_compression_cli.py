"""--compression from the command line: a WSGI app's whole and streamed bodies, an ASGI event
stream whose each event is decodable as soon as it is sent, --static files, one process and
--workers; a wrong value is one line and exit 2."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import httpx
import pytest
import zstandard
from support.cli_run import CLI, run_cli
from support.http_client import HttpConnection
from support.ports import free_port

pytestmark = pytest.mark.timeout(90)

ROWS = [{"id": i, "name": f"row {i}", "active": i % 2 == 0} for i in range(300)]
JSON_BODY = json.dumps(ROWS).encode()
PAGE = b"<html><body>" + b"<p>a paragraph of the page</p>\n" * 3000 + b"</body></html>"

APPS = '''\
import asyncio, json

ROWS = [{"id": i, "name": f"row {i}", "active": i % 2 == 0} for i in range(300)]
PAGE = b"<html><body>" + b"<p>a paragraph of the page</p>\\n" * 3000 + b"</body></html>"


def wsgi(environ, start_response):
    if environ["PATH_INFO"] == "/stream":
        start_response("200 OK", [("Content-Type", "text/html; charset=utf-8")])
        return (PAGE[k:k + 10000] for k in range(0, len(PAGE), 10000))
    body = json.dumps(ROWS).encode()
    start_response("200 OK", [("Content-Type", "application/json"),
                              ("Content-Length", str(len(body)))])
    return [body]


released = None


async def asgi(scope, receive, send):
    global released
    if scope["type"] == "lifespan":
        while True:
            kind = (await receive())["type"]
            await send({"type": kind + ".complete"})
            if kind == "lifespan.shutdown":
                return
    if scope["path"] == "/release":  # lets the event stream send its second event
        released.set()
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    released = asyncio.Event()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream")]})
    await send({"type": "http.response.body", "body": b"data: first\\n\\n", "more_body": True})
    await released.wait()
    await send({"type": "http.response.body", "body": b"data: second\\n\\n"})
'''


def _decode(coding: str | None, body: bytes) -> bytes:
    if coding == "gzip":
        return zlib.decompress(body, 16 + 15)
    if coding == "zstd":
        return zstandard.ZstdDecompressor().decompressobj().decompress(body)
    return body


@pytest.mark.parametrize("workers", [[], ["--workers", "2"]])
def test_a_wsgi_apps_bodies_are_compressed(tmp_path: Path, workers: list[str]) -> None:
    (tmp_path / "compress_apps.py").write_text(APPS)
    port = free_port()
    cli = CLI(tmp_path, "compress_apps:wsgi", "--port", str(port), "--compression", "on",
              *workers)
    try:
        cli.wait_http(port)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            for coding in ["gzip", "zstd"]:
                whole = client.get("/", headers={"Accept-Encoding": coding})
                assert whole.headers["content-encoding"] == coding
                assert whole.headers["vary"] == "Accept-Encoding"
                assert whole.content == JSON_BODY
                assert int(whole.headers["content-length"]) < len(JSON_BODY) // 3
                streamed = client.get("/stream", headers={"Accept-Encoding": coding})
                assert streamed.headers["content-encoding"] == coding
                assert streamed.content == PAGE
            plain = client.get("/", headers={"Accept-Encoding": "identity"})
            assert "content-encoding" not in plain.headers and plain.content == JSON_BODY
    finally:
        assert cli.stop() == 0, cli.err


@pytest.mark.parametrize("coding", ["gzip", "zstd"])
def test_an_asgi_event_stream_is_decodable_event_by_event(tmp_path: Path, coding: str) -> None:
    """The second event is sent only once the client has decoded the first: output held
    back by the encoder would hang the test (bounded by the read timeout)."""
    (tmp_path / "compress_apps.py").write_text(APPS)
    port = free_port()
    cli = CLI(tmp_path, "compress_apps:asgi", "--port", str(port), "--compression", coding,
              "--compression-min-length", "10000")
    try:
        cli.wait_http(port, "/release")
        decoder = (zlib.decompressobj(16 + 15) if coding == "gzip"
                   else zstandard.ZstdDecompressor().decompressobj())
        with HttpConnection(port) as c:
            c.send_request("GET", "/events", [("Accept-Encoding", "gzip, zstd")])
            resp = c.read_head()
            assert resp.header("content-encoding") == coding
            seen = b""
            while b"data: first\n\n" not in seen:
                c.read_body(resp, limit=len(resp.body) + 1)
                while resp.chunks:
                    seen += decoder.decompress(resp.chunks.pop(0))
            assert seen == b"data: first\n\n"
            with HttpConnection(port) as other:
                assert other.request("GET", "/release").status == 204
            assert c.read_body(resp)
            while resp.chunks:
                seen += decoder.decompress(resp.chunks.pop(0))
            assert seen == b"data: first\n\ndata: second\n\n"
    finally:
        assert cli.stop() == 0, cli.err


def test_static_files_are_compressed_and_identity_still_sent_whole(tmp_path: Path) -> None:
    public = tmp_path / "public"
    public.mkdir()
    (public / "page.html").write_bytes(PAGE)
    (public / "photo.jpg").write_bytes(bytes(range(256)) * 100)
    (tmp_path / "compress_apps.py").write_text(APPS)
    port = free_port()
    cli = CLI(tmp_path, "compress_apps:wsgi", "--port", str(port), "--compression", "on",
              "--static", f"/static={public}")
    try:
        cli.wait_http(port)
        with HttpConnection(port) as c:
            for coding in ["gzip", "zstd", None]:
                resp = c.request("GET", "/static/page.html",
                                 [("Accept-Encoding", coding)] if coding else [])
                assert resp.status == 200
                assert resp.header("content-encoding") == coding
                assert _decode(coding, resp.body) == PAGE
                # Compressed on the way out: the file's strong tag becomes weak.
                etag = resp.header("etag") or ""
                assert etag.startswith("W/\"") if coding else etag.startswith("\"")
            jpg = c.request("GET", "/static/photo.jpg", [("Accept-Encoding", "gzip")])
            assert jpg.header("content-encoding") is None
            assert jpg.body == bytes(range(256)) * 100
    finally:
        assert cli.stop() == 0, cli.err


@pytest.mark.parametrize(("args", "line"), [
    (["--compression", "brotli"],
     "--compression must be on, zstd, gzip or zstd,gzip, not 'brotli'"),
    (["--compression", "on", "--compression-min-length", "-1"],
     "--compression-min-length must be an int >= 0, not -1"),
])
def test_a_wrong_compression_option_is_one_line_and_exit_2(tmp_path: Path, args: list[str],
                                                           line: str) -> None:
    done = run_cli(tmp_path, "cli_app:app", "--port", str(free_port()), *args)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"cymongoose: {line}"]
