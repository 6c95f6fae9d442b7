"""Debian's nginx in front of cymongoose instances, configured as docs/deployment.md says:
the client's address, scheme and Host reach the app through the trusted proxy headers, and
what a client forges does not, neither through nginx nor from a peer that talks to an
instance directly. nginx passes on the headers it does not set as the client sent them: a
client's `Forwarded` must not count where nginx sets X-Forwarded-*, nor a client's
X-Forwarded-* where nginx sets `Forwarded` (--proxy-headers-source forwarded), nor a client's
X-Forwarded-Host unless the operator says nginx sets it (--proxy-headers-host). WSGI and ASGI
alike, and uvicorn behind the same block for comparison."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli_run import CLI, cli_env, port_open, proxied_get, self_signed_cert, unix_answers
from support.nginx import start_nginx, stop_nginx
from support.ports import free_port
from support.subprocess_env import tool_env
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(60)  # nginx: tools/debian-packages.txt

# Everything a client can forge about itself, through any of the forwarding families.
FORGED = ("X-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Proto: https\r\n"
          "X-Forwarded-Host: evil.example\r\n"
          "Forwarded: for=6.6.6.6;proto=https;host=evil.example\r\n")
# docs/deployment.md's location block, and c32a341's (which did not clear what nginx does not
# set: the Forwarded it passed on was believed then).
DOCUMENTED = """
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $remote_addr;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Forwarded-Host "";
            proxy_set_header Forwarded "";"""
BEFORE = """
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $remote_addr;
            proxy_set_header X-Forwarded-Proto $scheme;"""
ASGI_ECHO = '''
import os


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    host = dict(scope["headers"]).get(b"host", b"").decode()
    body = "|".join([str(os.getpid()), scope["client"][0], scope["scheme"], host]).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
'''

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
            proxy_pass http://cymongoose;{location}
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
        wait_for(lambda: os.path.exists(uds) and unix_answers(uds), 20,
                 lambda: f"os.path.exists(uds) and unix_answers(uds) ({unix.err})")
        nginx = start_nginx(tmp_path, NGINX_HTTP.format(
            tmp=tmp_path, uds=uds, tcp_port=tcp_port, http_port=http_port,
            https_port=https_port, location=DOCUMENTED), http_port, tool_env())

        pids = set()
        for _ in range(6):  # round robin over both instances
            body = proxied_get(http_port, "127.0.0.3", headers=FORGED)
            pid, remote, scheme, host = body.decode().split("|")[:4]
            assert (remote, scheme, host) == ("127.0.0.3", "http", "shop.example")
            pids.add(pid)
        assert len(pids) == 2
        for _ in range(2):
            body = proxied_get(https_port, "127.0.0.4", tls=True, headers=FORGED)
            assert body.decode().split("|")[1:4] == ["127.0.0.4", "https", "shop.example"]
        # A peer that is not the proxy forges in vain.
        body = proxied_get(tcp_port, "127.0.0.5", headers="X-Forwarded-For: 6.6.6.6\r\n"
                                                   "X-Forwarded-Proto: https\r\n")
        assert body.decode().split("|")[1:3] == ["127.0.0.5", "http"]
    finally:
        stop_nginx(nginx)
        assert tcp.stop() == 0, tcp.err
        assert unix.stop() == 0, unix.err


TWO_SITES = """
    access_log off;
    upstream site {{
        server 127.0.0.1:{app_port};
        keepalive 16;
    }}
    server {{
        listen 127.0.0.1:{documented_port};
        location / {{
            proxy_pass http://site;{documented}
        }}
    }}
    server {{
        listen 127.0.0.1:{before_port};
        location / {{
            proxy_pass http://site;{before}
        }}
    }}
"""


def _uvicorn(tmp_path: Path, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(port),
         "--proxy-headers", "--log-level", "warning", "asgi_echo:app"],
        cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("server", ["cymongoose", "uvicorn"])
def test_asgi_behind_nginx_a_client_forges_nothing(tmp_path: Path, server: str) -> None:
    """cymongoose's ASGI server and uvicorn (the reference: it reads X-Forwarded-For/-Proto
    only) behind the documented block, and behind c32a341's block, which passes a client's
    Forwarded and X-Forwarded-Host on: neither lets the client choose its address, scheme or
    Host."""
    (tmp_path / "asgi_echo.py").write_text(ASGI_ECHO)
    app_port, documented_port, before_port = free_port(), free_port(), free_port()
    proc: subprocess.Popen[str] | CLI
    if server == "cymongoose":
        proc = CLI(tmp_path, "asgi_echo:app", "--port", str(app_port), "--proxy-headers")
    else:
        proc = _uvicorn(tmp_path, app_port)
    nginx = None
    try:
        wait_for(lambda: port_open(app_port), 20, lambda: f"port_open(app_port) ({server})")
        nginx = start_nginx(tmp_path, TWO_SITES.format(
            app_port=app_port, documented_port=documented_port, before_port=before_port,
            documented=DOCUMENTED, before=BEFORE), documented_port, tool_env())
        body = proxied_get(documented_port, "127.0.0.3", headers=FORGED)
        assert body.decode().split("|")[1:] == ["127.0.0.3", "http", "shop.example"]
        # nginx passes this Forwarded and X-Forwarded-Host on untouched; only
        # X-Forwarded-For/-Proto are believed (nginx overwrites them).
        body = proxied_get(before_port, "127.0.0.4", headers=FORGED)
        assert body.decode().split("|")[1:] == ["127.0.0.4", "http", "shop.example"]
    finally:
        stop_nginx(nginx)
        if isinstance(proc, CLI):
            assert proc.stop() == 0, proc.err
        else:
            proc.terminate()
            proc.communicate(timeout=20)


FORWARDED_SITE = """
    access_log off;
    server {{
        listen 127.0.0.1:{http_port};
        location / {{
            proxy_pass http://127.0.0.1:{app_port};
            proxy_set_header Host $host;
            proxy_set_header Forwarded "for=$remote_addr;proto=$scheme;host=$host";
        }}
    }}
"""


def test_behind_a_proxy_that_sets_forwarded(tmp_path: Path) -> None:
    """--proxy-headers-source forwarded: nginx sets Forwarded and passes a client's
    X-Forwarded-* on, which must count for nothing."""
    app_port, http_port = free_port(), free_port()
    cli = CLI(tmp_path, "cli_app:app", "--port", str(app_port), "--proxy-headers",
              "--proxy-headers-source", "forwarded")
    nginx = None
    try:
        cli.wait_http(app_port)
        nginx = start_nginx(tmp_path, FORWARDED_SITE.format(
            app_port=app_port, http_port=http_port), http_port, tool_env())
        body = proxied_get(http_port, "127.0.0.5", headers=FORGED)
        assert body.decode().split("|")[1:4] == ["127.0.0.5", "http", "shop.example"]
    finally:
        stop_nginx(nginx)
        assert cli.stop() == 0, cli.err


HOST_SITES = """
    access_log off;
    upstream plain {{
        server 127.0.0.1:{plain_port};
    }}
    upstream with_host {{
        server 127.0.0.1:{host_port};
    }}
    server {{
        listen 127.0.0.1:{ports[0]};
        location / {{
            proxy_pass http://plain;{standard}
        }}
    }}
    server {{
        listen 127.0.0.1:{ports[1]};
        location / {{
            proxy_pass http://with_host;{standard}
        }}
    }}
    server {{
        listen 127.0.0.1:{ports[2]};
        location / {{
            proxy_pass http://plain;{sets_host}
        }}
    }}
    server {{
        listen 127.0.0.1:{ports[3]};
        location / {{
            proxy_pass http://with_host;{sets_host}
        }}
    }}
"""
# A block that hands the upstream an internal Host and the client's in X-Forwarded-Host.
SETS_HOST = """
            proxy_set_header Host app.internal;
            proxy_set_header X-Forwarded-For $remote_addr;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Forwarded-Host $host;"""


@pytest.mark.parametrize("app", ["cli_app:app", "asgi_echo:app"])
def test_x_forwarded_host_is_believed_only_with_proxy_headers_host(
        tmp_path: Path, app: str) -> None:
    """nginx's usual block (`BEFORE`: Host, X-Forwarded-For, X-Forwarded-Proto, nothing
    cleared) passes a client's X-Forwarded-Host on: with --proxy-headers alone the app's Host
    stays nginx's `Host $host`; on c32a341 and a083761 it was the client's evil.example.
    --proxy-headers-host believes X-Forwarded-Host, which is right only behind a proxy that
    sets it (`SETS_HOST`), and lets a client's through the usual block (why it is off)."""
    (tmp_path / "asgi_echo.py").write_text(ASGI_ECHO)
    plain_port, host_port = free_port(), free_port()
    ports = [free_port() for _ in range(4)]
    plain = CLI(tmp_path, app, "--port", str(plain_port), "--proxy-headers")
    with_host = CLI(tmp_path, app, "--port", str(host_port), "--proxy-headers",
                    "--proxy-headers-host")
    nginx = None
    try:
        plain.wait_http(plain_port)
        with_host.wait_http(host_port)
        nginx = start_nginx(tmp_path, HOST_SITES.format(
            plain_port=plain_port, host_port=host_port, ports=ports, standard=BEFORE,
            sets_host=SETS_HOST), ports[0], tool_env())

        def seen(port: int) -> list[str]:
            return proxied_get(port, "127.0.0.6", headers=FORGED).decode().split("|")[1:4]

        assert seen(ports[0]) == ["127.0.0.6", "http", "shop.example"]  # the default
        assert seen(ports[1]) == ["127.0.0.6", "http", "evil.example"]  # believed: forged
        assert seen(ports[2]) == ["127.0.0.6", "http", "app.internal"]  # not believed
        assert seen(ports[3]) == ["127.0.0.6", "http", "shop.example"]  # nginx's $host
    finally:
        stop_nginx(nginx)
        assert plain.stop() == 0, plain.err
        assert with_host.stop() == 0, with_host.err
