"""The `cymongoose` command line: what a user gets wrong is one line on stderr and exit
status 2, never a traceback, whether one process serves or a supervisor runs workers."""

from __future__ import annotations

import platform
import socket
import subprocess
from pathlib import Path

import pytest
from support.cli_run import CLI, cli_env, run_cli, self_signed_cert
from support.http_client import get
from support.ports import free_port

from cymongoose import MONGOOSE_VERSION, TLS_ENGINE, __version__

pytestmark = pytest.mark.timeout(60)


def _one_line(err: str, message: str) -> None:
    assert err.count("\n") == 1 and message in err and "Traceback" not in err, err


def test_serves_the_app_from_the_working_directory(tmp_path: Path) -> None:
    port = free_port()
    cli = CLI(tmp_path, "cli_app:app", "--port", str(port), "--threads", "2",
              "--root-path", "/api")
    cli.wait_http(port)
    assert get(port, "/api/x").body.endswith(b"|/api|/x")
    assert cli.stop() == 0, cli.err


@pytest.mark.parametrize("args,message", [
    (["no_such_module:app"], "cannot import module 'no_such_module'"),
    (["cli_app:missing"], "has no attribute 'missing'"),
    (["cli_app"], "module:attribute"),
    (["cli_app:missing", "--workers", "2"], "has no attribute 'missing'"),
    (["cli_app:app", "--uds", "/tmp/x.sock", "--fd", "3"], "either --uds or --fd"),
    (["cli_app:app", "--ssl-certfile", "c.pem"], "needs both"),
    (["cli_app:app", "--static", "/s=/no/such/dir"], "is not a directory"),
    (["cli_app:app", "--forwarded-allow-ips", "10.0.0.300"], "is not an IP address"),
    (["cli_app:app", "--access-log", "--access-log-format", "%(zz)s"], "unknown atom"),
    (["cli_app:app", "--log-config", "nope.json"], "no such file"),
    (["cli_app:app", "--interface", "raw", "--access-log"], "need a WSGI or ASGI app"),
    (["cli_app:app", "--interface", "asgi", "--static", "/s=/no/such/dir"],
     "is not a directory"),
    ([], "give the app"),
    (["cli_app:app", "--port", "99999"], "--port must be 0..65535"),
    (["cli_app:app", "--port", "-1"], "--port must be 0..65535"),
    (["cli_app:app", "--reload", "--workers", "2"], "--reload serves from one process"),
    (["cli_app:app", "--reload", "--max-requests", "9"], "--reload serves from one process"),
    (["cli_app:app", "--host", "no-such-host.invalid"], "cannot listen on no-such-host"),
    (["cli_app:app", "--host", "192.0.2.1"], "cannot listen on 192.0.2.1"),  # not ours
])
def test_a_mistake_is_one_line_and_exit_2(tmp_path: Path, args: list[str],
                                          message: str) -> None:
    done = run_cli(tmp_path, "--port", str(free_port()), *args)
    assert done.returncode == 2
    _one_line(done.stderr, message)


def test_a_bad_environment_variable_is_one_line(tmp_path: Path) -> None:
    done = run_cli(tmp_path, "cli_app:app", env=cli_env(CYMONGOOSE_PORT="eighty"))
    assert done.returncode == 2
    _one_line(done.stderr, "CYMONGOOSE_PORT='eighty'")
    done = run_cli(tmp_path, env=cli_env(CYMONGOOSE_APP="cli_app:nothing"))
    assert done.returncode == 2
    _one_line(done.stderr, "has no attribute 'nothing'")


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path, workers: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        done = run_cli(tmp_path, "cli_app:app", "--port", str(taken.getsockname()[1]),
                       "--workers", workers)
    assert done.returncode == 2
    _one_line(done.stderr, "is the port in use?")


def test_version(tmp_path: Path) -> None:
    done = run_cli(tmp_path, "--version")
    assert done.returncode == 0
    assert done.stdout.strip() == (f"cymongoose {__version__} (Mongoose {MONGOOSE_VERSION}, "
                                   f"TLS {TLS_ENGINE}, {platform.python_implementation()} "
                                   f"{platform.python_version()})")


def _bad_tls_files(tmp_path: Path, case: str) -> tuple[str, str]:
    """A certificate file and a key file that must stop the server at start-up."""
    self_signed_cert(tmp_path)
    if case == "foreign key":
        self_signed_cert(tmp_path, stem="other-")
        return "cert.pem", "other-key.pem"
    if case == "encrypted key":
        subprocess.run(["openssl", "pkey", "-in", "key.pem", "-aes256", "-passout", "pass:x",
                        "-out", "locked-key.pem"], cwd=tmp_path, check=True,
                       capture_output=True)
        return "cert.pem", "locked-key.pem"
    return "key.pem", "key.pem"  # the key file given as the certificate


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("case,message", [
    ("foreign key", "does not belong"),
    ("encrypted key", "encrypted"),
    ("key as certificate", "not a certificate file"),
])
def test_a_bad_tls_file_stops_at_start_up(tmp_path: Path, case: str, message: str,
                                          workers: str) -> None:
    cert, key = _bad_tls_files(tmp_path, case)
    done = run_cli(tmp_path, "cli_app:app", "--port", str(free_port()), "--workers", workers,
                   "--ssl-certfile", cert, "--ssl-keyfile", key)
    assert done.returncode == 2
    _one_line(done.stderr, message)
    assert "serving" not in done.stderr and "ready" not in done.stderr


def test_help_gives_the_limits_defaults(tmp_path: Path) -> None:
    out = " ".join(run_cli(tmp_path, "--help").stdout.split())
    assert "bytes of a request body at most (413; at most 1 GiB); default 16 MiB" in out
    assert "to receive a whole request head (408); default 30 s" in out
