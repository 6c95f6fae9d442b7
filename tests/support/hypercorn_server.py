"""hypercorn in a subprocess: a real server that speaks HTTP/1.1, h2c and WebSocket on one
port (tests/support/h2c_app.py by default)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from .http_client import HttpConnection
from .ports import HOST, bound_listener
from .processes import ServerProcess, wait_serving
from .subprocess_env import child_env

TESTS_DIR = Path(__file__).resolve().parent.parent


class HypercornServer(ServerProcess):
    """`hypercorn app` with one worker on a socket this process bound (handed over as
    `fd://N`, so the port is never raced); ready once GET /_seen answers 200."""

    def __init__(self, app: str = "support.h2c_app:app", startup_timeout: float = 20.0) -> None:
        super().__init__()
        self.app = app
        self.startup_timeout = startup_timeout

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self) -> HypercornServer:
        listener = bound_listener()
        self.port = int(listener.getsockname()[1])
        cmd = [sys.executable, "-m", "hypercorn", "--workers", "1", "--bind",
               f"fd://{listener.fileno()}", "--log-level", "warning", self.app]
        try:
            self.proc = subprocess.Popen(cmd, env=child_env(pythonpath=str(TESTS_DIR)),
                                         cwd=TESTS_DIR, stdin=subprocess.DEVNULL,
                                         stdout=self._log, stderr=self._log,
                                         pass_fds=(listener.fileno(),))
        finally:
            listener.close()
        wait_serving(self.proc, "hypercorn", lambda: self.seen() is not None,
                     self.startup_timeout, self.log)
        return self

    def seen(self) -> list[dict[str, Any]]:
        """The requests the app recorded (h2c_app.py), asked over HTTP/1.1."""
        with HttpConnection(self.port, timeout=5.0) as c:
            resp = c.request("GET", "/_seen")
            assert resp.status == 200, resp
            result: list[dict[str, Any]] = json.loads(resp.body)
            return result
