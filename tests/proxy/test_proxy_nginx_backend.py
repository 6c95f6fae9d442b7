"""Debian's nginx as the upstream: a real server that closes idle keep-alive connections on
its own timer (150 ms here, far under the pool's), answers with its own framing, and serves a
file; through the proxy no request fails and each reaches nginx once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.http_client import HttpConnection
from support.nginx import start_nginx, stop_nginx
from support.ports import HOST, free_port
from support.subprocess_env import tool_env
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(60)  # nginx: tools/debian-packages.txt

NGINX_HTTP = """
    access_log {tmp}/access.log;
    keepalive_timeout 150ms;
    server {{
        listen {host}:{port};
        location /file {{ alias {tmp}/file.bin; }}
        location / {{ return 200 "nginx $request_method $request_uri\\n"; }}
    }}
"""


def test_nginx_closing_idle_connections_costs_no_request(proxy: Any, tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / "file.bin").write_bytes(bytes(range(256)) * 1024)  # 256 KiB
    nginx = start_nginx(tmp_path, NGINX_HTTP.format(tmp=tmp_path, host=HOST, port=port), port,
                        tool_env())
    try:
        p = proxy({"/": f"http://{HOST}:{port}"}, idle_timeout=30)
        with HttpConnection(p.port) as client:
            for i in range(4):
                method = "POST" if i % 2 else "GET"
                resp = client.request(method, f"/n{i}", body=b"x" * 100 if i % 2 else b"")
                assert resp.body == f"nginx {method} /n{i}\n".encode()
                # nginx closes the pooled connection once it has been idle for 150 ms.
                wait_for(lambda: p.stats()[0]["open"] == 0, 5, 'p.stats()[0]["open"] == 0')
            resp = client.request("GET", "/file")
            assert resp.body == bytes(range(256)) * 1024
    finally:
        stop_nginx(nginx)
    lines = (tmp_path / "access.log").read_text().splitlines()
    assert [line.split('"')[1].split()[:2] for line in lines] == [
        ["GET", "/n0"], ["POST", "/n1"], ["GET", "/n2"], ["POST", "/n3"], ["GET", "/file"]]
