"""Command-line options end to end on one shared server process: trusted proxy headers (and
an untrusted peer's ignored), root path, static files through sendfile, limits from options
and CYMONGOOSE_* variables, and the access log it writes, parsed line by line."""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.cli_run import CLI, cli_env
from support.http_client import HttpConnection, get, raw_request
from support.ports import free_port
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(60)

# gunicorn's default atoms plus the duration: h l u t "r" s b "f" "a" L
ACCESS_LINE = re.compile(r'^(?P<client>\S+) - - \[(?P<time>[^\]]+)\] "(?P<request>[^"]*)" '
                         r'(?P<status>\d{3}) (?P<bytes>\d+|-) "(?P<referer>[^"]*)" '
                         r'"(?P<agent>[^"]*)" (?P<seconds>\d+\.\d{6})$')


@dataclass
class Served:
    port: int
    cli: CLI
    static: Path
    access_log: Path
    big: bytes


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("cli_options")
    static = tmp / "public"
    (static / "sub").mkdir(parents=True)
    big = os.urandom(300_000)
    (static / "big.bin").write_bytes(big)
    (static / "sub" / "index.html").write_text("<p>index</p>")
    access_log = tmp / "access.log"
    port = free_port()
    cli = CLI(tmp, "cli_app:app", "--port", str(port), "--threads", "2",
              "--root-path", "/api", "--static", f"/s={static}", "--max-uri-size", "200",
              "--access-log", "--access-log-file", str(access_log), "--log-level", "warning",
              env=cli_env(CYMONGOOSE_PROXY_HEADERS="1", CYMONGOOSE_PROXY_HEADERS_HOST="1",
                          CYMONGOOSE_MAX_HEADER_COUNT="8",
                          CYMONGOOSE_FORWARDED_ALLOW_IPS="127.0.0.0/8, ::1"))
    cli.wait_http(port)
    yield Served(port, cli, static, access_log, big)
    assert cli.stop() == 0, cli.err
    assert cli.err == "", cli.err  # --log-level warning: nothing to say


def _fields(body: bytes) -> list[str]:
    return body.decode().split("|")  # pid|REMOTE_ADDR|scheme|Host|SCRIPT_NAME|PATH_INFO


def test_x_forwarded_headers_from_a_trusted_proxy(served: Served) -> None:
    """X-Forwarded-Host counts here because CYMONGOOSE_PROXY_HEADERS_HOST is on (off by
    default: test_nginx.py)."""
    r = get(served.port, "/api/p", [("X-Forwarded-For", "198.51.100.9, 203.0.113.5"),
                                    ("X-Forwarded-Proto", "https"),
                                    ("X-Forwarded-Host", "shop.example")])
    assert _fields(r.body)[1:] == ["203.0.113.5", "https", "shop.example", "/api", "/p"]
    # A chain whose last hops are trusted proxies: the first untrusted hop is the client.
    r = get(served.port, "/api/p", [("X-Forwarded-For", "198.51.100.9, 127.0.0.5")])
    assert _fields(r.body)[1:3] == ["198.51.100.9", "http"]


def test_rfc7239_forwarded_is_not_the_default_source(served: Served) -> None:
    """X-Forwarded-* is believed and Forwarded ignored (a proxy that sets the one passes a
    client's other on); --proxy-headers-source forwarded turns that round (test_nginx.py)."""
    r = get(served.port, "/api/f", [
        ("Forwarded", 'for="[2001:db8::7]:4711";proto=https;host=a.example'),
        ("X-Forwarded-For", "198.51.100.1")])
    assert _fields(r.body)[1:4] == ["198.51.100.1", "http", f"127.0.0.1:{served.port}"]


def test_proxy_headers_from_an_untrusted_peer_are_ignored(tmp_path: Path) -> None:
    port = free_port()
    cli = CLI(tmp_path, "cli_app:app", "--port", str(port), "--proxy-headers",
              "--forwarded-allow-ips", "10.0.0.0/8")
    try:
        cli.wait_http(port)
        r = get(port, "/", [("X-Forwarded-For", "6.6.6.6"), ("X-Forwarded-Proto", "https"),
                            ("Forwarded", "for=6.6.6.6;proto=https")])
        assert _fields(r.body)[1:3] == ["127.0.0.1", "http"]
    finally:
        assert cli.stop() == 0, cli.err


def test_root_path(served: Served) -> None:
    assert _fields(get(served.port, "/api/a/b").body)[4:] == ["/api", "/a/b"]
    assert _fields(get(served.port, "/other").body)[4:] == ["", "/other"]


def test_static_files(served: Served) -> None:
    r = get(served.port, "/s/big.bin")
    assert r.status == 200 and r.body == served.big
    assert r.header("content-length") == str(len(served.big))
    with HttpConnection(served.port) as c:
        head = c.request("HEAD", "/s/big.bin")
        assert head.status == 200 and head.body == b""
        assert head.header("content-length") == str(len(served.big))
        again = c.request("GET", "/s/big.bin",
                          [("If-Modified-Since", head.header("last-modified") or "")])
        assert again.status == 304 and again.body == b""
        assert c.request("GET", "/s/sub/").body == b"<p>index</p>"
        assert c.request("GET", "/s/nothing").status == 404
        assert c.request("POST", "/s/big.bin").status == 405
    for target in ("/s/../cli_app.py", "/s/%2e%2e/cli_app.py", "/s/sub/../../cli_app.py"):
        with HttpConnection(served.port) as c:
            c.send_raw(raw_request("GET", target))
            r = c.read_response()
            assert r.status in (400, 404) and b"def app" not in r.body, target


def test_limits_from_options_and_environment(served: Served) -> None:
    assert get(served.port, "/api/" + "a" * 300).status == 414
    assert get(served.port, "/api/", [(f"X-{i}", "v") for i in range(10)]).status == 431
    assert get(served.port, "/api/", [(f"X-{i}", "v") for i in range(5)]).status == 200


def test_access_log_lines(served: Served) -> None:
    def logged_lines() -> list[str]:
        return served.access_log.read_text().splitlines()

    static_before = sum("/s/big.bin" in ln for ln in logged_lines())  # earlier tests fetched it
    get(served.port, "/api/logged?q=1", [("User-Agent", "probe/1"), ("Referer", "http://r/"),
                                         ("X-Forwarded-For", "192.0.2.44")])
    get(served.port, "/s/big.bin")
    with HttpConnection(served.port) as c:  # refused by the server itself: logged too
        c.send_raw(b'GET /api/bad"\xe9 HTTP/1.1\r\nHost: x\r\n\r\n')
        assert c.read_response().status == 400
    # A line is written after its response has left, so the client can be ahead of the file.
    lines: list[str] = []

    def all_logged() -> bool:
        nonlocal lines
        lines = logged_lines()
        return (sum("/s/big.bin" in ln for ln in lines) > static_before
                and any("/api/logged?q=1" in ln for ln in lines)
                and any("/api/bad" in ln for ln in lines))

    wait_for(all_logged, 5, lambda: f"the three requests in the access log: {lines}",
             interval=0.05)
    parsed = [ACCESS_LINE.match(line) for line in lines]
    assert all(parsed), [ln for ln, m in zip(lines, parsed, strict=True) if not m]
    by_request = {m["request"]: m for m in parsed if m}
    logged = by_request["GET /api/logged?q=1 HTTP/1.1"]
    assert logged["client"] == "192.0.2.44" and logged["status"] == "200"
    assert logged["agent"] == "probe/1" and logged["referer"] == "http://r/"
    assert 0 < float(logged["seconds"]) < 5
    static = by_request["GET /s/big.bin HTTP/1.1"]
    assert static["bytes"] == str(len(served.big)) and static["client"] == "127.0.0.1"
    # The raw request line, escaped as nginx escapes it; the refusal's body size.
    refused = by_request["GET /api/bad\\x22\\xe9 HTTP/1.1"]
    assert refused["status"] == "400" and refused["bytes"] == "12"
    assert refused["client"] == "127.0.0.1"


BIG_RESPONSE_APP = '''\
def app(environ, start_response):
    if environ["PATH_INFO"] == "/ready":  # small: a probe on a busy machine is not cut off
        start_response("200 OK", [("Content-Length", "3")])
        return [b"ok\\n"]
    piece = b"x" * (1 << 20)
    start_response("200 OK", [("Content-Length", str(32 * len(piece)))])
    return (piece for _ in range(32))
'''


def test_send_timeout_closes_a_client_that_stops_reading(tmp_path: Path) -> None:
    # 32 MiB owed to a client that reads nothing: after --send-timeout-ms without progress
    # the server closes the connection instead of holding the rest for it.
    (tmp_path / "big_response.py").write_text(BIG_RESPONSE_APP)
    port = free_port()
    cli = CLI(tmp_path, "big_response:app", "--port", str(port), "--send-timeout-ms", "300")
    try:
        # The probes ask for a small answer: a 32 MiB one, read by a client starved of CPU
        # for 300 ms, is cut off by the very timeout under test.
        cli.wait_http(port, "/ready")
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
            sock.connect(("127.0.0.1", port))
            sock.sendall(raw_request("GET", "/"))
            time.sleep(2.0)  # many send timeouts long, reading nothing
            sock.settimeout(10)
            received = 0
            try:
                while chunk := sock.recv(1 << 20):
                    received += len(chunk)
            except ConnectionResetError:
                pass
        assert 0 < received < 32 << 20  # cut off, not waited for
        assert get(port, "/ready").status == 200  # and the server goes on
    finally:
        assert cli.stop() == 0, cli.err
