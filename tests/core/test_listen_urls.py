"""Manager.listen()/connect() URLs (issue 33, item 20): Mongoose reads any scheme it does not
know as TCP and a missing port as the scheme's default, so "htp://" became a raw listener
and "http://127.0.0.1" bound port 80. Both are refused with the schemes accepted; what
0.2.x documented (tcp, udp, http, https, ws, wss) still works, with a real client."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from support.ports import HOST

from cymongoose import MG_EV_HTTP_MSG, Connection, Manager

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("url,words", [
    ("htp://127.0.0.1:9000", "unknown scheme 'htp://': use one of tcp://, udp://, http://"),
    ("http//127.0.0.1:9000", "has no scheme"),
    ("HTTP://127.0.0.1:0", "write the scheme in lower case (http://)"),
    ("http://127.0.0.1", "has no port"),
    ("https://localhost/", "has no port"),
    ("ws://[::1]", "has no port"),
    ("http://127.0.0.1:", "has no port"),
])
def test_listen_refuses_a_url_mongoose_would_misread(url: str, words: str) -> None:
    with Manager() as mgr:
        with pytest.raises(ValueError, match=r"^url ") as info:
            mgr.listen(url)
        assert words in str(info.value)
        assert mgr.connections == ()  # nothing was opened


def test_connect_refuses_an_unknown_scheme_but_keeps_default_ports() -> None:
    with Manager() as mgr:
        with pytest.raises(ValueError, match="unknown scheme 'htp://'"):
            mgr.connect("htp://127.0.0.1:9000")
        # A client may leave the port to the scheme: http://host means port 80.
        conn = mgr.connect("http://127.0.0.1")
        conn.close()


@pytest.mark.parametrize("scheme", ["http", "ws", "tcp"])
def test_the_documented_schemes_still_serve_a_real_client(scheme: str) -> None:
    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            conn.reply(200, b"ok")

    with Manager(handler) as mgr:
        port = mgr.listen(f"{scheme}://{HOST}:0").local_addr[1]
        with socket.create_connection((HOST, port), timeout=5) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            got = b""
            for _ in range(200):
                mgr.poll(10)
                s.setblocking(False)
                try:
                    got += s.recv(4096)
                except BlockingIOError:
                    pass
                if scheme == "tcp" or got.endswith(b"ok"):
                    break
        if scheme != "tcp":  # a TCP listener does not parse HTTP
            assert got.startswith(b"HTTP/1.1 200") and got.endswith(b"ok"), got


def test_a_bare_host_and_port_is_still_a_tcp_listener() -> None:
    # 0.2.x took "host:port" as TCP (Mongoose's reading); drop-in compatibility keeps it.
    with Manager() as mgr:
        listener = mgr.listen(f"{HOST}:0")
        port = listener.local_addr[1]
        assert port > 0 and listener.is_listening
        with socket.create_connection((HOST, port), timeout=5):
            pass
