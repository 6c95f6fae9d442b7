"""Manager.set_static_mounts() over TLS and HTTP/2: there the guard's static answer cannot
go to the socket itself, so a small body is read into the send buffer after the head and a
large one is copied in pieces (http_static_mounts.pxi); the answers must be whole either
way, over HTTP/1.1 with TLS, HTTP/2 with TLS (ALPN) and cleartext HTTP/2 (prior knowledge)."""

from __future__ import annotations

import ssl
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from cymongoose import MG_EV_ACCEPT, TLS_ENGINE, Connection, TlsOpts
from cymongoose._mongoose import HTTP2_LIBRARY

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "protocols"))
import certs  # noqa: E402 - test-time certificates

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(HTTP2_LIBRARY is None, reason="built without HTTP/2"),
    pytest.mark.skipif(TLS_ENGINE != "openssl", reason="ALPN needs the OpenSSL engine"),
]

SMALL = b"small file\n" * 10
BIG = bytes(range(256)) * 1200  # 300 KiB


@pytest.fixture
def root(tmp_path: Path) -> Path:
    pub = tmp_path / "pub"
    pub.mkdir()
    (pub / "small.txt").write_bytes(SMALL)
    (pub / "big.png").write_bytes(BIG)
    return pub


def _serve(server_thread: Any, root: Path, url: str, opts: TlsOpts | None) -> int:
    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_ACCEPT and opts is not None:
            conn.tls_init(opts)

    st = server_thread(handler)
    st.manager.set_static_mounts([("/s", str(root))])
    port = int(st.listen(url, http2=True))
    st.start()
    return port


def _check(client: httpx.Client, base: str, version: str) -> None:
    for _ in range(3):
        r = client.get(f"{base}/s/small.txt")
        assert (r.status_code, r.content, r.http_version) == (200, SMALL, version)
        r = client.get(f"{base}/s/big.png")
        assert r.content == BIG and r.headers["content-length"] == str(len(BIG))
        r = client.get(f"{base}/s/big.png", headers={"Range": "bytes=100000-100099"})
        assert r.status_code == 206 and r.content == BIG[100000:100100]
        assert client.head(f"{base}/s/big.png").content == b""
        assert client.get(f"{base}/s/nope").status_code == 404


def test_over_tls_http11_and_h2(server_thread: Any, root: Path, tmp_path: Path) -> None:
    ca = certs.CA()
    leaf = ca.issue()
    cafile = ca.write(tmp_path)
    port = _serve(server_thread, root, "https://127.0.0.1:0",
                  TlsOpts(cert=leaf.cert_pem, key=leaf.key_pem()))
    verify = ssl.create_default_context(cafile=str(cafile))
    base = f"https://localhost:{port}"
    with httpx.Client(http2=False, verify=verify, timeout=20) as client:
        _check(client, base, "HTTP/1.1")
    with httpx.Client(http2=True, verify=verify, timeout=20) as client:
        _check(client, base, "HTTP/2")


def test_cleartext_h2(server_thread: Any, root: Path) -> None:
    port = _serve(server_thread, root, "http://127.0.0.1:0", None)
    with httpx.Client(http1=False, http2=True, timeout=20) as client:
        _check(client, f"http://127.0.0.1:{port}", "HTTP/2")
