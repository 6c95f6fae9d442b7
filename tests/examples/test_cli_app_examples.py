"""Smoke tests: examples/wsgi_app.py and examples/asgi_app.py served by the command line,
with each `cymongoose ...` command their docstring shows (run as `python -m cymongoose` in a
copy of the examples directory, on a free loopback port), then stopped with SIGTERM."""

from __future__ import annotations

import ast
import http.client
import json
import shlex
import shutil
import signal
from pathlib import Path

import pytest
from support.cli_run import CLI
from support.ports import free_port
from support.ws_echo import assert_echoes

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

pytestmark = pytest.mark.timeout(60)


def _commands(example: str) -> list[list[str]]:
    """The arguments of each `cymongoose ...` line in the example's module docstring."""
    doc = ast.get_docstring(ast.parse((EXAMPLES / example).read_text())) or ""
    return [shlex.split(line)[1:] for line in map(str.strip, doc.splitlines())
            if line.startswith("cymongoose ")]


CASES = [(example, args) for example in ("wsgi_app.py", "asgi_app.py")
         for args in _commands(example)]


def _request(port: int, method: str, path: str, body: bytes = b"") -> tuple[int, dict[str, object]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body or None)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def test_every_example_shows_its_commands() -> None:
    assert {example for example, _ in CASES} == {"wsgi_app.py", "asgi_app.py"}
    assert all(len(_commands(example)) >= 2 for example in ("wsgi_app.py", "asgi_app.py"))


@pytest.mark.parametrize(("example", "args"), CASES,
                         ids=[f"{e[:-3]} {' '.join(a[1:])}" for e, a in CASES])
def test_example_serves_with_the_command_line(example: str, args: list[str],
                                             tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / example, tmp_path / example)
    port = free_port()
    # The documented command, kept on loopback and on a free port (the last option wins).
    cli = CLI(tmp_path, *args, "--host", "127.0.0.1", "--port", str(port))
    try:
        cli.wait_http(port)
        status, hello = _request(port, "GET", "/")
        assert (status, hello["message"], hello["client"]) == (200, "hello", "127.0.0.1")
        upload = bytes(range(256)) * 4096  # 1 MiB, read by the app in a loop
        assert _request(port, "POST", "/upload", upload) == (201, {"received": len(upload)})
        assert _request(port, "GET", "/nowhere")[0] == 404
        if example == "asgi_app.py":
            assert_echoes(f"ws://127.0.0.1:{port}/ws")
    finally:
        code = cli.stop(signal.SIGTERM)
    assert code == 0, cli.err
