"""HTTP/2 over TLS, chosen by ALPN (RFC 7301) on the OpenSSL engine: h2 when the client
offers it, HTTP/1.1 otherwise or when the listener has HTTP/2 off; a stream's TLS is its
connection's. Peers: curl, httpx."""

from __future__ import annotations

import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.subprocess_env import tool_env
from support.waiting import wait_for
from support.wsgi_server import running_wsgi_server

from cymongoose import MG_EV_ACCEPT, MG_EV_HTTP_MSG, TLS_ENGINE, Connection, TlsOpts
from cymongoose._mongoose import HTTP2_LIBRARY

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "protocols"))
import certs  # noqa: E402 - test-time certificates

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(HTTP2_LIBRARY is None, reason="built without HTTP/2"),
    pytest.mark.skipif(TLS_ENGINE != "openssl", reason="ALPN needs the OpenSSL engine"),
]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[TlsOpts, Path]:
    ca = certs.CA()
    leaf = ca.issue()
    cafile = ca.write(tmp_path_factory.mktemp("h2tls"))
    return TlsOpts(cert=leaf.cert_pem, key=leaf.key_pem()), cafile


def tls_site(server_thread: Any, opts: TlsOpts, **listen: Any) -> tuple[int, Any]:
    """The port of a started TLS server answering "<proto> <is_tls> <TLS version>", and
    its ServerThread."""
    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_ACCEPT:
            conn.tls_init(opts)
        elif ev == MG_EV_HTTP_MSG:
            info = conn.tls_info
            conn.reply(200, f"{msg.proto} {conn.is_tls} {info['protocol'] if info else '-'}")

    st = server_thread(handler)
    port = st.listen("https://127.0.0.1:0", **listen)
    st.start()
    return int(port), st


def curl(cafile: Path, *args: str) -> str:
    out = subprocess.run(["curl", "-sS", "--cacert", str(cafile), "-w", " %{http_version}",
                          *args], capture_output=True, text=True, timeout=20, check=True,
                         env=tool_env())
    return out.stdout


def test_alpn_picks_h2_when_offered_and_http11_otherwise(
        server_thread: Any, pki: tuple[TlsOpts, Path]) -> None:
    opts, cafile = pki
    port, st = tls_site(server_thread, opts)
    url = f"https://localhost:{port}/"
    # The stream sees its connection's TLS.
    assert curl(cafile, "--http2", url) == "HTTP/2.0 True TLSv1.3 2"
    assert curl(cafile, "--http1.1", url) == "HTTP/1.1 True TLSv1.3 1.1"
    with httpx.Client(http2=True, verify=ssl.create_default_context(cafile=str(cafile)),
                      timeout=20) as client:
        answers = [client.get(f"{url}n{i}") for i in range(5)]
    assert [r.http_version for r in answers] == ["HTTP/2"] * 5
    # The metrics count each by protocol: two connections chose h2, six requests came on them.
    wait_for(lambda: st.call(st.manager.metrics)["connections_open"] == 0, 10,
             'st.call(st.manager.metrics)["connections_open"] == 0')
    m = st.call(st.manager.metrics)
    assert m["requests"] == {200: 7} and m["requests_http2"] == {200: 6}
    assert (m["http2_connections_total"], m["http2_connections_open"]) == (2, 0)


def test_http2_off_answers_alpn_with_http11(server_thread: Any,
                                            pki: tuple[TlsOpts, Path]) -> None:
    opts, cafile = pki
    port, _ = tls_site(server_thread, opts, http2=False)
    assert curl(cafile, "--http2", f"https://localhost:{port}/") == "HTTP/1.1 True TLSv1.3 1.1"


def test_wsgi_over_h2_with_tls(pki: tuple[TlsOpts, Path]) -> None:
    opts, cafile = pki

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [" ".join((environ["SERVER_PROTOCOL"], environ["wsgi.url_scheme"],
                          environ.get("HTTPS", "-"))).encode()]

    with running_wsgi_server(app, server_kwargs={"tls": opts}, scheme="https") as srv:
        assert curl(cafile, "--http2", f"https://localhost:{srv.port}/") == \
            "HTTP/2.0 https - 2"  # HTTPS and SSL_* are set only when clients are verified


def test_proxied_h2_over_tls_says_https_upstream(upstream: Any, proxy: Any,
                                                 pki: tuple[TlsOpts, Path]) -> None:
    opts, cafile = pki
    up = upstream()
    p = proxy({"/api": up.url}, tls=opts)
    assert curl(cafile, "--http2", f"https://localhost:{p.port}/api/x") == "up GET /api/x\n 2"
    assert up.seen[0].header("X-Forwarded-Proto") == "https"
