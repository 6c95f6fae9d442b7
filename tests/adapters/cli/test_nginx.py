"""Debian's nginx in front of two cymongoose instances, one on TCP and one on a Unix socket,
configured as docs/deployment.md says: the client's address and scheme reach the app through
the trusted proxy headers, and a forged X-Forwarded-For does not, neither through nginx nor
from a peer that talks to an instance directly."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.cli_run import CLI, proxied_get, self_signed_cert, unix_answers
from support.nginx import start_nginx, stop_nginx
from support.ports import free_port

from conftest import tool_env, wait_until

pytestmark = pytest.mark.timeout(60)  # nginx: tools/debian-packages.txt

NGINX_HTTP = """
    access_log off;
    upstream cymongoose {{
        server 127.0.0.1:{tcp_port};
        server unix:{uds};
        keepalive 16;
    }}
    server {{
        listen 127.0.0.1:{http_port};
        listen 127.0.0.1:{https_port} ssl;
        ssl_certificate {tmp}/cert.pem;
        ssl_certificate_key {tmp}/key.pem;
        location / {{
            proxy_pass http://cymongoose;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $remote_addr;
            proxy_set_header X-Forwarded-Proto $scheme;
        }}
    }}
"""


def test_nginx_in_front_of_a_tcp_and_a_unix_instance(tmp_path: Path) -> None:
    self_signed_cert(tmp_path, "shop.example")
    tcp_port, http_port, https_port = free_port(), free_port(), free_port()
    uds = str(tmp_path / "app.sock")
    trust = ["--proxy-headers"]  # the default --forwarded-allow-ips: 127.0.0.1, nginx here
    tcp = CLI(tmp_path, "cli_app:app", "--port", str(tcp_port), *trust)
    unix = CLI(tmp_path, "cli_app:app", "--uds", uds, *trust)
    nginx = None
    try:
        tcp.wait_http(tcp_port)
        assert wait_until(lambda: os.path.exists(uds) and unix_answers(uds), 20), unix.err
        nginx = start_nginx(tmp_path, NGINX_HTTP.format(
            tmp=tmp_path, uds=uds, tcp_port=tcp_port, http_port=http_port,
            https_port=https_port), http_port, tool_env())

        pids = set()
        for _ in range(6):  # round robin over both instances
            body = proxied_get(http_port, "127.0.0.3", headers="X-Forwarded-For: 6.6.6.6\r\n")
            pid, remote, scheme, host = body.decode().split("|")[:4]
            assert (remote, scheme, host) == ("127.0.0.3", "http", "shop.example")
            pids.add(pid)
        assert len(pids) == 2
        for _ in range(2):
            body = proxied_get(https_port, "127.0.0.4", tls=True)
            assert body.decode().split("|")[1:3] == ["127.0.0.4", "https"]
        # A peer that is not the proxy forges in vain.
        body = proxied_get(tcp_port, "127.0.0.5", headers="X-Forwarded-For: 6.6.6.6\r\n"
                                                   "X-Forwarded-Proto: https\r\n")
        assert body.decode().split("|")[1:3] == ["127.0.0.5", "http"]
    finally:
        stop_nginx(nginx)
        assert tcp.stop() == 0, tcp.err
        assert unix.stop() == 0, unix.err
