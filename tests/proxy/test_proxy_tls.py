"""https upstreams: the certificate is verified against the CA given (or the system's
store) and the upstream's host name, which is also sent as SNI; a refused certificate is a
502 that says why."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from support.http_client import HttpConnection

from cymongoose import TLS_ENGINE, TlsOpts

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "protocols"))
import certs  # noqa: E402 - test-time certificates

pytestmark = [pytest.mark.timeout(30),
              pytest.mark.skipif(TLS_ENGINE != "openssl", reason="https upstreams need OpenSSL")]


def _https_upstream(upstream: Any, ca: certs.CA, hosts: tuple[str, ...]) -> Any:
    leaf = ca.issue(hosts)
    return upstream("tls", tls=TlsOpts(cert=leaf.cert_pem, key=leaf.key_pem()))


def test_an_https_upstream_verified_against_the_ca(upstream: Any, proxy: Any,
                                                   tmp_path: Path) -> None:
    ca = certs.CA()
    up = _https_upstream(upstream, ca, ("localhost",))
    p = proxy({"/": up.url}, ca=str(ca.write(tmp_path)))
    with HttpConnection(p.port) as client:
        for i in range(3):
            resp = client.request("POST", f"/s{i}", body=b"over TLS")
            assert (resp.status, resp.body) == (200, f"tls POST /s{i}\n".encode())
    assert [s.body for s in up.seen] == [b"over TLS"] * 3
    assert up.accepted == 1  # one TLS session, pooled


@pytest.mark.parametrize(("hosts", "ca_given", "verify", "status"), [
    (("localhost",), False, True, 502),  # a private CA is not in the system's store
    (("other.example",), True, True, 502),  # the certificate is not for this host
    (("other.example",), False, False, 200),  # tls_verify=False: no check at all
])
def test_a_certificate_the_proxy_does_not_trust_is_a_502(
        upstream: Any, proxy: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture,
        hosts: tuple[str, ...], ca_given: bool, verify: bool, status: int) -> None:
    ca = certs.CA()
    up = _https_upstream(upstream, ca, hosts)
    p = proxy({"/": up.url}, ca=str(ca.write(tmp_path)) if ca_given else None,
              tls_verify=verify)
    with caplog.at_level(logging.WARNING, "cymongoose"):
        with HttpConnection(p.port) as client:
            assert client.request("GET", "/x").status == status
    if status == 502:
        assert "certificate was refused" in caplog.text, caplog.text
        assert up.seen == []


def test_clients_over_tls_reach_a_plain_upstream(upstream: Any, proxy: Any) -> None:
    import socket
    import ssl

    ca = certs.CA()
    leaf = ca.issue(("127.0.0.1",))
    up = upstream()
    p = proxy({"/": up.url}, tls=TlsOpts(cert=leaf.cert_pem, key=leaf.key_pem()))
    context = ssl.create_default_context(cadata=ca.cert_pem.decode())
    with socket.create_connection(("127.0.0.1", p.port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
            sock.sendall(b"GET /secure HTTP/1.1\r\nHost: shop.example\r\n"
                         b"Connection: close\r\n\r\n")
            got = b""
            while chunk := sock.recv(65536):
                got += chunk
    assert got.startswith(b"HTTP/1.1 200 OK\r\n") and got.endswith(b"up GET /secure\n")
    assert up.seen[0].header("X-Forwarded-Proto") == "https"
