"""Debian's HAProxy in front of two cymongoose instances (TCP and Unix socket) with the
configuration of docs/deployment.md: active health checks bring both up, `option forwardfor`
appends the client to a forged X-Forwarded-For and the app still sees the real client, a
client's X-Forwarded-Host and Forwarded are removed, and the scheme of the TLS frontend
reaches the app."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support.cli_run import CLI, port_open, proxied_get, self_signed_cert, unix_answers
from support.ports import free_port
from support.subprocess_env import tool_env
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(60)  # haproxy: tools/debian-packages.txt

# What a client can forge about itself; HAProxy appends to X-Forwarded-For (the rightmost
# untrusted entry is the client), sets X-Forwarded-Proto and removes the rest.
FORGED = ("X-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Proto: https\r\n"
          "X-Forwarded-Host: evil.example\r\n"
          "Forwarded: for=6.6.6.6;proto=https;host=evil.example\r\n")

HAPROXY_CONF = """
global
    log stderr format raw local0 warning
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
    option forwardfor
    http-reuse safe
frontend www
    bind 127.0.0.1:{http_port}
    bind 127.0.0.1:{https_port} ssl crt {tmp}/site.pem
    http-request set-header X-Forwarded-Proto https if {{ ssl_fc }}
    http-request set-header X-Forwarded-Proto http if !{{ ssl_fc }}
    http-request del-header X-Forwarded-Host
    http-request del-header Forwarded
    default_backend cymongoose
backend cymongoose
    balance roundrobin
    option httpchk GET /healthz
    http-check expect status 200
    server tcp1 127.0.0.1:{tcp_port} check inter 200ms fall 3 rise 1
    server sock unix@{uds} check inter 200ms fall 3 rise 1
"""


def test_haproxy_in_front_of_a_tcp_and_a_unix_instance(tmp_path: Path) -> None:
    self_signed_cert(tmp_path, "shop.example")
    (tmp_path / "site.pem").write_bytes((tmp_path / "cert.pem").read_bytes()
                                        + (tmp_path / "key.pem").read_bytes())
    tcp_port, http_port, https_port = free_port(), free_port(), free_port()
    uds = str(tmp_path / "app.sock")
    tcp = CLI(tmp_path, "cli_app:app", "--port", str(tcp_port), "--proxy-headers")
    unix = CLI(tmp_path, "cli_app:app", "--uds", uds, "--proxy-headers")
    haproxy = None
    try:
        tcp.wait_http(tcp_port)
        wait_for(lambda: os.path.exists(uds) and unix_answers(uds), 20,
                 lambda: f"os.path.exists(uds) and unix_answers(uds) ({unix.err})")
        (tmp_path / "haproxy.cfg").write_text(HAPROXY_CONF.format(
            tmp=tmp_path, uds=uds, tcp_port=tcp_port, http_port=http_port,
            https_port=https_port))
        haproxy = subprocess.Popen(
            [shutil.which("haproxy") or "/usr/sbin/haproxy", "-db", "-f",
             str(tmp_path / "haproxy.cfg")], env=tool_env(), stderr=subprocess.PIPE,
            text=True)
        wait_for(lambda: port_open(http_port), 10, "port_open(http_port)")

        pids: set[str] = set()

        def both_up() -> bool:  # health checks passed: round robin reaches both
            body = proxied_get(http_port, "127.0.0.3", headers=FORGED)
            pid, remote, scheme, host = body.decode().split("|")[:4]
            assert (remote, scheme, host) == ("127.0.0.3", "http", "shop.example")
            pids.add(pid)
            return len(pids) == 2

        wait_for(both_up, 10, "both_up")
        body = proxied_get(https_port, "127.0.0.4", tls=True, headers=FORGED)
        assert body.decode().split("|")[1:4] == ["127.0.0.4", "https", "shop.example"]
    finally:
        if haproxy is not None:
            haproxy.terminate()
            haproxy.wait(10)
        assert tcp.stop() == 0, tcp.err
        assert unix.stop() == 0, unix.err
