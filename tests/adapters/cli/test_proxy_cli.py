"""`cymongoose --proxy` end to end: a pure reverse proxy over two workers with the access
log, routes in front of a WSGI app, and wrong values refused in one line with exit 2."""

from __future__ import annotations

import re
import signal
from pathlib import Path
from typing import Any

import pytest
from support.cli_run import CLI, run_cli
from support.http_client import HttpConnection
from support.ports import free_port
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(60)


def test_a_pure_proxy_over_two_workers_with_the_access_log(upstream: Any,
                                                           tmp_path: Path) -> None:
    one, two = upstream("one"), upstream("two")
    port = free_port()
    cli = CLI(tmp_path, "--proxy", f"/={one.url},{two.url}", "--proxy-pool-size", "2",
              "--workers", "2", "--access-log", "--port", str(port))
    try:
        cli.wait_http(port, "/ready")
        names = set()
        for _ in range(3):
            with HttpConnection(port) as client:
                for i in range(8):
                    resp = client.request("GET", f"/r{i}")
                    assert resp.status == 200
                    names.add(resp.body.split()[0])
        assert names == {b"one", b"two"}
        assert one.accepted + two.accepted <= 2 * 2 * 2  # pool size x upstreams x workers
    finally:
        cli.stop()
    lines = [line for line in cli.out.splitlines() if re.search(r'"GET /r\d ', line)]
    assert len(lines) == 24, cli.out
    assert all(re.search(r'"GET /r\d HTTP/1.1" 200 ', line) for line in lines)
    assert f"proxying /={one.url},{two.url} on http://127.0.0.1:{port}" in cli.err


def test_routes_in_front_of_a_wsgi_app(upstream: Any, tmp_path: Path) -> None:
    api = upstream("api")
    port = free_port()
    cli = CLI(tmp_path, "cli_app:app", "--proxy", f"/api={api.url}", "--port", str(port))
    try:
        cli.wait_http(port)
        with HttpConnection(port) as client:
            assert client.request("GET", "/api/x").body == b"api GET /api/x\n"
            assert client.request("GET", "/page").body.split(b"|")[5] == b"/page"
    finally:
        cli.stop()


@pytest.mark.parametrize(("args", "words"), [
    (["--proxy", "api=http://x"], "--proxy must be PREFIX=URL"),
    (["--proxy-pool-size", "4", "cli_app:app"], "--proxy-pool-size needs --proxy"),
    (["--proxy", "/=http://nowhere.invalid"], "cannot resolve 'nowhere.invalid'"),
])
def test_wrong_values_are_one_line_and_exit_2(tmp_path: Path, args: list[str],
                                              words: str) -> None:
    done = run_cli(tmp_path, *args, "--port", str(free_port()))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], done.stderr


def test_sigterm_lets_a_proxied_request_in_flight_finish(upstream: Any,
                                                         tmp_path: Path) -> None:
    up = upstream("slow")
    up.answers["/slow"] = lambda conn, msg: up.thread.manager.timer_add(
        600, lambda: conn.reply(200, "finished\n"))
    port = free_port()
    cli = CLI(tmp_path, "--proxy", f"/={up.url}", "--port", str(port))
    try:
        cli.wait_http(port, "/ready")
        with HttpConnection(port, timeout=10) as client:
            client.send_request("GET", "/slow")
            wait_for(lambda: len(up.seen) == 2, 5, "len(up.seen) == 2")  # it reached the upstream
            cli.send(signal.SIGTERM)
            resp = client.read_response()
            assert (resp.status, resp.body) == (200, b"finished\n")
        cli.proc.wait(20)  # the drain ends by itself: no second signal
    finally:
        cli.stop()
    assert cli.proc.returncode == 0, cli.err
    assert "stopping, finishing the requests in flight" in cli.err


def test_a_proxied_request_is_logged_escaped(tmp_path: Path) -> None:
    """A target with `"` and `\\` through a pure proxy whose upstream is down: the error log's
    warning and the access line both quote the request line escaped (log_escape), so the
    client cannot close the quoted request early."""
    port, dead = free_port(), free_port()
    cli = CLI(tmp_path, "--proxy", f"/=http://127.0.0.1:{dead}", "--access-log",
              "--port", str(port))
    try:
        cli.wait_http(port, "/ready")
        with HttpConnection(port) as client:
            client.send_raw(b'GET /x"y\\z HTTP/1.1\r\nHost: h\r\n\r\n')
            assert client.read_response().status in (502, 503, 504)
    finally:
        cli.stop()
    assert r'"GET /x\x22y\x5cz HTTP/1.1"' in cli.err, cli.err
    assert 'x"y' not in cli.err + cli.out
    assert re.search(r'"GET /x\\x22y\\x5cz HTTP/1\.1" 50\d ', cli.out), cli.out
