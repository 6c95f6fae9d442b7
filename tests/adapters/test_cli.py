"""The `cymongoose` command line, end to end in a subprocess: it serves a WSGI app, and a
wrong app path or a port in use is one line on stderr and exit status 2."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.http_client import get
from support.ports import free_port

pytestmark = pytest.mark.timeout(60)

APP = 'def app(environ, start_response):\n' \
      '    start_response("200 OK", [("Content-Type", "text/plain")])\n' \
      '    return [environ["SCRIPT_NAME"].encode() + b"|hi"]\n'


def _cli(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    (tmp_path / "cli_app.py").write_text(APP)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return subprocess.Popen([sys.executable, "-m", "cymongoose", *args], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def test_serves_the_app_from_the_working_directory(tmp_path: Path) -> None:
    port = free_port()
    proc = _cli(tmp_path, "cli_app:app", "--port", str(port), "--threads", "2",
                "--root-path", "/api")
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                assert get(port, "/api/x").body == b"/api|hi"
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
                time.sleep(0.1)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err


@pytest.mark.parametrize("ref,message", [
    ("no_such_module:app", "cannot import module 'no_such_module'"),
    ("cli_app:missing", "missing"),
    ("cli_app", "module:attribute"),
])
def test_a_wrong_app_is_one_line_and_exit_2(tmp_path: Path, ref: str, message: str) -> None:
    proc = _cli(tmp_path, ref, "--port", str(free_port()))
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert err.count("\n") == 1 and message in err and "Traceback" not in err, err


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        proc = _cli(tmp_path, "cli_app:app", "--port", str(taken.getsockname()[1]))
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert err.count("\n") == 1 and "cannot listen" in err and "Traceback" not in err, err
