"""Where and how the command line serves: a Unix socket, an inherited descriptor, HTTPS
from certificate files, a raw handler and an ASGI app detected by --interface auto, and a
factory."""

from __future__ import annotations

import importlib.util
import ssl
import subprocess
from pathlib import Path

import pytest
from support.cli_run import CLI, cli_env, https_raw_get, run_cli, self_signed_cert, unix_get
from support.http_client import get
from support.ports import bound_listener, free_port
from support.subprocess_env import tool_env
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(60)


def test_unix_socket(tmp_path: Path) -> None:
    path = str(tmp_path / "app.sock")
    (tmp_path / "app.sock").write_text("stale")  # not a socket: refused, never deleted
    done = run_cli(tmp_path, "cli_app:app", "--uds", path)
    assert done.returncode == 2 and "not a socket" in done.stderr, done.stderr
    (tmp_path / "app.sock").unlink()
    cli = CLI(tmp_path, "cli_app:app", "--uds", path, "--proxy-headers")
    try:
        wait_for(lambda: (tmp_path / "app.sock").is_socket(), 20,
                 lambda: f'(tmp_path / "app.sock").is_socket() ({cli.err})')
        wait_for(lambda: _try(unix_get, path, "/u"), 10, "an answer on the Unix socket")
        head, _, body = unix_get(path, "/u").partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and body.split(b"|")[1:3] == [b"127.0.0.1",
                                                                              b"http"]
        # A Unix-socket peer is the local proxy: its forwarded headers are believed.
        body = unix_get(path, "/", "X-Forwarded-For: 203.0.113.1\r\n"
                                   "X-Forwarded-Proto: https\r\n").partition(b"\r\n\r\n")[2]
        assert body.split(b"|")[1:3] == [b"203.0.113.1", b"https"]
        # A second server on the same live socket is refused.
        done = run_cli(tmp_path, "cli_app:app", "--uds", path)
        assert done.returncode == 2 and "another server" in done.stderr
    finally:
        assert cli.stop() == 0, cli.err
    assert not (tmp_path / "app.sock").exists()  # removed by the server that made it


def _try(fn, *args):  # type: ignore[no-untyped-def]
    try:
        return fn(*args)
    except OSError:
        return None


def test_inherited_descriptor(tmp_path: Path) -> None:
    with bound_listener() as lsock:
        port = lsock.getsockname()[1]
        cli = CLI(tmp_path, "cli_app:app", "--fd", str(lsock.fileno()),
                  pass_fds=(lsock.fileno(),))
        try:
            cli.wait_http(port)
            assert get(port, "/fd").body.endswith(b"|/fd")
        finally:
            assert cli.stop() == 0, cli.err


def test_https_from_certificate_files(tmp_path: Path) -> None:
    self_signed_cert(tmp_path)
    port = free_port()
    cli = CLI(tmp_path, "cli_app:app", "--port", str(port), "--ssl-certfile", "cert.pem",
              "--ssl-keyfile", "key.pem")
    ctx = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))

    def fetch() -> bytes | None:
        return https_raw_get(port, ctx, "/tls")

    try:
        wait_for(lambda: fetch() is not None, 20, lambda: f"fetch() is not None ({cli.err})")
        out = fetch()
        assert out is not None and out.startswith(b"HTTP/1.1 200")
        assert out.split(b"\r\n\r\n")[1].split(b"|")[2:3] == [b"https"]
    finally:
        assert cli.stop() == 0, cli.err


def test_raw_handler_detected_and_factory(tmp_path: Path) -> None:
    port = free_port()
    cli = CLI(tmp_path, "cli_app:handler", "--port", str(port))
    try:
        cli.wait_http(port)
        assert get(port, "/r").body == b"raw:/r"
    finally:
        assert cli.stop() == 0, cli.err
    assert cli.err.rstrip().endswith("stopped"), cli.err  # one process says it stopped
    port = free_port()
    cli = CLI(tmp_path, "cli_app:make_app", "--factory", "--interface", "wsgi",
              "--port", str(port))
    try:
        cli.wait_http(port)
        assert get(port, "/made").body.endswith(b"|/made")
    finally:
        assert cli.stop() == 0, cli.err
    assert "SIGTERM: stopping" in cli.err and cli.err.rstrip().endswith("stopped"), cli.err


ASGI_APP = '''
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"asgi:" + scope["path"].encode()})
'''


@pytest.mark.skipif(importlib.util.find_spec("cymongoose.asgi") is None,
                    reason="cymongoose.asgi is being merged from its own branch")
def test_asgi_app_detected(tmp_path: Path) -> None:
    (tmp_path / "asgi_app.py").write_text(ASGI_APP)
    port = free_port()
    cli = CLI(tmp_path, "asgi_app:app", "--port", str(port))
    try:
        cli.wait_http(port)
        assert get(port, "/a").body == b"asgi:/a"
    finally:
        assert cli.stop() == 0, cli.err
    assert "stopping" in cli.err and cli.err.rstrip().endswith("stopped"), cli.err


def test_ssl_ca_requires_a_client_certificate_signed_by_it(tmp_path: Path) -> None:
    self_signed_cert(tmp_path)
    self_signed_cert(tmp_path, "client CA", stem="ca-")
    self_signed_cert(tmp_path, "stranger", stem="other-")
    subprocess.run(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "client-key.pem",
                    "-out", "client.csr", "-subj", "/CN=client"], cwd=tmp_path, env=tool_env(),
                   check=True, capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", "client.csr", "-CA", "ca-cert.pem",
                    "-CAkey", "ca-key.pem", "-CAcreateserial", "-out", "client-cert.pem",
                    "-days", "2"], cwd=tmp_path, env=tool_env(), check=True,
                   capture_output=True)
    port = free_port()
    cli = CLI(tmp_path, "cli_app:app", "--port", str(port), "--ssl-certfile", "cert.pem",
              "--ssl-keyfile", "key.pem", "--ssl-ca", "ca-cert.pem")

    def fetch(cert: str | None) -> bytes | None:
        ctx = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
        if cert is not None:
            ctx.load_cert_chain(str(tmp_path / f"{cert}-cert.pem"),
                                str(tmp_path / f"{cert}-key.pem"))
        return https_raw_get(port, ctx, "/tls")

    try:
        wait_for(lambda: fetch("client") is not None, 20,
                 lambda: f'fetch("client") is not None ({cli.err})')
        out = fetch("client")
        assert out is not None and out.startswith(b"HTTP/1.1 200")
        assert not fetch(None), "served a client without a certificate"
        assert not fetch("other"), "served a client whose certificate the CA did not sign"
        assert fetch("client") is not None  # and it still serves the right one
    finally:
        assert cli.stop() == 0, cli.err


def test_host_option_and_variable(tmp_path: Path) -> None:
    """--host names the address to bind, CYMONGOOSE_HOST does the same: the listener
    answers there (a host that is not this machine's is test_errors.py's)."""
    for args, env in ((["--host", "127.0.0.1"], None),
                      ([], cli_env(CYMONGOOSE_HOST="127.0.0.1"))):
        port = free_port()
        cli = CLI(tmp_path, "cli_app:app", "--port", str(port), *args, env=env)
        try:
            cli.wait_http(port)
            fields = get(port, "/h").body.split(b"|")
            assert fields[1] == b"127.0.0.1" and fields[5] == b"/h"
        finally:
            assert cli.stop() == 0, cli.err
