"""--reload picks up an edited file; --log-config as JSON, YAML and INI; the JSON access log."""

from __future__ import annotations

import json
import re
import socket
import ssl
import struct
import time
from pathlib import Path

import pytest
from support.cli_run import CLI, cli_env, https_raw_get, run_cli, self_signed_cert
from support.http_client import get
from support.kernel_view import inotify_watches
from support.ports import free_port
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(60)

VERSIONED = '''
def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"version %d"]
'''


def test_reload_picks_up_an_edited_file(tmp_path: Path) -> None:
    (tmp_path / "versioned.py").write_text(VERSIONED % 1)
    port = free_port()
    cli = CLI(tmp_path, "versioned:app", "--port", str(port), "--reload")
    try:
        cli.wait_http(port)
        assert get(port, "/").body == b"version 1"
        # The watcher is up (it starts with the first child).
        wait_for(lambda: inotify_watches(cli.proc.pid) > 0, 20, "the reloader's watches")
        (tmp_path / "versioned.py").write_text(VERSIONED % 2)

        def body() -> bytes:
            try:
                return get(port, "/").body
            except OSError:
                return b""

        wait_for(lambda: body() == b"version 2", 20, lambda: f'body() == b"version 2" ({cli.err})')
    finally:
        assert cli.stop() == 0, cli.err
    assert "changed: restarting" in cli.err


def test_reload_dir_watches_only_the_directories_named(tmp_path: Path) -> None:
    watched = tmp_path / "pkg"
    watched.mkdir()
    (watched / "versioned.py").write_text(VERSIONED % 1)
    (tmp_path / "elsewhere.py").write_text("x = 1\n")
    port = free_port()
    cli = CLI(tmp_path, "versioned:app", "--port", str(port), "--reload", "--reload-dir",
              str(watched), env=cli_env(PYTHONPATH=str(watched)))
    try:
        cli.wait_http(port)
        wait_for(lambda: inotify_watches(cli.proc.pid) > 0, 20, "the reloader's watches")
        (tmp_path / "elsewhere.py").write_text("x = 2\n")  # not watched: no restart
        time.sleep(1.0)
        assert get(port, "/").body == b"version 1"
        (watched / "versioned.py").write_text(VERSIONED % 2)

        def body() -> bytes:
            try:
                return get(port, "/").body
            except OSError:
                return b""

        wait_for(lambda: body() == b"version 2", 20, lambda: f'body() == b"version 2" ({cli.err})')
    finally:
        assert cli.stop() == 0, cli.err
    assert cli.err.count("changed: restarting") == 1, cli.err
    done = run_cli(tmp_path, "versioned:app", "--reload", "--reload-dir", str(tmp_path / "no"))
    assert done.returncode == 2 and "is not a directory" in done.stderr, done.stderr


LOG_JSON = {
    "version": 1,
    "formatters": {"plain": {"format": "%(name)s %(levelname)s %(message)s"}},
    "handlers": {"file": {"class": "logging.FileHandler", "filename": "{out}",
                          "formatter": "plain"}},
    "loggers": {"cymongoose": {"handlers": ["file"], "level": "INFO", "propagate": False},
                "cymongoose.access": {"handlers": ["file"], "level": "INFO",
                                      "propagate": False}},
}

LOG_INI = """\
[loggers]
keys=root,cymongoose
[handlers]
keys=file
[formatters]
keys=plain
[logger_root]
level=WARNING
handlers=
[logger_cymongoose]
level=INFO
handlers=file
qualname=cymongoose
propagate=0
[handler_file]
class=FileHandler
formatter=plain
args=('{out}',)
[formatter_plain]
format=%(name)s %(levelname)s %(message)s
"""


@pytest.mark.parametrize("kind", ["json", "yaml", "ini"])
def test_log_config_files(tmp_path: Path, kind: str) -> None:
    out = tmp_path / "server.log"
    if kind == "ini":
        text = LOG_INI.replace("{out}", str(out))
    else:
        config = json.loads(json.dumps(LOG_JSON).replace("{out}", str(out)))
        text = json.dumps(config)  # JSON is YAML too
    (tmp_path / f"log.{kind}").write_text(text)
    port = free_port()
    extra = ["--access-log-format", "json"] if kind == "yaml" else []
    cli = CLI(tmp_path, "cli_app:app", "--port", str(port), "--log-config", f"log.{kind}",
              *extra)
    try:
        cli.wait_http(port)
        get(port, "/configured?x=1", [("User-Agent", "t/1")])
    finally:
        assert cli.stop() == 0, cli.err
    lines = out.read_text().splitlines()
    assert any(ln.startswith("cymongoose.error INFO serving cli_app:app") for ln in lines)
    if kind == "yaml":  # the access log, as JSON, through the user's handler
        records = [json.loads(ln.split(" ", 2)[2]) for ln in lines
                   if ln.startswith("cymongoose.access INFO {")]
        rec = next(r for r in records if r["path"] == "/configured")
        assert rec["query"] == "x=1" and rec["status"] == 200 and rec["method"] == "GET"
        assert rec["client"] == "127.0.0.1" and rec["user_agent"] == "t/1"
        assert rec["bytes"] > 0 and 0 <= rec["duration_ms"] < 5000


# An app that configures logging while it is imported, as Django does: dictConfig closes
# every handler that exists, the access log's writer among them.
CONFIGURES_LOGGING = '''
import logging.config

logging.config.dictConfig({"version": 1, "disable_existing_loggers": %s,
                           "handlers": {"console": {"class": "logging.StreamHandler"}},
                           "root": {"handlers": ["console"], "level": "WARNING"}})


def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"configured"]
'''


@pytest.mark.parametrize("to_file,disable", [(True, False), (False, True)])
def test_access_log_survives_an_app_that_configures_logging(tmp_path: Path, to_file: bool,
                                                            disable: bool) -> None:
    (tmp_path / "logs_app.py").write_text(CONFIGURES_LOGGING % disable)
    port = free_port()
    where = ["--access-log-file", "access.log"] if to_file else []
    cli = CLI(tmp_path, "logs_app:app", "--port", str(port), "--access-log", *where)
    try:
        cli.wait_http(port)
        for i in range(3):
            assert get(port, f"/after-dictconfig/{i}").body == b"configured"
    finally:
        assert cli.stop() == 0, cli.err
    out = (tmp_path / "access.log").read_text() if to_file else cli.out
    lines = [ln for ln in out.splitlines() if "/after-dictconfig/" in ln]
    assert len(lines) == 3 and all('" 200 ' in ln for ln in lines), out
    assert "serving logs_app:app" in cli.err  # the server's own log is not silenced either


def _reset(port: int, data: bytes) -> None:
    """Connect, send `data`, then close with a reset (SO_LINGER 0)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        if data:
            s.sendall(data)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _plain_http_to(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            return s.recv(100)
        except ConnectionResetError:
            return b""


@pytest.mark.parametrize("level", ["warning", "info", "debug"])
def test_a_client_reset_and_plain_http_on_tls_are_one_quiet_line(tmp_path: Path,
                                                                  level: str) -> None:
    """A reset is one DEBUG line with the peer, a failed TLS handshake one INFO line: never
    Mongoose's ERROR lines with a connection number and no address."""
    self_signed_cert(tmp_path)
    port, tls_port = free_port(), free_port()
    plain = CLI(tmp_path, "cli_app:app", "--port", str(port), "--log-level", level)
    tls = CLI(tmp_path, "cli_app:app", "--port", str(tls_port), "--log-level", level,
              "--ssl-certfile", "cert.pem", "--ssl-keyfile", "key.pem")
    try:
        plain.wait_http(port)
        ctx = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
        wait_for(lambda: https_raw_get(tls_port, ctx, "/up") is not None, 20,
                 lambda: f'https_raw_get(tls_port, ctx, "/up") is not None ({tls.err})')
        assert _plain_http_to(tls_port) == b""  # refused: no HTTP answer in clear text
        _reset(port, b"GET /half HTTP/1.1\r\nHost: x\r\n")  # a reset mid-request
        get(port, "/after")  # the server goes on
    finally:
        assert plain.stop() == 0, plain.err
        assert tls.stop() == 0, tls.err
    for err in (plain.err, tls.err):
        assert " ERROR " not in err, err
        # Mongoose's own lines ("mongoose.c:<line>:<function>: ...") only when asked for.
        assert level == "debug" or "mongoose.c:" not in err, err
    resets = [ln for ln in plain.err.splitlines() if "cymongoose.mongoose: client " in ln]
    handshakes = [ln for ln in tls.err.splitlines() if "cymongoose.mongoose: client " in ln]
    if level == "debug":
        assert len(resets) == 1 and " DEBUG " in resets[0], plain.err
        assert re.search(r"client 127\.0\.0\.1:\d+: (Connection reset by peer|connection reset)$",
                         resets[0])
    else:
        assert resets == [], plain.err
    if level == "warning":
        assert handshakes == [], tls.err
    else:
        assert len(handshakes) == 1 and " INFO " in handshakes[0], tls.err
        assert re.search(r"client 127\.0\.0\.1:\d+: TLS handshake failed: plain HTTP sent to "
                         r"the HTTPS port$", handshakes[0])
