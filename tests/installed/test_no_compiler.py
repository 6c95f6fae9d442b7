"""The wheel installs and serves where nothing can be compiled: a fresh virtual environment,
a PATH with only its own bin/, and (in a private mount namespace) OpenSSL's headers and gcc's
internals hidden. From outside the source tree it serves the ASGI example (HTTP, HTTPS with
an RSA certificate, a WebSocket echo), and `cymongoose --version` names this release."""

from __future__ import annotations

import re
import shutil
import ssl
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import trustme
from support.source_version import source_version
from support.ws_echo import assert_echoes

ROOT = Path(__file__).resolve().parents[2]
# A plain ASGI app (no framework), so the fresh environment needs nothing but cymongoose.
APP = ROOT / "examples" / "asgi_app.py"
# Emptied for the installed program: where a compiler would find OpenSSL's headers, and
# where gcc keeps cc1 and its own headers (so no compiler works, whatever PATH says).
HIDDEN = ("/usr/include/openssl", "/usr/lib/gcc")
pytestmark = pytest.mark.no_asan


@pytest.fixture(scope="module")
def sealed(seal: Callable[..., list[str] | None]) -> list[str]:
    """The command prefix that runs a program with the compiler and headers out of reach."""
    prefix = seal(*HIDDEN)
    if prefix is None:
        # PATH alone still keeps the compiler out of reach of pip.
        print("note: unshare --mount unavailable; hiding the compiler by PATH only")
    return prefix or []


def _env(home: Path) -> dict[str, str]:
    return {"PATH": str(home / "venv" / "bin"), "HOME": str(home), "LANG": "C.UTF-8"}


def _run(sealed: list[str], home: Path, *command: str) -> str:
    done = subprocess.run([*sealed, str(home / "venv" / "bin" / command[0]), *command[1:]],
                          env=_env(home), cwd=home, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path, sealed: list[str]) -> Path:
    home = tmp_path_factory.mktemp("fresh")
    subprocess.run([sys.executable, "-m", "venv", str(home / "venv")], check=True, timeout=120)
    check = ("import os, shutil; "
             "print([c for c in ('cc', 'gcc', 'clang', 'cmake') if shutil.which(c)], "
             f"[d for d in {HIDDEN!r} if os.path.isdir(d) and os.listdir(d)])")
    reachable = _run(sealed, home, "python", "-c", check)
    if sealed:
        assert reachable.strip() == "[] []", reachable
    installed = _run(sealed, home, "python", "-m", "pip", "install", "--no-index",
                     "--only-binary", ":all:", "--find-links", str(wheel.parent),
                     "--disable-pip-version-check", "cymongoose")
    assert "Building wheel" not in installed
    assert wheel.name in installed
    # What serves below is this copy, not the source tree.
    where = _run(sealed, home, "python", "-c", "import cymongoose; print(cymongoose.__file__)")
    assert where.startswith(str(home / "venv" / "lib")), where
    shutil.copy(APP, home / APP.name)
    return home


class Served:
    """`cymongoose asgi_app:app` from the fresh environment, its port read from its log."""

    def __init__(self, sealed: list[str], home: Path, *options: str) -> None:
        self.proc = subprocess.Popen(
            [*sealed, str(home / "venv" / "bin" / "cymongoose"), f"{APP.stem}:app",
             "--interface", "asgi", "--host", "127.0.0.1", "--port", "0", *options],
            env=_env(home), cwd=home, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
            text=True)
        self.lines: list[str] = []
        self.port = self._wait_for_port(timeout=30)

    def _wait_for_port(self, timeout: float) -> int:
        found: list[int] = []
        done = threading.Event()

        def read() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.lines.append(line)
                match = re.search(r"serving .* on https?://127\.0\.0\.1:(\d+)", line)
                if match and not found:
                    found.append(int(match.group(1)))
                    done.set()
            done.set()

        threading.Thread(target=read, daemon=True).start()
        done.wait(timeout)
        assert found, "no 'serving ... on' line:\n" + "".join(self.lines)
        return found[0]

    def stop(self) -> None:
        self.proc.terminate()
        assert self.proc.wait(timeout=40) == 0, "".join(self.lines)


def test_version_names_this_release(venv: Path, sealed: list[str]) -> None:
    out = _run(sealed, venv, "cymongoose", "--version")
    assert out.startswith(f"cymongoose {source_version()} (Mongoose "), out
    assert "TLS openssl" in out


def test_http_and_websocket_echo_from_the_installed_wheel(venv: Path, sealed: list[str]) -> None:
    served = Served(sealed, venv)
    try:
        answer = httpx.get(f"http://127.0.0.1:{served.port}/", timeout=10).json()
        assert (answer["message"], answer["client"]) == ("hello", "127.0.0.1")
        assert_echoes(f"ws://127.0.0.1:{served.port}/ws")
    finally:
        served.stop()


def test_https_with_an_rsa_certificate(venv: Path, sealed: list[str]) -> None:
    ca = trustme.CA(key_type=trustme.KeyType.RSA)
    leaf = ca.issue_cert("127.0.0.1", "localhost", key_type=trustme.KeyType.RSA)
    leaf.private_key_pem.write_to_path(str(venv / "key.pem"))
    leaf.cert_chain_pems[0].write_to_path(str(venv / "cert.pem"))
    served = Served(sealed, venv, "--ssl-certfile", str(venv / "cert.pem"),
                    "--ssl-keyfile", str(venv / "key.pem"))
    try:
        context = ssl.create_default_context()
        ca.configure_trust(context)
        with httpx.Client(verify=context, timeout=10) as client:
            response = client.get(f"https://127.0.0.1:{served.port}/")
        assert response.status_code == 200 and response.json()["message"] == "hello"
    finally:
        served.stop()
