"""The wheel installs and serves where nothing can be compiled: a fresh virtual environment,
a PATH with only its own bin/, and (in a private mount namespace) OpenSSL's headers and gcc's
internals hidden. From outside the source tree it answers HTTP, HTTPS with an RSA
certificate and a WebSocket echo, and `cymongoose --version` names this release."""

from __future__ import annotations

import re
import shutil
import ssl
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
import trustme
from websockets.sync.client import connect

ROOT = Path(__file__).resolve().parents[2]
SOURCE_VERSION = re.search(r'__version__ = "([^"]+)"',
                           (ROOT / "src" / "cymongoose" / "__init__.py").read_text()).group(1)
# Emptied for the installed program: where a compiler would find OpenSSL's headers, and
# where gcc keeps cc1 and its own headers (so no compiler works, whatever PATH says).
HIDDEN = ("/usr/include/openssl", "/usr/lib/gcc")
pytestmark = pytest.mark.no_asan


def _sealing_tools() -> list[str] | None:
    """unshare, sh and mount by absolute path (the sealed PATH finds none of them), if a
    private mount namespace can be made here."""
    tools = [shutil.which(name) or "" for name in ("unshare", "sh", "mount")]
    if "" in tools:
        return None
    probe = subprocess.run([tools[0], "--mount", "--propagation", "private", "true"],
                           capture_output=True, check=False)
    return tools if probe.returncode == 0 else None


@pytest.fixture(scope="module")
def sealed() -> list[str]:
    """The command prefix that runs a program with the compiler and headers out of reach."""
    tools = _sealing_tools()
    if tools is None:
        # Not root, or a container that forbids namespaces: PATH alone still keeps the
        # compiler out of reach of pip.
        print("note: unshare --mount unavailable; hiding the compiler by PATH only")
        return []
    unshare, sh, mount = tools
    mounts = " && ".join(f"{mount} -t tmpfs tmpfs {d}" for d in HIDDEN if Path(d).is_dir())
    return [unshare, "--mount", "--propagation", "private", sh, "-c",
            f'{mounts or "true"} && exec "$@"', "sealed"]


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path, sealed: list[str]) -> Path:
    home = tmp_path_factory.mktemp("fresh")
    subprocess.run([sys.executable, "-m", "venv", str(home / "venv")], check=True, timeout=120)
    bindir = home / "venv" / "bin"
    env = {"PATH": str(bindir), "HOME": str(home), "LANG": "C.UTF-8"}
    check = ("import os, shutil; "
             "print([c for c in ('cc', 'gcc', 'clang', 'cmake') if shutil.which(c)], "
             f"[d for d in {HIDDEN!r} if os.path.isdir(d) and os.listdir(d)])")
    reachable = subprocess.run([*sealed, str(bindir / "python"), "-c", check], env=env,
                               capture_output=True, text=True, timeout=60, check=True)
    if sealed:
        assert reachable.stdout.strip() == "[] []", reachable.stdout
    install = subprocess.run(
        [*sealed, str(bindir / "python"), "-m", "pip", "install", "--no-index",
         "--only-binary", ":all:", "--find-links", str(wheel.parent),
         "--disable-pip-version-check", "cymongoose"],
        env=env, cwd=home, capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stdout + install.stderr
    assert "Building wheel" not in install.stdout
    assert wheel.name in install.stdout
    return home


def _bindir(venv: Path) -> Path:
    return venv / "venv" / "bin"


class Served:
    """`cymongoose smoke_app:app` from the fresh environment, its port read from its log."""

    def __init__(self, sealed: list[str], venv: Path, *options: str) -> None:
        shutil.copy(Path(__file__).with_name("smoke_app.py"), venv / "smoke_app.py")
        self.proc = subprocess.Popen(
            [*sealed, str(_bindir(venv) / "cymongoose"), "smoke_app:app", "--interface", "asgi",
             "--lifespan", "off", "--host", "127.0.0.1", "--port", "0", *options],
            env={"PATH": str(_bindir(venv)), "HOME": str(venv), "LANG": "C.UTF-8"},
            cwd=venv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
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
    out = subprocess.run([*sealed, str(_bindir(venv) / "cymongoose"), "--version"],
                         env={"PATH": str(_bindir(venv))}, cwd=venv, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    assert out.startswith(f"cymongoose {SOURCE_VERSION} (Mongoose "), out
    assert "TLS openssl" in out


def test_http_and_websocket_echo_from_the_installed_wheel(venv: Path, sealed: list[str]) -> None:
    served = Served(sealed, venv)
    try:
        answer = httpx.get(f"http://127.0.0.1:{served.port}/", timeout=10).json()
        # The installed copy answered, not the source tree.
        assert answer["file"].startswith(str(venv / "venv" / "lib")), answer
        assert answer["version"] == SOURCE_VERSION
        with connect(f"ws://127.0.0.1:{served.port}/echo", open_timeout=10) as ws:
            ws.send("hello")
            assert ws.recv(timeout=10) == "hello"
            ws.send(b"\x00\xffbinary")
            assert ws.recv(timeout=10) == b"\x00\xffbinary"
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
        assert response.json()["scheme"] == "https"
        assert response.json()["tls"] == "openssl"
    finally:
        served.stop()
