"""Smoke tests: examples/ws_chat.py and examples/https_server.py run as real processes."""

from __future__ import annotations

import shutil
import signal
import ssl
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.ports import free_port
from websockets.sync.client import connect

from cymongoose import TLS_ENGINE

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "protocols"))
import certs  # noqa: E402 - test-time certificates and TLS client helpers


class Example:
    """An example script in a subprocess; output lines are collected on a thread."""

    def __init__(self, script: str, *args: str) -> None:
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self.proc = subprocess.Popen(
            [sys.executable, str(EXAMPLES / script), *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()

    def wait_for(self, text: str, timeout: float = 15.0) -> str:
        with self._cond:
            ok = self._cond.wait_for(
                lambda: any(text in ln for ln in self.lines) or self.proc.poll() is not None,
                timeout)
            found = [ln for ln in self.lines if text in ln]
        assert ok and found, f"{text!r} not printed; output so far: {self.lines}"
        return found[0]

    def stop(self, sig: int = signal.SIGINT) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(5)
            self._reader.join(5)


@pytest.fixture
def run_example() -> Iterator[list[Example]]:
    started: list[Example] = []
    yield started
    for ex in started:
        if ex.proc.poll() is None:
            ex.proc.kill()
            ex.proc.wait(5)


def test_ws_chat_broadcasts_and_stops_on_ctrl_c(run_example: list[Example]) -> None:
    port = free_port()
    ex = Example("ws_chat.py", "--port", str(port))
    run_example.append(ex)
    ex.wait_for(f"http://127.0.0.1:{port}/")
    page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read()
    assert b"new WebSocket" in page
    with connect(f"ws://127.0.0.1:{port}/ws") as alice:
        assert alice.recv(timeout=5) == "* guest1 joined (1 online)"
        with connect(f"ws://127.0.0.1:{port}/ws") as bob:
            assert bob.recv(timeout=5) == "* guest2 joined (2 online)"
            assert alice.recv(timeout=5) == "* guest2 joined (2 online)"
            bob.send("hi alice ✓")
            assert alice.recv(timeout=5) == "guest2: hi alice ✓"
            assert bob.recv(timeout=5) == "guest2: hi alice ✓"
        assert alice.recv(timeout=5) == "* guest2 left"
    assert ex.stop(signal.SIGINT) == 0, ex.lines


def test_https_server_generates_a_cert_and_serves(run_example: list[Example],
                                                  tmp_path: Path) -> None:
    port = free_port()
    ex = Example("https_server.py", "--port", str(port), "--cert-dir", str(tmp_path))
    run_example.append(ex)
    ex.wait_for("generated a self-signed certificate")
    ex.wait_for(f"https://127.0.0.1:{port}/")
    cert = tmp_path / "cert.pem"
    ctx = ssl.create_default_context(cafile=str(cert))
    body = certs.retry_bad_signature(lambda: urllib.request.urlopen(
        f"https://localhost:{port}/x?y=1", context=ctx, timeout=5).read())
    assert body == b"Hello over TLS: GET /x\n"
    if shutil.which("curl"):
        out = certs.run_tool(["curl", "-sS", "--max-time", "5", "--cacert", str(cert),
                              f"https://127.0.0.1:{port}/curl"])
        assert out.stdout == b"Hello over TLS: GET /curl\n", out.stderr
    assert ex.stop(signal.SIGTERM) == 0, ex.lines


def test_https_server_with_given_cert_serves_a_directory(run_example: list[Example],
                                                         tmp_path: Path) -> None:
    ca = certs.CA()
    cert, key = ca.issue().write(tmp_path)
    root = tmp_path / "public"
    root.mkdir()
    (root / "index.txt").write_bytes(b"static over tls\n")
    port = free_port()
    ex = Example("https_server.py", "--port", str(port), "--cert", str(cert), "--key", str(key),
                 "--root", str(root))
    run_example.append(ex)
    ex.wait_for(f"https://127.0.0.1:{port}/")
    ctx = ssl.create_default_context(cafile=str(ca.write(tmp_path)))
    body = certs.retry_bad_signature(lambda: urllib.request.urlopen(
        f"https://localhost:{port}/index.txt", context=ctx, timeout=5).read())
    assert body == b"static over tls\n"
    assert ex.stop(signal.SIGINT) == 0, ex.lines


def test_https_server_with_an_rsa_key(run_example: list[Example], tmp_path: Path) -> None:
    key = tmp_path / "rsa.key"
    cert = tmp_path / "rsa.crt"
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    certs.run_tool(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, timeout=60)
    port = free_port()
    ex = Example("https_server.py", "--port", str(port), "--cert", str(cert), "--key", str(key))
    run_example.append(ex)
    if TLS_ENGINE == "builtin":
        # Checked at start-up: the reason, naming the file, and exit status 2.
        ex.wait_for("accepts only unencrypted ECDSA P-256")
        assert any(str(key) in ln and "2048-bit RSA key" in ln for ln in ex.lines), ex.lines
        assert ex.proc.wait(10) == 2
        return
    ex.wait_for(f"https://127.0.0.1:{port}/")
    ctx = ssl.create_default_context(cafile=str(cert))
    body = urllib.request.urlopen(f"https://localhost:{port}/rsa", context=ctx,
                                  timeout=5).read()
    assert body == b"Hello over TLS: GET /rsa\n"
    assert ex.stop(signal.SIGINT) == 0, ex.lines


def test_https_server_refuses_an_expired_certificate_at_start(
        run_example: list[Example], tmp_path: Path) -> None:
    before, after = certs.expired_window()
    cert, key = certs.CA().issue(not_before=before, not_after=after).write(tmp_path)
    ex = Example("https_server.py", "--port", str(free_port()), "--cert", str(cert),
                 "--key", str(key))
    run_example.append(ex)
    assert ex.proc.wait(10) == 2
    line = ex.wait_for("expired on")
    assert str(cert) in line, ex.lines
