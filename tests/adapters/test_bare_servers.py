"""The servers of bare/ used directly, as the command line uses them: RawServer serves a raw
handler and stops at once on SIGTERM, keep-alive connections or not; ProxyServer proxies
its routes, answers 404 beside them, and on stop() lets a proxied request in flight finish
before it closes."""

from __future__ import annotations

import select
import signal
import socket
import subprocess
import sys
import threading
from typing import Any

import pytest
from support.http_client import HttpConnection, get, recv_head
from support.ports import HOST, bound_listener

from cymongoose.bare import ProxyServer
from cymongoose.config import Config

pytestmark = pytest.mark.timeout(60)

WAIT_S = 20.0  # bound of every wait below; the machine may be busy

RAW_SERVER = '''
import socket
from cymongoose import MG_EV_HTTP_MSG
from cymongoose.bare import RawServer
from cymongoose.config import Config

def handler(conn, ev, data):
    if ev == MG_EV_HTTP_MSG:
        conn.reply(200, "raw\\n")

sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen(16)
port = sock.getsockname()[1]
server = RawServer(handler, config=Config())
server.listen_socket(sock)
sock.close()  # the server listens on its own duplicate
server.on_ready = lambda: print("ready", port, flush=True)
server.run()
print("stopped", flush=True)
'''


def _line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    readable, _, _ = select.select([proc.stdout], [], [], WAIT_S)
    assert readable, f"no line from the server in {WAIT_S} s"
    return proc.stdout.readline().strip()


def test_raw_server_serves_and_stops_at_once_on_sigterm() -> None:
    proc = subprocess.Popen([sys.executable, "-c", RAW_SERVER], stdout=subprocess.PIPE,
                            text=True)
    try:
        word, port = _line(proc).split()
        assert word == "ready"
        with HttpConnection(int(port), timeout=WAIT_S) as kept:
            response = kept.request("GET", "/")
            assert (response.status, response.body) == (200, b"raw\n")
            assert kept.keep_alive
            # A keep-alive connection stays open: a raw server has nothing to drain.
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(WAIT_S) == 0
        assert _line(proc) == "stopped"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        assert proc.stdout is not None
        proc.stdout.close()


class _SlowUpstream:
    """One HTTP/1.1 upstream connection on a thread: it reads a request, sets `got`, and
    answers only once `release` is set."""

    def __init__(self) -> None:
        self.sock = bound_listener()
        self.port = int(self.sock.getsockname()[1])
        self.got = threading.Event()
        self.release = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(WAIT_S)
        conn, _ = self.sock.accept()
        with conn:
            conn.settimeout(WAIT_S)
            if recv_head(conn) is None:
                return
            self.got.set()
            if self.release.wait(WAIT_S):
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nslow\n")

    def close(self) -> None:
        self.release.set()
        self._thread.join(WAIT_S)
        self.sock.close()


def test_proxy_server_proxies_answers_404_and_drains_on_stop() -> None:
    up = _SlowUpstream()
    sock = bound_listener()
    port = int(sock.getsockname()[1])
    server = ProxyServer(Config(proxy=(f"/slow=http://{HOST}:{up.port}",),
                                graceful_timeout=WAIT_S))
    ready, stopping = threading.Event(), threading.Event()
    server.on_ready = ready.set
    server.on_stop = stopping.set
    server.listen_socket(sock)
    sock.close()  # the server listens on its own duplicate: once it stops, clients are refused
    runner = threading.Thread(target=server.run, name="proxy-server")
    runner.start()
    proxied: list[Any] = []
    try:
        assert ready.wait(WAIT_S)
        missing = get(port, "/elsewhere", timeout=WAIT_S)
        assert missing.status == 404
        assert missing.body == b"Not Found: no proxy route takes this path\n"

        client = threading.Thread(
            target=lambda: proxied.append(get(port, "/slow/x", timeout=WAIT_S)))
        client.start()
        assert up.got.wait(WAIT_S), "the upstream never got the proxied request"
        server.stop()
        assert stopping.wait(WAIT_S)  # draining now, the request still at the upstream
        assert runner.is_alive()
        up.release.set()
        client.join(WAIT_S)
        runner.join(WAIT_S)
        assert not runner.is_alive(), "run() did not return after the drain"
        assert [(r.status, r.body) for r in proxied] == [(200, b"slow\n")]
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((HOST, port), timeout=WAIT_S).close()
    finally:
        server.stop()
        runner.join(WAIT_S)
        up.close()
