"""A real HTTP backend in a process of its own, which a test can stop and start again on the
same port, as a deploy restarts a service: the standard library's threading HTTP server,
HTTP/1.1 with keep-alive (so a proxy's pooled connections die with it), optionally over TLS
with a given certificate. Every answer is 200 `backend <path>`; a path holding `/slow`
waits 0.2 s first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .cli_run import cli_env, port_open
from .ports import HOST, free_port
from .processes import stop_process
from .waiting import wait_for

_SCRIPT = r"""
import http.server, ssl, sys, time

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        if "/slow" in self.path:
            time.sleep(0.2)
        body = f"backend {self.path}\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), Handler)
if len(sys.argv) > 3:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[3], sys.argv[4])
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
server.serve_forever()
"""


class BackendProcess:
    """`start()` runs the backend on `port` (a free one by default) and returns once it
    accepts; `stop()` kills it (SIGTERM, then SIGKILL); both may be called again."""

    def __init__(self, port: int = 0, cert: Path | None = None,
                 key: Path | None = None) -> None:
        self.port = port or free_port()
        self._tls = [str(cert), str(key)] if cert is not None and key is not None else []
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self._tls else 'http'}://{HOST}:{self.port}"

    def start(self, timeout: float = 20.0) -> BackendProcess:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _SCRIPT, HOST, str(self.port), *self._tls],
            env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        proc = self._proc

        def listening() -> bool:
            if proc.poll() is not None:
                raise AssertionError("the backend exited")
            return port_open(self.port)

        try:
            wait_for(listening, timeout, f"the backend to listen on {self.port}")
        except AssertionError:
            self.stop()
            raise AssertionError(f"the backend did not listen on {self.port}") from None
        return self

    def stop(self) -> None:
        stop_process(self._proc)
        self._proc = None
