"""ASGI apps on the command line, like WSGI apps: supervised workers, a Unix socket, HTTPS,
trusted and untrusted proxy headers, the access log, SIGTERM drain and --max-requests, with a
raw ASGI app and a FastAPI app."""

from __future__ import annotations

import http.client
import json
import re
import signal
import threading
import time
from pathlib import Path

import pytest
from support.cli_run import (
    CLI,
    LoadClient,
    proxied_get,
    self_signed_cert,
    unix_answers,
    unix_get,
)
from support.http_client import HttpConnection, get
from support.ports import bound_listener, free_port
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(60)

# pid|client|scheme|host|root_path|path; /slow?S sleeps S seconds first.
RAW_ASGI = '''
import asyncio
import os


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    if scope["path"] == "/slow":
        open("slow.in", "w").close()  # the test may wait for this: the app has the request
        await asyncio.sleep(float(scope["query_string"] or b"0.5"))
    host = dict(scope["headers"]).get(b"host", b"").decode()
    body = "|".join([str(os.getpid()), scope["client"][0], scope["scheme"], host,
                     scope["root_path"], scope["path"]]).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
'''

FASTAPI_APP = '''
import os

from fastapi import FastAPI, Request

app = FastAPI()


@app.get("/{path:path}")
async def echo(request: Request, path: str):
    return {"pid": os.getpid(), "client": request.client.host, "scheme": request.url.scheme,
            "path": path}
'''


def _asgi_cli(tmp_path: Path, *args: str) -> CLI:
    (tmp_path / "asgi_raw.py").write_text(RAW_ASGI)
    (tmp_path / "asgi_fast.py").write_text(FASTAPI_APP)
    return CLI(tmp_path, *args)


def _fields(body: bytes) -> list[str]:
    return body.decode().split("|")


def test_fastapi_app_on_two_workers(tmp_path: Path) -> None:
    port = free_port()
    cli = _asgi_cli(tmp_path, "asgi_fast:app", "--port", str(port), "--workers", "2")
    try:
        cli.wait_http(port)
        wait_for(lambda: len(cli.worker_pids()) == 2, 20,
                 lambda: f"len(cli.worker_pids()) == 2 ({cli.worker_pids()})")
        pids: set[int] = set()

        def both_answered() -> bool:
            answer = json.loads(get(port, "/items/1").body)
            assert answer["client"] == "127.0.0.1" and answer["path"] == "items/1"
            pids.add(answer["pid"])
            return len(pids) >= 2

        wait_for(both_answered, 10, lambda: f"answers from both workers (from {pids})",
                 interval=0)
        assert pids == set(cli.worker_pids())  # both workers serve the shared socket
    finally:
        assert cli.stop() == 0, cli.err


def test_unix_socket_trusts_its_local_proxy(tmp_path: Path) -> None:
    path = str(tmp_path / "asgi.sock")
    cli = _asgi_cli(tmp_path, "asgi_raw:app", "--uds", path, "--proxy-headers",
                    "--proxy-headers-host", "--root-path", "/api")
    try:
        wait_for(lambda: unix_answers(path), 20, lambda: f"unix_answers(path) ({cli.err})")
        head, _, body = unix_get(path, "/api/u").partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200")
        assert _fields(body)[1:] == ["127.0.0.1", "http", "unix", "/api", "/api/u"]
        body = unix_get(path, "/api/", "X-Forwarded-For: 203.0.113.1\r\n"
                                       "X-Forwarded-Proto: https\r\n"
                                       "X-Forwarded-Host: shop.example\r\n"
                        ).partition(b"\r\n\r\n")[2]
        assert _fields(body)[1:4] == ["203.0.113.1", "https", "shop.example"]
    finally:
        assert cli.stop() == 0, cli.err
    assert not Path(path).exists()


def test_inherited_descriptor(tmp_path: Path) -> None:
    with bound_listener() as lsock:
        port = lsock.getsockname()[1]
        (tmp_path / "asgi_raw.py").write_text(RAW_ASGI)
        cli = CLI(tmp_path, "asgi_raw:app", "--fd", str(lsock.fileno()), "--max-body-size",
                  "10", pass_fds=(lsock.fileno(),))
        try:
            cli.wait_http(port)
            assert get(port, "/fd").body.endswith(b"|/fd")
            with HttpConnection(port) as c:  # the limits reach the listener
                c.send_raw(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n"
                           b"hello world")
                assert c.read_response("POST").status == 413
        finally:
            assert cli.stop() == 0, cli.err


def test_proxy_headers_only_from_a_trusted_peer(tmp_path: Path) -> None:
    port = free_port()
    cli = _asgi_cli(tmp_path, "asgi_fast:app", "--port", str(port), "--proxy-headers",
                    "--forwarded-allow-ips", "127.0.0.1")
    forged = "X-Forwarded-For: 198.51.100.7\r\nX-Forwarded-Proto: https\r\n"
    try:
        cli.wait_http(port)
        trusted = json.loads(proxied_get(port, "127.0.0.1", headers=forged))
        assert (trusted["client"], trusted["scheme"]) == ("198.51.100.7", "https")
        # Another loopback address is not a trusted proxy: its headers are ignored.
        untrusted = json.loads(proxied_get(port, "127.0.0.2", headers=forged))
        assert (untrusted["client"], untrusted["scheme"]) == ("127.0.0.2", "http")
        # Forwarded is not the source (--proxy-headers-source): ignored, even from the proxy.
        rfc7239 = json.loads(proxied_get(port, "127.0.0.1",
                                         headers="Forwarded: for=192.0.2.60;proto=https\r\n"))
        assert (rfc7239["client"], rfc7239["scheme"]) == ("127.0.0.1", "http")
    finally:
        assert cli.stop() == 0, cli.err


@pytest.mark.parametrize("fmt", ["default", "json"])
def test_access_log_lines(tmp_path: Path, fmt: str) -> None:
    port = free_port()
    log_file = tmp_path / "access.log"
    extra = ["--access-log-format", "json"] if fmt == "json" else []
    cli = _asgi_cli(tmp_path, "asgi_raw:app", "--port", str(port), "--access-log",
                    "--access-log-file", str(log_file), "--proxy-headers", *extra)
    try:
        cli.wait_http(port, "/ready")
        body = proxied_get(port, "127.0.0.1", headers="X-Forwarded-For: 203.0.113.9\r\n"
                                                      "User-Agent: probe/1\r\n")
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("HEAD", "/h?x=1")
        c.getresponse().read()
        c.close()
    finally:
        assert cli.stop() == 0, cli.err
    lines = log_file.read_text().splitlines()
    assert len(lines) == 3, lines
    if fmt == "json":
        via, head = json.loads(lines[1]), json.loads(lines[2])
        assert (via["client"], via["method"], via["path"], via["status"], via["bytes"],
                via["user_agent"]) == ("203.0.113.9", "GET", "/via", 200, len(body), "probe/1")
        assert via["duration_ms"] >= 0 and via["protocol"] == "HTTP/1.1"
        assert (head["method"], head["path"], head["query"], head["bytes"]) == \
            ("HEAD", "/h", "x=1", 0)
    else:
        line = re.compile(r'(\S+) - - \[[^]]+\] "(\S+) (\S+) HTTP/1.1" (\d+) (\d+|-) '
                          r'"-" "([^"]*)" \d+\.\d+$')
        via, head = line.match(lines[1]), line.match(lines[2])
        assert via and head, lines
        assert via.groups() == ("203.0.113.9", "GET", "/via", "200", str(len(body)),
                                "probe/1")
        assert head.groups()[:5] == ("127.0.0.1", "HEAD", "/h?x=1", "200", "-")


@pytest.mark.parametrize("workers", ["1", "2"])
def test_sigterm_finishes_the_request_in_flight_and_exits_0(tmp_path: Path,
                                                          workers: str) -> None:
    port = free_port()
    cli = _asgi_cli(tmp_path, "asgi_raw:app", "--port", str(port), "--workers", workers,
                    "--graceful-timeout", "10")
    cli.wait_http(port)
    answers: list[bytes] = []

    def slow() -> None:
        answers.append(get(port, "/slow?1.0").body)

    client = threading.Thread(target=slow)
    client.start()
    wait_for(lambda: (tmp_path / "slow.in").exists(), 20, "the request in the app")
    started = time.monotonic()
    code = cli.stop(signal.SIGTERM)
    took = time.monotonic() - started
    client.join(10)
    assert code == 0, cli.err
    assert len(answers) == 1 and answers[0].endswith(b"|/slow"), answers
    assert took < 5, took
    assert "Traceback" not in cli.err, cli.err


def test_max_requests_recycles_asgi_workers(tmp_path: Path) -> None:
    port = free_port()
    cli = _asgi_cli(tmp_path, "asgi_raw:app", "--port", str(port), "--max-requests", "20",
                    "--max-requests-jitter", "5")
    try:
        cli.wait_http(port)
        with LoadClient(port, threads=3, max_requests=1000) as load:
            wait_for(lambda: len(load.result.pids) >= 3, 20,
                     lambda: f"len(load.result.pids) >= 3 ({load.result.pids})")
    finally:
        assert cli.stop() == 0, cli.err
    result = load.result
    assert result.failed == [] and result.partial == [], result


def test_https_from_certificate_files(tmp_path: Path) -> None:
    import ssl

    self_signed_cert(tmp_path)
    port = free_port()
    cli = _asgi_cli(tmp_path, "asgi_raw:app", "--port", str(port), "--ssl-certfile",
                    "cert.pem", "--ssl-keyfile", "key.pem")
    ctx = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))

    def fetch() -> bytes | None:
        try:
            c = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=ctx)
            c.request("GET", "/tls")
            body = c.getresponse().read()
            c.close()
            return body
        except OSError:
            return None

    try:
        wait_for(fetch, 20, lambda: f"fetch ({cli.err})")
        body = fetch()
        assert body and _fields(body)[2] == "https" and body.endswith(b"|/tls"), body
    finally:
        assert cli.stop() == 0, cli.err


def test_static_files_in_front_of_an_asgi_app(tmp_path: Path) -> None:
    public = tmp_path / "public"
    (public / "sub").mkdir(parents=True)
    big = bytes(range(256)) * 1200  # 300 KiB: sent with sendfile, not one write
    (public / "big.bin").write_bytes(big)
    (public / "sub" / "index.html").write_text("<p>index</p>")
    (tmp_path / "secret.txt").write_text("not for you")
    port = free_port()
    cli = _asgi_cli(tmp_path, "asgi_raw:app", "--port", str(port), "--static",
                    f"/s={public}")
    try:
        cli.wait_http(port)
        r = get(port, "/s/big.bin")
        assert r.status == 200 and r.body == big
        assert r.header("content-length") == str(len(big))
        assert r.header("content-type") == "application/octet-stream"
        with HttpConnection(port) as c:
            head = c.request("HEAD", "/s/big.bin")
            assert head.status == 200 and head.body == b""
            assert head.header("content-length") == str(len(big))
            again = c.request("GET", "/s/big.bin",
                              [("If-Modified-Since", head.header("last-modified") or "")])
            assert again.status == 304 and again.body == b""
            index = c.request("GET", "/s/sub/")
            assert index.body == b"<p>index</p>"
            assert index.header("content-type") == "text/html; charset=utf-8"
            assert c.request("GET", "/s/nothing").status == 404
            posted = c.request("POST", "/s/big.bin")
            assert posted.status == 405 and posted.header("allow") == "GET, HEAD"
            # Everything outside the mount reaches the app, on the same connection.
            assert _fields(c.request("GET", "/app/x").body)[5] == "/app/x"
            assert _fields(c.request("GET", "/static-not").body)[5] == "/static-not"
        for target in ("/s/../secret.txt", "/s/%2e%2e/secret.txt", "/s/sub/../../secret.txt"):
            r = get(port, target)
            assert r.status in (400, 404) and b"not for you" not in r.body, target
    finally:
        assert cli.stop() == 0, cli.err
