"""What a new user met on the command line (issue 33, items 17, 21 and 24): a 413 for the
body limit that the log did not mention, a failed lifespan start-up reported as a bind
failure with two tracebacks and exit status 2, and the small options uvicorn has
(--env-file, --no-server-header) with the fields a server sets itself (Date on its own
answers, SERVER_SOFTWARE)."""

from __future__ import annotations

import http.client
import re
import socket
import time
from email.utils import parsedate_to_datetime
from pathlib import Path

import pytest
from support.cli_run import CLI, cli_env, run_cli
from support.ports import free_port
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(90)

STARLETTE_FAILING = '''
from contextlib import asynccontextmanager

from starlette.applications import Starlette


@asynccontextmanager
async def lifespan(app):
    raise RuntimeError("database unreachable")
    yield


app = Starlette(lifespan=lifespan)
'''

ENV_APP = '''
import os


def app(environ, start_response):
    body = "|".join([os.environ.get("GREETING", "-"), os.environ.get("KEPT", "-"),
                     os.environ.get("QUOTED", "-"), environ.get("SERVER_SOFTWARE", "-")])
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [body.encode()]
'''


def _request(port: int, method: str = "GET", path: str = "/", body: bytes | None = None,
             headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request(method, path, body=body, headers=headers or {})
    resp = c.getresponse()
    resp.read()
    c.close()
    return resp


@pytest.mark.parametrize("workers", [[], ["--workers", "2"]], ids=["one", "supervised"])
def test_a_failed_lifespan_startup_exits_3_with_one_traceback(tmp_path: Path,
                                                              workers: list[str]) -> None:
    (tmp_path / "failing.py").write_text(STARLETTE_FAILING)
    port = free_port()
    done = run_cli(tmp_path, "failing:app", "--port", str(port), *workers, timeout=60)
    err = done.stderr
    assert done.returncode == 3, err  # uvicorn's status; 2 before
    assert "cannot serve on" not in err, err  # the bind was fine
    # Starlette sends its traceback as the failure message and raises: each worker that
    # got that far logs it once (0.2.x: twice, and again in the "cannot serve" line).
    pids = re.findall(r"\[(\d+)\] ERROR", err)
    assert pids and all(pids.count(pid) == 1 for pid in pids), err
    assert err.count("Traceback (most recent call last)") == len(pids), err
    assert "lifespan startup failed (RuntimeError: database unreachable); not serving" in err


def test_an_upload_over_the_body_limit_is_logged_at_warning_once(tmp_path: Path) -> None:
    port = free_port()
    cli = CLI(tmp_path, "cli_app:app", "--port", str(port), "--max-body-size", "1024")
    try:
        cli.wait_http(port)
        for _ in range(3):
            resp = _request(port, "POST", "/upload", b"x" * 4096)
            assert resp.status == 413
            # The server's own answer carries a Date, as any other response.
            assert parsedate_to_datetime(resp.headers["Date"]).tzinfo is not None
    finally:
        assert cli.stop() == 0, cli.err
    warnings = [ln for ln in cli.err.splitlines() if "WARNING" in ln and "413" in ln]
    # One line for the three (at most one per 10 s; a later one, should the machine be
    # that slow, counts the 413s it did not tell), naming the option that sets the limit.
    assert 1 <= len(warnings) < 3, cli.err
    assert all("more 413s since the last such warning" in w for w in warnings[1:]), warnings
    assert "--max-body-size" in warnings[0] and "1 KiB" in warnings[0], warnings


def test_server_header_is_sent_unless_no_server_header(tmp_path: Path) -> None:
    for flags, want in (([], "cymongoose"), (["--no-server-header"], None)):
        port = free_port()
        cli = CLI(tmp_path, "cli_app:app", "--port", str(port), *flags)
        try:
            cli.wait_http(port)
            resp = _request(port)
            assert resp.status == 200 and resp.headers["Date"]
            assert resp.headers.get("Server") == want, resp.headers
        finally:
            assert cli.stop() == 0, cli.err


def test_env_file_reaches_the_app_before_it_loads(tmp_path: Path) -> None:
    (tmp_path / "env_app.py").write_text(ENV_APP)
    (tmp_path / "app.env").write_text(
        "# the app's settings\n\nexport GREETING=hello # a comment\nKEPT=from-file\n"
        "QUOTED=\"a b\\tc\"\nCYMONGOOSE_PORT=1\n")
    port = free_port()
    cli = CLI(tmp_path, "env_app:app", "--port", str(port), "--env-file", "app.env",
              env=cli_env(KEPT="from-environment"))
    try:
        cli.wait_http(port)
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/")
        body = c.getresponse().read().decode()
        c.close()
    finally:
        assert cli.stop() == 0, cli.err
    # A variable already set wins (uvicorn's and python-dotenv's rule).
    assert body == "hello|from-environment|a b\tc|cymongoose/0.3.0", body
    assert "CYMONGOOSE_PORT" in cli.err and "only the app sees them" in cli.err


def test_a_bad_env_file_is_one_line_naming_the_option(tmp_path: Path) -> None:
    (tmp_path / "bad.env").write_text("GOOD=1\nthis is not a setting\n")
    done = run_cli(tmp_path, "cli_app:app", "--env-file", "bad.env")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "cymongoose: --env-file: bad.env, line 2: not a KEY=VALUE line"], done.stderr
    done = run_cli(tmp_path, "cli_app:app", "--env-file", "missing.env")
    assert done.returncode == 2
    assert done.stderr.strip() == ("cymongoose: --env-file must be a readable file, not "
                                   "'missing.env': no such file"), done.stderr


def test_log_config_yaml_without_pyyaml_names_the_option_once(tmp_path: Path) -> None:
    (tmp_path / "log.yaml").write_text("version: 1\n")
    fake = tmp_path / "no_yaml"
    fake.mkdir()
    (fake / "yaml.py").write_text("raise ImportError('PyYAML is not installed')\n")
    done = run_cli(tmp_path, "cli_app:app", "--port", "0", "--log-config", "log.yaml",
                   env=cli_env(PYTHONPATH=str(fake)))
    assert done.returncode == 2
    assert done.stderr.count("--log-config") == 1, done.stderr
    assert "YAML needs PyYAML" in done.stderr


def test_one_worker_is_announced_in_the_singular(tmp_path: Path) -> None:
    port = free_port()
    cli = CLI(tmp_path, "cli_app:app", "--port", str(port), "--workers", "1",
              "--max-requests", "1000")
    try:
        cli.wait_http(port)
    finally:
        assert cli.stop() == 0, cli.err
    assert "1 worker of cli_app:app ready" in cli.err, cli.err
    assert "stopping: draining 1 worker" in cli.err and "1 workers" not in cli.err, cli.err


def test_health_and_refusals_the_core_makes_carry_a_date(tmp_path: Path) -> None:
    port = free_port()
    cli = CLI(tmp_path, "cli_app:app", "--port", str(port), "--health-path", "/healthz")
    try:
        # The port answers 503 from the start: wait for the app's readiness.
        wait_for(lambda: (r := _probe(port, "/healthz")) is not None and r.status == 200, 30,
                 lambda: f"/healthz to answer 200 ({cli.err})")
        assert parsedate_to_datetime(_request(port, path="/healthz").headers["Date"])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")
            got = b""
            while b"\r\n\r\n" not in got:
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
        assert got.startswith(b"HTTP/1.1 400 ") and b"\r\nDate: " in got, got
        wait_for(lambda: cli.proc.poll() is None, 5.0, "cli.proc.poll() is None")
    finally:
        assert cli.stop() == 0, cli.err


SLOW_ASGI = '''
import asyncio
import pathlib


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        await receive()
        while not pathlib.Path("go").exists():  # the test says when start-up ends
            await asyncio.sleep(0.02)
        await send({"type": "lifespan.startup.complete"})
        await receive()
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"app"})
'''

SLOW_WSGI = '''
import pathlib
import time

pathlib.Path("importing").write_text("yes")
for _ in range(6000):  # the import ends when the test says so (at most 60 s)
    if pathlib.Path("go").exists():
        break
    time.sleep(0.01)


def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"app"]
'''


def _probe(port: int, path: str) -> http.client.HTTPResponse | None:
    try:
        return _request(port, path=path)
    except OSError:
        return None  # refused, or not answered within the timeout


@pytest.mark.parametrize("kind,workers", [("asgi", []), ("wsgi", []),
                                          ("wsgi", ["--workers", "2"])],
                         ids=["asgi-lifespan", "wsgi-import", "wsgi-import-supervised"])
def test_health_path_answers_503_from_the_moment_the_port_listens(
        tmp_path: Path, kind: str, workers: list[str]) -> None:
    (tmp_path / "slow_app.py").write_text(SLOW_ASGI if kind == "asgi" else SLOW_WSGI)
    port = free_port()
    cli = CLI(tmp_path, "slow_app:app", "--port", str(port), "--health-path", "/healthz",
              *workers)
    try:
        # Before: refused (WSGI import) or left waiting (ASGI lifespan), never 503.
        wait_for(lambda: _probe(port, "/healthz") is not None, 30,
                 lambda: f'_probe(port, "/healthz") is not None ({cli.err})')
        health = _probe(port, "/healthz")
        assert health is not None and health.status == 503, cli.err
        assert health.read() == b"" and health.headers["Cache-Control"] == "no-store"
        other = _probe(port, "/anything")
        assert other is not None and other.status == 503
        assert other.headers["Retry-After"] == "1" and other.headers["Date"]
        (tmp_path / "go").write_text("go")
        # While the server takes over, a request gets the app's answer or the 503 of the
        # start-up, never a reset; from the app's first answer on, every answer is the
        # server's own: the health path says 200 and the app answers, never the start-up
        # 503 again. Asked back to back, one connection each, so the hand-over is hit:
        # with --workers the supervisor stops its start-up answers before a worker may
        # accept (a worker that accepted beside them had some clients told 503 after
        # others got 200).
        outcomes: list[tuple[int, str]] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and sum(s == 200 for s, _ in outcomes) < 100:
            path = ("/healthz", "/")[len(outcomes) % 2]
            r = _probe(port, path)
            outcomes.append((0 if r is None else r.status, path))
        assert sum(s == 200 for s, _ in outcomes) == 100, (outcomes, cli.err)
        first_200 = next(i for i, (s, _) in enumerate(outcomes) if s == 200)
        assert {s for s, _ in outcomes[:first_200]} <= {503}, outcomes
        assert {s for s, _ in outcomes[first_200:]} == {200}, outcomes
    finally:
        assert cli.stop() == 0, cli.err


def test_the_proxy_s_own_502_carries_a_date(tmp_path: Path) -> None:
    port = free_port()
    dead = free_port()  # nothing listens there: every request is answered 502 by the proxy
    cli = CLI(tmp_path, "--port", str(port), "--proxy", f"/=http://127.0.0.1:{dead}",
              "--health-path", "/healthz")
    try:
        wait_for(lambda: (r := _probe(port, "/healthz")) is not None and r.status == 200, 30,
                 lambda: f"/healthz to answer 200 ({cli.err})")
        resp = _request(port, path="/x")
        assert resp.status == 502
        assert parsedate_to_datetime(resp.headers["Date"]).tzinfo is not None
    finally:
        assert cli.stop() == 0, cli.err
