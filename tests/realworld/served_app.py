"""One of the realworld apps served by the `cymongoose` command line in a subprocess, on a
listener this process bound and hands down (--fd: no port to race for), its output in a
temporary file (log()); ready once GET /json answers 200."""

from __future__ import annotations

import http.client
import subprocess
import sys
from pathlib import Path

from support.cli_run import cli_env
from support.ports import bound_listener
from support.processes import ServerProcess, wait_serving

TESTS = Path(__file__).resolve().parents[1]
# name -> (the app as the command line names it, its interface)
APPS = {
    "flask": ("realworld.apps.flask_psycopg:app", "wsgi"),
    "django-wsgi": ("realworld.apps.django_world.wsgi:application", "wsgi"),
    "fastapi": ("realworld.apps.fastapi_asyncpg:app", "asgi"),
    "django-asgi": ("realworld.apps.django_world.asgi:application", "asgi"),
}
START_TIMEOUT_S = 60.0


class ServedApp(ServerProcess):
    def __init__(self, name: str, dsn: str, *args: str) -> None:
        super().__init__()
        self.name = name
        self.dsn = dsn
        self.args = args  # more command-line options

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ServedApp:
        spec, interface = APPS[self.name]
        with bound_listener() as listener:
            self.port = listener.getsockname()[1]
            fd = listener.fileno()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "cymongoose", spec, "--interface", interface,
                 "--fd", str(fd), *self.args],
                cwd=TESTS, env=cli_env(REALWORLD_DSN=self.dsn, PYTHONPATH=str(TESTS)),
                stdout=self._log, stderr=subprocess.STDOUT, pass_fds=(fd,))
        wait_serving(self.proc, f"{self.name} on cymongoose", self._answers_json,
                     START_TIMEOUT_S, self.log)
        return self

    def _answers_json(self) -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            conn.request("GET", "/json")
            return conn.getresponse().status == 200
        finally:
            conn.close()
