"""gunicorn (gthread workers) in a subprocess: the reference WSGI server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .http_client import HttpConnection
from .ports import bound_listener
from .processes import ServerProcess, wait_serving
from .subprocess_env import child_env

TESTS_DIR = Path(__file__).resolve().parent.parent


class GunicornServer(ServerProcess):
    """`gunicorn -k gthread -w 1 --threads N app` on a socket this process bound (handed over
    as `fd://N`, so the port is never raced). Ready once a request to `ready_path` succeeds.
    One worker process, so state an app keeps in module globals is shared by all requests."""

    def __init__(self, app: str, *, threads: int = 8, root_path: str = "",
                 ready_path: str = "/_ctl/ping", startup_timeout: float = 20.0,
                 options: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.app = app
        self.options = options  # more command-line options (e.g. --header-map dangerous)
        self.threads = threads
        self.root_path = root_path
        self.ready_path = ready_path
        self.startup_timeout = startup_timeout

    def start(self) -> GunicornServer:
        listener = bound_listener()
        self.port = int(listener.getsockname()[1])
        env = child_env(pythonpath=str(TESTS_DIR))
        if self.root_path:
            env["SCRIPT_NAME"] = self.root_path
        cmd = [
            sys.executable, "-m", "gunicorn", "--worker-class", "gthread", "--workers", "1",
            "--threads", str(self.threads), "--bind", f"fd://{listener.fileno()}",
            "--keep-alive", "10", "--graceful-timeout", "2", "--timeout", "120",
            "--log-level", "warning", *self.options, self.app,
        ]
        try:
            self.proc = subprocess.Popen(cmd, env=env, cwd=TESTS_DIR, stdin=subprocess.DEVNULL,
                                         stdout=self._log, stderr=self._log,
                                         pass_fds=(listener.fileno(),))
        finally:
            listener.close()
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        assert self.proc is not None

        def ready() -> bool:
            with HttpConnection(self.port, timeout=2.0) as c:
                target = (self.root_path or "") + self.ready_path
                return c.request("GET", target).status == 200

        wait_serving(self.proc, "gunicorn", ready, self.startup_timeout, self.log)

    def worker_pids(self) -> list[int]:
        assert self.proc is not None
        path = f"/proc/{self.proc.pid}/task/{self.proc.pid}/children"
        return [int(p) for p in Path(path).read_text().split()]

