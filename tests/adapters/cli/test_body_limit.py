"""A chunked upload that goes over --max-body-size while the app reads it: the client gets a
413, the app learns why (WSGI: wsgi.input raises an error naming the limit; ASGI: receive()
says the client is gone, and the server log names the limit), and the access log has the
request with the status the server applied. (A Content-Length upload over the limit is
refused with the head, before any app runs: tests/core/test_http_stream_body.py.)"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from support.cli_run import CLI
from support.ports import free_port
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(60)

LIMIT = 65536

APPS = {
    "wsgi": '''
from pathlib import Path

def app(environ, start_response):
    Path("started").write_text("yes")
    try:
        while environ["wsgi.input"].read(4096):
            pass
        outcome = "read it all"
    except OSError as exc:
        outcome = str(exc)
    Path("outcome").write_text(outcome)
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"the app answered"]
''',
    "asgi": '''
from pathlib import Path

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    Path("started").write_text("yes")
    while True:
        message = await receive()
        if message["type"] == "http.disconnect" or not message.get("more_body"):
            break
    Path("outcome").write_text(message["type"])
    if message["type"] == "http.request":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"the app answered"})
''',
}


@pytest.mark.parametrize("interface", ["wsgi", "asgi"])
def test_an_oversized_chunked_upload_is_413_logged_and_named(tmp_path: Path,
                                                             interface: str) -> None:
    (tmp_path / "upload_app.py").write_text(APPS[interface])
    port = free_port()
    cli = CLI(tmp_path, "upload_app:app", "--port", str(port), "--max-body-size", str(LIMIT),
              "--access-log", "--access-log-file", "access.log")
    try:
        cli.wait_http(port, "/warm-up")
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                      b"\r\n400\r\n" + b"a" * 1024 + b"\r\n")
            # The app has the request (and is reading) before the body goes over the limit.
            wait_for(lambda: (tmp_path / "started").exists(), 20,
                     lambda: f'(tmp_path / "started").exists() ({cli.err})')
            chunk = b"4000\r\n" + b"b" * 0x4000 + b"\r\n"
            try:
                for _ in range(2 * LIMIT // 0x4000):
                    s.sendall(chunk)
                s.sendall(b"0\r\n\r\n")
            except OSError:
                pass  # the server may have closed its side already: the answer is there
            answer = b""
            while data := s.recv(65536):
                answer += data
        assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
        wait_for(lambda: (tmp_path / "outcome").exists(), 20,
                 lambda: f'(tmp_path / "outcome").exists() ({cli.err})')
    finally:
        assert cli.stop() == 0, cli.err
    outcome = (tmp_path / "outcome").read_text()
    if interface == "wsgi":
        assert f"max_body_size ({LIMIT} bytes)" in outcome, outcome
    else:
        assert outcome == "http.disconnect"
    assert f"POST /upload: the request body is larger than max_body_size ({LIMIT} bytes)" \
        in cli.err, cli.err
    lines = [ln for ln in (tmp_path / "access.log").read_text().splitlines()
             if "/upload" in ln]
    assert len(lines) == 1 and '"POST /upload HTTP/1.1" 413 ' in lines[0], lines
