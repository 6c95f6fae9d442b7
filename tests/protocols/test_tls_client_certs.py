"""The client certificate a server verified reaches the app (OpenSSL engine): a raw handler
reads `Connection.tls_info`, a WSGI app mod_ssl's `SSL_CLIENT_*` keys, an ASGI app the
scope's "tls" extension (asgiref's TLS extension), over HTTPS and WSS, with curl and
Python's ssl presenting the certificate."""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
from pathlib import Path
from typing import Any

import certs
import pytest
from cryptography import x509
from support.cli_run import CLI, cli_env, https_raw_get
from support.ports import free_port
from support.waiting import wait_for
from websockets.asyncio.client import connect as ws_connect

from cymongoose import MG_EV_ACCEPT, MG_EV_HTTP_MSG, TLS_ENGINE, Connection, TlsOpts

pytestmark = [
    pytest.mark.skipif(TLS_ENGINE != "openssl", reason="client certificates are read from "
                       "OpenSSL"),
    pytest.mark.skipif(shutil.which("curl") is None, reason="curl is in "
                       "tools/debian-packages.txt"),
    pytest.mark.timeout(120),
]

APPS = '''\
import json


def wsgi(environ, start_response):
    body = json.dumps({k: v for k, v in environ.items()
                       if k.startswith("SSL_") or k == "HTTPS"}).encode()
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body]


async def asgi(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    tls = scope["extensions"].get("tls")
    body = json.dumps({"tls": tls, "scheme": scope["scheme"],
                       "others": sorted(k for k in scope["extensions"] if k != "tls")})
    if scope["type"] == "websocket":
        await receive()
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": body})
        await send({"type": "websocket.close"})
        return
    await receive()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body.encode()})


def raw(conn, ev, data):
    from cymongoose import MG_EV_HTTP_MSG
    if ev == MG_EV_HTTP_MSG:
        conn.reply(200, json.dumps(conn.tls_info), {"Content-Type": "application/json"})
'''


class Certs:
    """A CA for clients, a server certificate from another CA, and a client certificate."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.client_ca = certs.CA(name="client CA")
        self.server_ca = certs.CA(name="server CA")
        self.server = self.server_ca.issue(("localhost", "127.0.0.1"))
        self.server_cert, self.server_key = self.server.write(tmp)
        self.server_cafile = self.server_ca.write(tmp, "server-ca")
        self.client_cafile = self.client_ca.write(tmp, "client-ca")
        self.client = self.client_ca.issue(["client"], client=True)
        self.client_cert, self.client_key = self.client.write(tmp, "client")
        self.x509 = x509.load_pem_x509_certificate(self.client.cert_pem)

    @property
    def serial_hex(self) -> str:
        text = f"{self.x509.serial_number:X}"
        return text if len(text) % 2 == 0 else "0" + text  # whole bytes, as OpenSSL prints

    def curl(self, port: int, path: str, *extra: str) -> dict[str, Any]:
        out = certs.run_tool(["curl", "-sS", "--max-time", "10", "--cacert",
                              str(self.server_cafile), "--cert", str(self.client_cert),
                              "--key", str(self.client_key), *extra,
                              f"https://localhost:{port}{path}"])
        assert out.returncode == 0, out.stderr
        result: dict[str, Any] = json.loads(out.stdout)
        return result

    def context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.server_cafile))
        ctx.load_cert_chain(self.client_cert, self.client_key)
        return ctx


@pytest.fixture
def pki(tmp_path: Path) -> Certs:
    return Certs(tmp_path)


def _serve(pki: Certs, app: str, *more: str) -> tuple[CLI, int]:
    (pki.tmp / "cert_apps.py").write_text(APPS)
    port = free_port()
    cli = CLI(pki.tmp, f"cert_apps:{app}", "--port", str(port), "--ssl-certfile",
              str(pki.server_cert), "--ssl-keyfile", str(pki.server_key), *more,
              env=cli_env(keep_asan=True))
    ctx = pki.context()
    try:
        wait_for(lambda: https_raw_get(port, ctx, "/up") is not None, 30,
                 lambda: f"the server to come up ({cli.err})")
    except AssertionError:
        cli.stop()
        raise
    return cli, port


def test_raw_handler_reads_the_verified_client_certificate(server_thread: Any,
                                                           pki: Certs) -> None:
    plain: list[object] = []

    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_ACCEPT and conn.local_addr and conn.local_addr[1] == tls_port:
            conn.tls_init(opts)
        elif ev == MG_EV_HTTP_MSG:
            if not conn.is_tls:
                plain.append(conn.tls_info)
                conn.reply(200, b"{}")
                return
            info = conn.tls_info
            assert info is conn.tls_info  # read once per connection
            conn.reply(200, json.dumps(info).encode())

    opts = TlsOpts(ca=pki.client_ca.cert_pem, cert=pki.server.cert_pem,
                   key=pki.server.key_pem())
    st = server_thread(handler)
    tls_port = st.listen("https://127.0.0.1:0")
    plain_port = st.listen("http://127.0.0.1:0")
    st.start()
    info = pki.curl(tls_port, "/raw")
    assert info["protocol"] == "TLSv1.3" and info["version"] == 0x0304
    assert info["cipher"] == "TLS_AES_256_GCM_SHA384" and info["cipher_suite"] == 0x1302
    assert info["peer_cert_chain"] == [pki.client.cert_pem.decode()]
    assert info["peer_subject"] == "CN=client"
    assert info["peer_issuer"] == "CN=client CA"
    assert info["peer_serial"] == pki.serial_hex
    assert info["peer_verify"] == "SUCCESS"
    assert info["peer_not_after"].endswith(" GMT")
    assert info["local_cert"] == pki.server.cert_pem.decode()
    tls12 = pki.curl(tls_port, "/raw12", "--tls-max", "1.2")
    assert (tls12["protocol"], tls12["version"]) == ("TLSv1.2", 0x0303)
    assert tls12["cipher"].startswith("ECDHE-ECDSA-") and tls12["cipher_suite"] in (
        0xC02B, 0xC02C, 0xCCA9)
    assert tls12["peer_subject"] == "CN=client"
    out = certs.run_tool(["curl", "-sS", "--max-time", "10", f"http://127.0.0.1:{plain_port}/"])
    assert out.stdout == b"{}" and plain == [None]


def test_without_a_client_ca_there_is_no_peer_certificate(server_thread: Any,
                                                          pki: Certs) -> None:
    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_ACCEPT:
            conn.tls_init(opts)
        elif ev == MG_EV_HTTP_MSG:
            conn.reply(200, json.dumps(conn.tls_info).encode())

    opts = TlsOpts(cert=pki.server.cert_pem, key=pki.server.key_pem())
    st = server_thread(handler)
    port = st.listen("https://127.0.0.1:0")
    st.start()
    info = pki.curl(port, "/none")  # curl offers its certificate; nobody asked for it
    assert info["peer_cert_chain"] == [] and info["peer_subject"] is None
    assert info["peer_verify"] == "NONE" and info["protocol"] == "TLSv1.3"


def test_wsgi_app_gets_mod_ssl_client_keys(pki: Certs) -> None:
    cli, port = _serve(pki, "wsgi", "--ssl-ca", str(pki.client_cafile))
    try:
        env = pki.curl(port, "/w")
        tls12 = pki.curl(port, "/w12", "--tls-max", "1.2")
    finally:
        assert cli.stop() == 0, cli.err
    assert env["HTTPS"] == "on"
    assert env["SSL_PROTOCOL"] == "TLSv1.3" and env["SSL_CIPHER"] == "TLS_AES_256_GCM_SHA384"
    assert env["SSL_CLIENT_VERIFY"] == "SUCCESS"
    assert env["SSL_CLIENT_S_DN"] == "CN=client" and env["SSL_CLIENT_I_DN"] == "CN=client CA"
    assert env["SSL_CLIENT_CERT"] == pki.client.cert_pem.decode()
    assert env["SSL_CLIENT_M_SERIAL"] == pki.serial_hex
    assert env["SSL_CLIENT_V_START"].endswith(" GMT") and env["SSL_CLIENT_V_END"].endswith(
        " GMT")
    assert tls12["SSL_PROTOCOL"] == "TLSv1.2" and tls12["SSL_CIPHER"].startswith("ECDHE-")


def test_wsgi_without_client_certificates_keeps_its_environ(pki: Certs) -> None:
    cli, port = _serve(pki, "wsgi")
    try:
        out = https_raw_get(port, pki.context(), "/w")
    finally:
        assert cli.stop() == 0, cli.err
    assert out is not None
    assert json.loads(out.partition(b"\r\n\r\n")[2]) == {}


def test_asgi_scope_has_the_tls_extension_over_https_and_wss(pki: Certs) -> None:
    cli, port = _serve(pki, "asgi", "--ssl-ca", str(pki.client_cafile))
    try:
        first = pki.curl(port, "/a")
        tls12 = pki.curl(port, "/a12", "--tls-max", "1.2")

        async def over_wss() -> Any:
            async with ws_connect(f"wss://localhost:{port}/ws", ssl=pki.context(),
                                  open_timeout=10) as ws:
                return json.loads(await asyncio.wait_for(ws.recv(), 10))

        ws = asyncio.run(over_wss())
    finally:
        assert cli.stop() == 0, cli.err
    tls = first["tls"]
    assert tls == {
        "server_cert": pki.server.cert_pem.decode(),
        "client_cert_chain": [pki.client.cert_pem.decode()],
        "client_cert_name": "CN=client",
        "client_cert_error": None,
        "tls_version": 0x0304,
        "cipher_suite": 0x1302,
    }
    assert first["others"] and first["scheme"] == "https"  # the server's own extensions stay
    assert tls12["tls"]["tls_version"] == 0x0303
    assert tls12["tls"]["cipher_suite"] in (0xC02B, 0xC02C, 0xCCA9)
    assert ws["scheme"] == "wss" and ws["tls"] == tls
    assert ws["others"] == ["websocket.http.response"]


def test_asgi_without_client_certificates_has_no_tls_extension(pki: Certs) -> None:
    cli, port = _serve(pki, "asgi")
    try:
        out = https_raw_get(port, pki.context(), "/a")
    finally:
        assert cli.stop() == 0, cli.err
    assert out is not None
    assert json.loads(out.partition(b"\r\n\r\n")[2])["tls"] is None


def test_raw_interface_on_the_command_line(pki: Certs) -> None:
    cli, port = _serve(pki, "raw", "--ssl-ca", str(pki.client_cafile))
    try:
        info = pki.curl(port, "/r")
    finally:
        assert cli.stop() == 0, cli.err
    assert info["peer_subject"] == "CN=client" and info["peer_verify"] == "SUCCESS"
