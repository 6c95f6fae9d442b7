"""What `cymongoose --proxy` writes about proxied requests and failing upstreams, read from
the server's own output with real backends: access-log lines with the client's Referer,
User-Agent and the real duration; one line per failure, naming the real reason (the errno
of a refused connect, the refused certificate); health-check changes once each."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.backend_process import BackendProcess
from support.cli_log import LoggingCLI
from support.cli_run import self_signed_cert
from support.http_client import HttpConnection
from support.ports import HOST, free_port

pytestmark = pytest.mark.timeout(90)

ASGI_APP = '''\
async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"app"})
'''


def _get(port: int, target: str, headers: list[tuple[str, str]] | None = None) -> int:
    with HttpConnection(port, timeout=20) as client:
        return client.request("GET", target, headers=headers or []).status


@pytest.mark.parametrize("app", [[], ["cli_app:app"], ["asgi_app:app", "--interface", "asgi"]],
                         ids=["pure proxy", "wsgi", "asgi"])
def test_a_proxied_request_is_logged_with_its_fields_and_duration(
        tmp_path: Path, app: list[str]) -> None:
    (tmp_path / "asgi_app.py").write_text(ASGI_APP)
    backend = BackendProcess().start()
    port = free_port()
    cli = LoggingCLI(tmp_path, *app, "--proxy", f"/api={backend.url}", "--access-log",
                     "--port", str(port))
    try:
        cli.wait_port(port)
        assert _get(port, "/api/slow?q=1", [("Referer", "http://ref.example/page"),
                                            ("User-Agent", "probe-agent/1.0")]) == 200
        assert _get(port, "/api/fast") == 200  # no Referer, no User-Agent
        cli.wait_lines(r'"GET /api/fast ', stdout=True)
    finally:
        cli.stop()
        backend.stop()
    slow = [line for line in cli.out.splitlines() if '"GET /api/slow?q=1 HTTP/1.1" 200 ' in line]
    assert len(slow) == 1, cli.out
    assert slow[0].endswith('"http://ref.example/page" "probe-agent/1.0" '
                            + slow[0].rsplit(" ", 1)[1]), slow[0]
    # The backend waited 0.2 s: the duration runs from the head to the response's end.
    assert 0.2 <= float(slow[0].rsplit(" ", 1)[1]) < 20, slow[0]
    fast = [line for line in cli.out.splitlines() if '"GET /api/fast HTTP/1.1" 200 ' in line]
    assert len(fast) == 1 and re.search(r'"-" "-" \d+\.\d{6}$', fast[0]), cli.out


def test_a_refused_upstream_is_one_warning_with_the_real_errno(tmp_path: Path) -> None:
    dead = free_port()
    port = free_port()
    cli = LoggingCLI(tmp_path, "--proxy", f"/=http://{HOST}:{dead}", "--port", str(port))
    try:
        cli.wait_port(port)
        assert [_get(port, f"/r{i}") for i in range(3)] == [502] * 3
        cli.wait_lines(r'"GET /r2 ')
    finally:
        cli.stop()
    about = [line for line in cli.err.splitlines() if str(dead) in line and "proxying" not in line]
    assert len(about) == 3, cli.err  # one line per request, nothing before it
    assert all(" WARNING " in line and "cannot connect to the upstream (Connection refused)"
               in line for line in about), cli.err
    assert "in progress" not in cli.err and " ERROR " not in cli.err, cli.err


def test_a_refused_tls_upstream_is_one_warning_with_the_reason(tmp_path: Path) -> None:
    self_signed_cert(tmp_path)  # not in the system's trust store: the proxy refuses it
    backend = BackendProcess(cert=tmp_path / "cert.pem", key=tmp_path / "key.pem").start()
    port = free_port()
    cli = LoggingCLI(tmp_path, "--proxy", f"/=https://localhost:{backend.port}", "--port",
                     str(port))
    try:
        cli.wait_port(port)
        assert [_get(port, f"/r{i}") for i in range(2)] == [502] * 2
        cli.wait_lines(r'"GET /r1 ')
    finally:
        cli.stop()
        backend.stop()
    about = [line for line in cli.err.splitlines()
             if str(backend.port) in line and "proxying" not in line]
    assert len(about) == 2, cli.err
    assert all(" WARNING " in line and "TLS: the peer's certificate was refused" in line
               for line in about), cli.err
    assert " ERROR " not in cli.err, cli.err


def test_a_down_upstream_under_health_checks_is_logged_once_per_change(
        tmp_path: Path) -> None:
    backend = BackendProcess().start()
    port = free_port()
    # Debug level: Mongoose's line for each probe's connect counts the probes.
    cli = LoggingCLI(tmp_path, "--proxy", f"/={backend.url}", "--proxy-health-path", "/health",
                     "--proxy-health-interval", "0.1", "--log-level", "debug", "--port",
                     str(port))
    # mg_connect_svc's line: "<id> -1 <url>". Its function name is not matched: Mongoose
    # cuts its prefix ("<ms in hex> <level> <file:line:function>") at 40 characters, so the
    # name loses a letter once mg_millis() has 7 hex digits (after 4.7 hours of uptime).
    probe = rf"mongoose\.c:\d+:mg_conn\w*: \d+ -1 tcp://{HOST}:{backend.port}$"
    failed, passed = "failed its health check", "passes its health check again"
    try:
        cli.wait_port(port)
        cli.wait_lines(probe, 2)
        # A probe slower than the interval fails too: on a loaded machine the upstream may
        # go out and back (or be out already) when it stops, a change logged each time.
        before = cli.wait_lines(failed, 0)
        backend.stop()
        cli.wait_lines(probe, len(cli.wait_lines(probe)) + 12)  # 10 refused probes at least
        during = cli.wait_lines(failed, 0)[len(before):]
        assert len(during) <= 1, during  # (its reason: the probe cut by the stop, or refused)
        passes = len(cli.wait_lines(passed, 0))
        backend.start()
        cli.wait_lines(passed, passes + 1)
    finally:
        cli.stop()
        backend.stop()
    changes = [line for line in cli.err.splitlines() if failed in line or passed in line]
    # Each line is a change: out, back, out, back...
    assert all((failed if n % 2 == 0 else passed) in line for n, line in enumerate(changes))
    assert " ERROR " not in cli.err, cli.err  # 0.2.x: one per refused probe
