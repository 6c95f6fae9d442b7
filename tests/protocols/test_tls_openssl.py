"""The OpenSSL TLS engine (the default build): RSA-2048, RSA-4096 and P-256 certificates with
curl, `openssl s_client` and Python's ssl; TLS 1.2 and 1.3; ALPN; mutual TLS; certificate
files checked by TlsOpts.from_files; refused versions and garbage; resources at baseline."""

from __future__ import annotations

import gc
import http.client
import pickle
import shutil
import socket
import ssl
import struct
import threading
from pathlib import Path
from typing import Any

import certs
import pytest
from support.http_client import recv_head
from support.resources import fd_count
from support.rss import rss_bytes
from support.waiting import wait_for
from test_tls import HttpsClient, PyTlsServer, TlsServer, bio_handshake, https_get

from cymongoose import MG_EV_ACCEPT, MG_EV_HTTP_MSG, TLS_ENGINE, Connection, Manager, TlsOpts
from cymongoose._mongoose import HTTP2_LIBRARY

pytestmark = pytest.mark.skipif(
    TLS_ENGINE != "openssl", reason="built with CYMONGOOSE_TLS=builtin (test_tls.py covers it)")

KINDS = ["rsa2048", "rsa4096", "p256"]
TOOLS = pytest.mark.skipif(shutil.which("curl") is None or shutil.which("openssl") is None,
                           reason="curl and openssl are in tools/debian-packages.txt")


@pytest.fixture(scope="module")
def ca() -> certs.CA:
    return certs.CA(kind="rsa2048", name="cymongoose RSA test CA")


@pytest.fixture(scope="module")
def leaves(ca: certs.CA) -> dict[str, certs.Leaf]:
    # RSA-4096 key generation takes about a second: once per module.
    return {kind: ca.issue(("localhost", "127.0.0.1"), kind=kind) for kind in KINDS}


@pytest.fixture
def cafile(ca: certs.CA, tmp_path: Path) -> Path:
    return ca.write(tmp_path)


def s_client(port: int, cafile: Path, *args: str, request: bytes | None = None) -> str:
    req = request if request is not None else (
        b"GET /s_client HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    proc = certs.run_tool(
        ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-servername", "localhost",
         "-CAfile", str(cafile), "-verify_return_error", "-ign_eof", *args], input=req)
    return proc.stdout.decode(errors="replace") + proc.stderr.decode(errors="replace")


@TOOLS
@pytest.mark.parametrize("kind", KINDS)
def test_every_certificate_kind_with_curl_openssl_and_python(
        server_thread: Any, leaves: dict[str, certs.Leaf], cafile: Path, kind: str) -> None:
    leaf = leaves[kind]
    srv = TlsServer(server_thread, TlsOpts(cert=leaf.cert_pem, key=leaf.key_pem()))
    assert https_get(srv.port, cafile, "/py") == (200, b"secure /py")
    curl = certs.run_tool(["curl", "-sS", "--max-time", "5", "--cacert", str(cafile),
                           f"https://localhost:{srv.port}/curl"])
    assert (curl.returncode, curl.stdout) == (0, b"secure /curl"), curl.stderr
    out = s_client(srv.port, cafile)
    assert "Verify return code: 0 (ok)" in out and "secure /s_client" in out
    bits = {"rsa2048": "2048", "rsa4096": "4096", "p256": "256"}[kind]
    assert f"Server public key is {bits} bit" in out
    assert srv.errors == []


@TOOLS
@pytest.mark.parametrize("kind", ["rsa2048", "p256"])
@pytest.mark.parametrize("version", ["1.2", "1.3"])
def test_tls_1_2_and_1_3(server_thread: Any, leaves: dict[str, certs.Leaf], cafile: Path,
                         kind: str, version: str) -> None:
    leaf = leaves[kind]
    srv = TlsServer(server_thread, TlsOpts(cert=leaf.cert_pem, key=leaf.key_pem()))
    ctx = ssl.create_default_context(cafile=str(cafile))
    tls_version = ssl.TLSVersion.TLSv1_2 if version == "1.2" else ssl.TLSVersion.TLSv1_3
    ctx.minimum_version = ctx.maximum_version = tls_version
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as tls:
        assert tls.version() == f"TLSv{version}"
        if version == "1.2":  # the key exchange is signed with the certificate's own key
            assert tls.cipher()[0].startswith("ECDHE-RSA-" if kind == "rsa2048" else
                                              "ECDHE-ECDSA-"), tls.cipher()
        tls.sendall(b"GET /v HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        assert tls.recv(4096).startswith(b"HTTP/1.1 200 OK")
    out = s_client(srv.port, cafile, "-tls1_2" if version == "1.2" else "-tls1_3")
    assert f"Protocol  : TLSv{version}" in out or f"TLSv{version}" in out, out
    assert "secure /s_client" in out


def _client_hello(version: int) -> bytes:
    """A minimal ClientHello offering only `version` (0x0301 = TLS 1.0, 0x0302 = 1.1) with
    two old CBC suites and no supported_versions extension."""
    body = (struct.pack(">H", version) + bytes(32) + b"\x00"  # random, empty session id
            + b"\x00\x04\x00\x2f\x00\x35"  # TLS_RSA_WITH_AES_128/256_CBC_SHA
            + b"\x01\x00")  # compression: null
    hs = b"\x01" + struct.pack(">I", len(body))[1:] + body
    return b"\x16\x03\x01" + struct.pack(">H", len(hs)) + hs


@pytest.mark.parametrize("version", [0x0300, 0x0301, 0x0302], ids=["ssl3", "tls1.0", "tls1.1"])
def test_unsupported_version_is_refused_and_server_keeps_serving(
        server_thread: Any, leaves: dict[str, certs.Leaf], cafile: Path, version: int) -> None:
    leaf = leaves["p256"]
    srv = TlsServer(server_thread, TlsOpts(cert=leaf.cert_pem, key=leaf.key_pem()))
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
        sock.sendall(_client_hello(version))
        answer = b""
        try:
            while chunk := sock.recv(4096):
                answer += chunk
        except ConnectionResetError:
            pass
    # Either an alert record (type 21: protocol_version) or a bare close; never a ServerHello.
    assert answer == b"" or answer[0] == 0x15, answer[:16]
    wait_for(lambda: bool(srv.errors) and srv.closed >= 1, 5.0,
             "bool(srv.errors) and srv.closed >= 1")
    assert srv.errors[0].startswith("TLS handshake failed"), srv.errors
    assert srv.requests == []
    assert https_get(srv.port, cafile, "/after") == (200, b"secure /after")


@pytest.mark.parametrize("http2", [True, False], ids=["http2", "no-http2"])
def test_alpn_selects_h2_then_http_1_1(server_thread: Any, leaves: dict[str, certs.Leaf],
                                       cafile: Path, http2: bool) -> None:
    leaf = leaves["rsa2048"]
    srv = TlsServer(server_thread, TlsOpts(cert=leaf.cert_pem, key=leaf.key_pem()),
                    http2=http2)
    h2 = "h2" if http2 and HTTP2_LIBRARY is not None else None
    for offered, chosen in ((["h2", "http/1.1"], h2 or "http/1.1"), (["http/1.1"], "http/1.1"),
                            (["h2"], h2), ([], None)):
        ctx = ssl.create_default_context(cafile=str(cafile))
        if offered:
            ctx.set_alpn_protocols(offered)
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as raw, \
                ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            assert tls.selected_alpn_protocol() == chosen, offered
            tls.sendall(b"GET /alpn HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := tls.recv(4096):
                answer += chunk
            if chosen == "h2":
                # HTTP/1.1 after choosing h2 is a connection error (RFC 9113 section 3.4):
                # the server's SETTINGS, then GOAWAY with PROTOCOL_ERROR, then it closes.
                frames = []
                while len(answer) >= 9:
                    n = int.from_bytes(answer[:3], "big")
                    frames.append((answer[3], answer[9:9 + n]))
                    answer = answer[9 + n:]
                assert frames[0][0] == 4 and frames[-1][0] == 7, frames
                assert frames[-1][1][4:8] == (1).to_bytes(4, "big"), frames
            else:
                assert answer.startswith(b"HTTP/1.1 200 OK")
    if shutil.which("curl"):  # curl offers h2 first
        out = certs.run_tool(["curl", "-sS", "--http2", "--max-time", "5", "--cacert",
                              str(cafile), "-w", " %{http_version}",
                              f"https://localhost:{srv.port}/h2"])
        assert out.stdout == (b"secure /h2 2" if h2 else b"secure /h2 1.1"), out.stderr


@TOOLS
def test_mutual_tls_with_rsa_client_certificate(server_thread: Any, ca: certs.CA,
                                                leaves: dict[str, certs.Leaf], cafile: Path,
                                                tmp_path: Path) -> None:
    leaf = leaves["p256"]
    srv = TlsServer(server_thread, TlsOpts(ca=ca.cert_pem, cert=leaf.cert_pem,
                                           key=leaf.key_pem()))
    client_cert, client_key = ca.issue(["client"], kind="rsa2048", client=True).write(
        tmp_path, "client")
    stranger_cert, stranger_key = certs.CA(name="stranger").issue(
        ["client"], client=True).write(tmp_path, "stranger")

    def get(cert: Path | None, key: Path | None) -> tuple[int, bytes]:
        ctx = ssl.create_default_context(cafile=str(cafile))
        if cert is not None:
            ctx.load_cert_chain(cert, key)
        conn = http.client.HTTPSConnection("localhost", srv.port, context=ctx, timeout=5)
        try:
            conn.request("GET", "/mtls")
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    assert get(client_cert, client_key) == (200, b"secure /mtls")
    curl = certs.run_tool(["curl", "-sS", "--max-time", "5", "--cacert", str(cafile),
                           "--cert", str(client_cert), "--key", str(client_key),
                           f"https://localhost:{srv.port}/curl-mtls"])
    assert curl.stdout == b"secure /curl-mtls", curl.stderr
    for cert, key in ((None, None), (stranger_cert, stranger_key)):
        with pytest.raises((ssl.SSLError, ConnectionError, http.client.RemoteDisconnected)):
            get(cert, key)
    wait_for(lambda: len(srv.errors) >= 2, 5.0, "len(srv.errors) >= 2")
    assert any("refused" in e for e in srv.errors), srv.errors  # the stranger's CA
    assert srv.requests == ["/mtls", "/curl-mtls"]
    assert get(client_cert, client_key) == (200, b"secure /mtls")


def test_mongoose_client_verifies_an_rsa_server_over_tls_1_2(
        manager: Manager, ca: certs.CA, leaves: dict[str, certs.Leaf], tmp_path: Path) -> None:
    srv = PyTlsServer(leaves["rsa4096"], tmp_path)
    try:
        client = HttpsClient(manager, srv.port, TlsOpts(ca=ca.cert_pem, name="localhost"),
                             "/rsa")
        wait_for(lambda: client.closed, 5.0, "client.closed", manager=manager)
    finally:
        srv.close()
    assert client.errors == []
    assert client.response == (200, b"py-tls /rsa")


@pytest.mark.parametrize("garbage", [
    b"\x17\x03\x03\x00\x40" + b"\xaa" * 64,   # application data that does not decrypt
    b"\x16\x03\x03\x00\x04\x01\x00\x00\x00",  # a plaintext handshake record mid-session
    b"GET / HTTP/1.1\r\n\r\n",                # plain text after the handshake
], ids=["bad-mac", "handshake", "plain"])
def test_garbage_from_a_peer_that_stays_connected_is_closed(
        server_thread: Any, leaves: dict[str, certs.Leaf], cafile: Path, garbage: bytes) -> None:
    leaf = leaves["p256"]
    srv = TlsServer(server_thread, TlsOpts(cert=leaf.cert_pem, key=leaf.key_pem()))
    with bio_handshake(srv.port, cafile) as sock:
        sock.sendall(garbage)  # and no EOF: the server must end it by itself
        sock.settimeout(3)
        try:
            while sock.recv(4096):  # session tickets, perhaps an alert, then EOF
                pass
        except ConnectionResetError:
            pass
    wait_for(lambda: srv.closed >= 1, 5.0, "srv.closed >= 1")
    assert srv.requests == []
    assert https_get(srv.port, cafile, "/after") == (200, b"secure /after")


# --- certificate and key files ---------------------------------------------------------------

def test_from_files_reads_and_checks_once(server_thread: Any, leaves: dict[str, certs.Leaf],
                                          cafile: Path, tmp_path: Path) -> None:
    cert, key = leaves["rsa2048"].write(tmp_path, "rsa")
    opts = TlsOpts.from_files(cert=cert, key=str(key), ca=cafile, name="localhost")
    assert opts.cert == cert.read_bytes() and opts.name == b"localhost"
    served = TlsOpts.from_files(cert=cert, key=key)
    srv = TlsServer(server_thread, served)
    assert https_get(srv.port, cafile, "/files") == (200, b"secure /files")
    # Picklable (worker processes get their options this way): fields only, the copy makes
    # its own OpenSSL context.
    copy = pickle.loads(pickle.dumps(served))
    assert (copy.cert, copy.key, copy.name) == (served.cert, served.key, served.name)
    srv2 = TlsServer(server_thread, copy)
    assert https_get(srv2.port, cafile, "/copy") == (200, b"secure /copy")


def test_bad_certificate_files_name_the_file_and_the_problem(
        ca: certs.CA, leaves: dict[str, certs.Leaf], tmp_path: Path) -> None:
    leaf = leaves["rsa2048"]
    cert, key = leaf.write(tmp_path, "good")
    before, after = certs.expired_window()
    expired_cert, expired_key = ca.issue(not_before=before, not_after=after,
                                         kind="rsa2048").write(tmp_path, "expired")
    future = certs.expired_window()[1].replace(year=after.year + 2)
    early_cert, _ = ca.issue(not_before=future, not_after=future.replace(year=future.year + 1)
                             ).write(tmp_path, "early")
    encrypted = tmp_path / "encrypted.key"
    encrypted.write_bytes(certs.key_pem(leaf.key, "pkcs8", password=b"secret"))
    traditional_encrypted = tmp_path / "trad-encrypted.key"
    traditional_encrypted.write_bytes(certs.key_pem(leaf.key, "traditional",
                                                    password=b"secret"))
    not_pem = tmp_path / "notpem.crt"
    not_pem.write_bytes(b"this is not a certificate\n")
    other_key = tmp_path / "other.key"
    other_key.write_bytes(leaves["p256"].key_pem())
    truncated = tmp_path / "truncated.key"
    truncated.write_bytes(leaf.key_pem()[:200])

    cases: list[tuple[dict[str, Any], Path, str]] = [
        ({"cert": expired_cert, "key": expired_key}, expired_cert, "expired on"),
        ({"cert": early_cert, "key": key}, early_cert, "not valid before"),
        ({"cert": cert, "key": encrypted}, encrypted, "is encrypted"),
        ({"cert": cert, "key": traditional_encrypted}, traditional_encrypted, "is encrypted"),
        ({"cert": not_pem, "key": key}, not_pem, "not a certificate file"),
        ({"ca": not_pem}, not_pem, "not a certificate file"),
        ({"cert": cert, "key": other_key}, other_key, "does not belong"),
        ({"cert": cert, "key": truncated}, truncated, "incomplete"),
        ({"cert": cert, "key": not_pem}, not_pem, "cannot read the private key"),
    ]
    for kwargs, named, problem in cases:
        with pytest.raises(ValueError, match=problem) as info:
            TlsOpts.from_files(**kwargs)
        assert str(named) in str(info.value), info.value
    with pytest.raises(FileNotFoundError):
        TlsOpts.from_files(cert=tmp_path / "missing.crt", key=key)


def test_every_key_type_serves(server_thread: Any, ca: certs.CA, cafile: Path) -> None:
    # What the built-in engine refuses (test_tls.py) the OpenSSL engine serves.
    for kind, form in (("p384", "pkcs8"), ("ed25519", "pkcs8"), ("rsa2048", "der-pkcs8"),
                       ("p256", "der-traditional")):
        leaf = ca.issue(kind=kind)
        srv = TlsServer(server_thread, TlsOpts(cert=leaf.cert_pem, key=leaf.key_pem(form)))
        assert https_get(srv.port, cafile, f"/{kind}") == (200, f"secure /{kind}".encode())


# --- resources --------------------------------------------------------------------------------

@pytest.mark.no_asan  # counts memory; ASan's quarantine holds freed blocks back
def test_memory_and_fds_back_to_baseline(server_thread: Any, leaves: dict[str, certs.Leaf],
                                         cafile: Path) -> None:
    leaf = leaves["rsa2048"]
    opts = TlsOpts(cert=leaf.cert_pem, key=leaf.key_pem())
    served: list[int] = []

    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_ACCEPT:
            conn.tls_init(opts)
        elif ev == MG_EV_HTTP_MSG:
            served.append(1)
            conn.reply(200, b"ok")

    st = server_thread(handler)
    port = st.listen("https://127.0.0.1:0")
    st.start()

    def round_of(n: int) -> None:
        for i in range(n):
            assert https_get(port, cafile, "/") == (200, b"ok")
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(b"\x16\x03\x01\x00\x40" + b"\xff" * 64 if i % 2 else
                             _client_hello(0x0301))
                try:
                    while sock.recv(4096):
                        pass
                except ConnectionResetError:
                    pass

    round_of(40)  # warm-up: OpenSSL's and the allocator's one-time state
    gc.collect()
    fds, rss = fd_count(), rss_bytes()
    round_of(200)
    gc.collect()
    wait_for(lambda: fd_count() <= fds, 3.0, lambda: f"fd_count() <= fds ({(fd_count(), fds)})")
    growth = rss_bytes() - rss
    assert growth < 4 * 1024 * 1024, f"RSS grew {growth / 1e6:.1f} MB over 200 sessions"
    assert len(served) == 240


# --- client options: skip_verification, ALPN -------------------------------------------------

def test_skip_verification_connects_to_a_peer_it_could_not_verify(
        manager: Manager, leaves: dict[str, certs.Leaf], tmp_path: Path) -> None:
    stranger = certs.CA(name="stranger CA")
    srv = PyTlsServer(leaves["rsa2048"], tmp_path)
    try:
        checked = HttpsClient(manager, srv.port, TlsOpts(ca=stranger.cert_pem,
                                                         name="wrong.example"), "/checked")
        skipped = HttpsClient(manager, srv.port,
                              TlsOpts(ca=stranger.cert_pem, name="wrong.example",
                                      skip_verification=True), "/skipped")
        wait_for(lambda: checked.closed and skipped.closed, 5.0,
                 "checked.closed and skipped.closed", manager=manager)
    finally:
        srv.close()
    assert checked.response is None and checked.errors
    assert skipped.errors == []
    assert skipped.response == (200, b"py-tls /skipped")


class _AlpnServer:
    """Python's ssl as a server that offers h2 and http/1.1 and records what was chosen."""

    def __init__(self, leaf: certs.Leaf, tmp_path: Path) -> None:
        cert, key = leaf.write(tmp_path, "alpn")
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        self.ctx.set_alpn_protocols(["h2", "http/1.1"])
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.chosen: list[str | None] = []

    def serve_one(self) -> None:
        self.listener.settimeout(5)
        raw, _ = self.listener.accept()
        with self.ctx.wrap_socket(raw, server_side=True) as tls:
            self.chosen.append(tls.selected_alpn_protocol())
            tls.settimeout(5)
            if recv_head(tls) is None:
                return
            tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\nalpn")


def test_http_client_offers_http_1_1_by_alpn(manager: Manager, ca: certs.CA,
                                            leaves: dict[str, certs.Leaf],
                                            tmp_path: Path) -> None:
    srv = _AlpnServer(leaves["p256"], tmp_path)
    thread = threading.Thread(target=srv.serve_one, daemon=True)
    thread.start()
    try:
        client = HttpsClient(manager, srv.port, TlsOpts(ca=ca.cert_pem, name="localhost"))
        wait_for(lambda: client.closed, 5.0, "client.closed", manager=manager)
    finally:
        thread.join(5)
        srv.listener.close()
    assert client.errors == [] and client.response == (200, b"alpn")
    # Offered h2 first by the server, the client's only offer wins: HTTP/1.1, not h2.
    assert srv.chosen == ["http/1.1"]
