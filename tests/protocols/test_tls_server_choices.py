"""What a TLS server chooses for its clients (OpenSSL engine): its own cipher order, ECDHE with
AEAD by default for TLS 1.2 (a static-RSA or CBC-only client is refused), the `ciphers`
option (TlsOpts, --ssl-ciphers, CYMONGOOSE_SSL_CIPHERS) and its validation, and a CA bundle
holding an expired certificate (left out with a warning, as nginx starts with it)."""

from __future__ import annotations

import datetime as dt
import logging
import pickle
import re
import shutil
import ssl
from pathlib import Path
from typing import Any

import certs
import pytest
from support.cli_run import CLI, cli_env, https_raw_get, run_cli
from support.ports import free_port
from support.waiting import wait_for
from test_tls import TlsServer, https_get

from cymongoose import TLS_ENGINE, TlsOpts
from cymongoose.config import Config, ConfigError

pytestmark = [
    pytest.mark.skipif(TLS_ENGINE != "openssl", reason="the cipher list is OpenSSL's"),
    pytest.mark.skipif(shutil.which("openssl") is None,
                       reason="openssl is in tools/debian-packages.txt"),
    pytest.mark.timeout(120),
]

# Mozilla's "intermediate" TLS 1.2 list without DHE: ECDHE key exchange, AEAD ciphers.
MODERN = {"ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256",
          "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384",
          "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305"}


@pytest.fixture(scope="module")
def ca() -> certs.CA:
    return certs.CA(kind="rsa2048", name="cipher test CA")


@pytest.fixture(scope="module")
def rsa_leaf(ca: certs.CA) -> certs.Leaf:
    # An RSA certificate: the only kind a static-RSA (kRSA) suite can use.
    return ca.issue(("localhost", "127.0.0.1"), kind="rsa2048")


@pytest.fixture
def cafile(ca: certs.CA, tmp_path: Path) -> Path:
    return ca.write(tmp_path)


def s_client(port: int, cafile: Path, *args: str) -> tuple[int, str]:
    """One handshake and a request; (exit status, what openssl printed)."""
    proc = certs.run_tool(
        ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-servername", "localhost",
         "-CAfile", str(cafile), "-ign_eof", *args],
        input=b"GET /c HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    return proc.returncode, proc.stdout.decode(errors="replace") + proc.stderr.decode(
        errors="replace")


def negotiated(out: str) -> str | None:
    """The cipher s_client reports, None when the handshake failed."""
    m = re.search(r"Cipher is (\S+)", out)
    return None if m is None or m.group(1) == "(NONE)" else m.group(1)


def test_the_server_picks_ecdhe_gcm_over_a_clients_static_rsa_first(
        server_thread: Any, rsa_leaf: certs.Leaf, cafile: Path) -> None:
    srv = TlsServer(server_thread, TlsOpts(cert=rsa_leaf.cert_pem, key=rsa_leaf.key_pem()))
    # The client lists static-RSA AES128-SHA first: 0.2.x and c32a341 let it win.
    rc, out = s_client(srv.port, cafile, "-tls1_2",
                       "-cipher", "AES128-SHA:ECDHE-RSA-AES128-GCM-SHA256")
    assert negotiated(out) == "ECDHE-RSA-AES128-GCM-SHA256", out
    assert "secure /c" in out
    # A client offering only what the default leaves out is refused, and the server serves
    # on: static RSA (no forward secrecy), ECDHE with CBC and SHA-1, 3DES.
    for weak in ("AES128-SHA", "AES256-GCM-SHA384", "ECDHE-RSA-AES128-SHA",
                 "ECDHE-RSA-AES256-SHA384"):
        rc, out = s_client(srv.port, cafile, "-tls1_2", "-cipher", weak)
        assert rc != 0 and negotiated(out) is None, (weak, out)
    rc, out = s_client(srv.port, cafile, "-tls1_2")  # openssl's own list: one of ours
    assert negotiated(out) in MODERN, out
    rc, out = s_client(srv.port, cafile, "-tls1_3")
    assert negotiated(out) in {"TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                               "TLS_AES_128_GCM_SHA256"}, out
    assert https_get(srv.port, cafile, "/after") == (200, b"secure /after")
    assert set(TlsOpts.DEFAULT_CIPHERS.split(":")) == MODERN


def test_ciphers_option_sets_the_list_and_the_server_order_wins(
        server_thread: Any, rsa_leaf: certs.Leaf, cafile: Path) -> None:
    opts = TlsOpts(cert=rsa_leaf.cert_pem, key=rsa_leaf.key_pem(),
                   ciphers="ECDHE-RSA-CHACHA20-POLY1305:ECDHE-RSA-AES256-GCM-SHA384")
    assert opts.ciphers == b"ECDHE-RSA-CHACHA20-POLY1305:ECDHE-RSA-AES256-GCM-SHA384"
    assert "ciphers=" in repr(opts)
    assert pickle.loads(pickle.dumps(opts)).ciphers == opts.ciphers
    srv = TlsServer(server_thread, opts)
    rc, out = s_client(srv.port, cafile, "-tls1_2", "-cipher",
                       "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-CHACHA20-POLY1305")
    assert negotiated(out) == "ECDHE-RSA-CHACHA20-POLY1305", out
    rc, out = s_client(srv.port, cafile, "-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256")
    assert rc != 0 and negotiated(out) is None, out  # not in the list given
    # OpenSSL's own keywords and operators work, as nginx's ssl_ciphers takes them.
    assert TlsOpts(ciphers="HIGH:!aNULL:!MD5:@STRENGTH").ciphers == b"HIGH:!aNULL:!MD5:@STRENGTH"


@pytest.mark.parametrize("bad, says", [
    ("NOPE", "'NOPE' selects no TLS 1.2 cipher"),
    ("ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA265", "'ECDHE-RSA-AES128-GCM-SHA265'"),
    ("HIGH;!aNULL;AES128-SAH", "'AES128-SAH'"),  # OpenSSL also splits on ';' and ' '
    ("TLS_AES_128_GCM_SHA256", "TLS 1.3 suites are OpenSSL's defaults"),
    ("!ALL", "it selects no TLS 1.2 cipher"),
    ("ECDHE\x00", "ASCII, no NUL"),
])
def test_a_bad_cipher_list_is_refused_naming_the_option(bad: str, says: str) -> None:
    # OpenSSL alone would drop an unknown name silently (a typo narrowing the list).
    with pytest.raises(ValueError, match=re.escape(says)) as exc:
        TlsOpts(ciphers=bad)
    assert str(exc.value).startswith("TlsOpts.ciphers")


def test_bad_ciphers_in_config_and_on_the_command_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^ssl_ciphers must be an OpenSSL cipher list"):
        Config(ssl_ciphers="NOPE")
    with pytest.raises(ConfigError, match="ssl_ciphers needs ssl_certfile"):
        Config(ssl_ciphers="HIGH")
    leaf = certs.CA().issue()
    leaf.write(tmp_path)
    done = run_cli(tmp_path, "cli_app:app", "--port", str(free_port()), "--ssl-certfile",
                   "server.crt", "--ssl-keyfile", "server.key", "--ssl-ciphers", "AES128-SAH",
                   env=_env())
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--ssl-ciphers" in lines[0] and "AES128-SAH" in lines[0], lines
    env_done = run_cli(tmp_path, "cli_app:app", "--port", str(free_port()), "--ssl-certfile",
                       "server.crt", "--ssl-keyfile", "server.key",
                       env=_env(CYMONGOOSE_SSL_CIPHERS="bogus"))
    assert env_done.returncode == 2 and "CYMONGOOSE_SSL_CIPHERS" in env_done.stderr, \
        env_done.stderr


def _env(**extra: str) -> dict[str, str]:
    # tests/protocols runs under make asan-test too: the command needs the preload there.
    return cli_env(keep_asan=True, **extra)


def test_ssl_ciphers_flag_reaches_the_server(tmp_path: Path, ca: certs.CA,
                                             rsa_leaf: certs.Leaf, cafile: Path) -> None:
    rsa_leaf.write(tmp_path)
    port = free_port()
    cli = CLI(tmp_path, "cli_app:app", "--port", str(port), "--ssl-certfile", "server.crt",
              "--ssl-keyfile", "server.key", "--ssl-ciphers", "ECDHE-RSA-AES256-GCM-SHA384",
              env=_env())
    ctx = ssl.create_default_context(cafile=str(cafile))
    try:
        wait_for(lambda: https_raw_get(port, ctx, "/up") is not None, 30,
                 lambda: f'https_raw_get(port, ctx, "/up") is not None ({cli.err})')
        rc, out = s_client(port, cafile, "-tls1_2")
        assert negotiated(out) == "ECDHE-RSA-AES256-GCM-SHA384", out
    finally:
        assert cli.stop() == 0, cli.err


# --- a CA bundle with an expired certificate --------------------------------------------------

def _bundle(tmp_path: Path, good: certs.CA) -> tuple[Path, certs.CA]:
    before, after = certs.expired_window()
    expired = certs.CA(name="expired root, Ltd", not_before=before, not_after=after)
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=10)
    not_yet = certs.CA(name="future root", not_before=later,
                       not_after=later + dt.timedelta(days=30))
    path = tmp_path / "bundle.pem"
    path.write_bytes(expired.cert_pem + good.cert_pem + not_yet.cert_pem)
    return path, expired


def test_an_expired_certificate_in_a_ca_bundle_is_skipped_with_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    good = certs.CA(name="client CA")
    bundle, expired = _bundle(tmp_path, good)
    leaf = certs.CA().issue()
    cert, key = leaf.write(tmp_path)
    with caplog.at_level(logging.WARNING, logger="cymongoose"):
        opts = TlsOpts.from_files(ca=bundle, cert=cert, key=key)
    lines = [r.getMessage() for r in caplog.records if r.name == "cymongoose"]
    assert len(lines) == 2, lines
    # The subject as RFC 4514 writes it (one backslash before the comma), not repr()'d.
    assert str(bundle) in lines[0] and "'CN=expired root\\, Ltd'" in lines[0] and \
        "expired on" in lines[0] and "certificate 1 of 3" in lines[0], lines
    assert "'CN=future root'" in lines[1] and "not valid before" in lines[1], lines
    assert opts.ca == good.cert_pem  # only the usable one is handed to OpenSSL
    only_expired = tmp_path / "old.pem"
    only_expired.write_bytes(expired.cert_pem)
    with pytest.raises(ValueError, match=r"old.pem: no usable CA certificate: .*expired on"):
        TlsOpts.from_files(ca=only_expired, cert=cert, key=key)
    with pytest.raises(ValueError, match="expired on"):  # the server's own: still fatal
        TlsOpts.from_files(cert=_expired_leaf(tmp_path), key=key)


def _expired_leaf(tmp_path: Path) -> Path:
    before, after = certs.expired_window()
    leaf = certs.CA().issue(not_before=before, not_after=after)
    path = tmp_path / "expired-server.crt"
    path.write_bytes(leaf.cert_pem)
    return path


def test_cli_starts_with_such_a_bundle_and_verifies_clients_against_the_rest(
        tmp_path: Path) -> None:
    good = certs.CA(name="client CA")
    bundle, _ = _bundle(tmp_path, good)
    server_ca = certs.CA()
    server_ca.issue().write(tmp_path)
    ca_path = server_ca.write(tmp_path, "server-ca")
    client_cert, client_key = good.issue(["client"], client=True).write(tmp_path, "client")
    port = free_port()
    cli = CLI(tmp_path, "cli_app:app", "--port", str(port), "--ssl-certfile", "server.crt",
              "--ssl-keyfile", "server.key", "--ssl-ca", str(bundle), env=_env())
    ctx = ssl.create_default_context(cafile=str(ca_path))
    ctx.load_cert_chain(client_cert, client_key)
    try:
        wait_for(lambda: https_raw_get(port, ctx, "/up") is not None, 30,
                 lambda: f'https_raw_get(port, ctx, "/up") is not None ({cli.err})')
        out = https_raw_get(port, ctx, "/mtls")
        assert out is not None and out.startswith(b"HTTP/1.1 200"), out
    finally:
        assert cli.stop() == 0, cli.err
    warned = [line for line in cli.err.splitlines() if "skipping the CA certificate" in line]
    assert len(warned) == 2 and "CN=expired root" in warned[0], cli.err
