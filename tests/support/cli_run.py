"""The `cymongoose` command line in a subprocess, for end-to-end tests: start it, wait until
it answers, signal it, and a bounded load client that tells failed requests from retried
ones."""

from __future__ import annotations

import http.client
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .process_start import start_bound
from .subprocess_env import child_env
from .waiting import wait_for

HELLO_APP = '''\
import os


def app(environ, start_response):
    body = "|".join([str(os.getpid()), environ["REMOTE_ADDR"], environ["wsgi.url_scheme"],
                     environ.get("HTTP_HOST", ""), environ["SCRIPT_NAME"],
                     environ["PATH_INFO"]]).encode()
    start_response("200 OK", [("Content-Type", "text/plain"),
                              ("Content-Length", str(len(body)))])
    return [body]


def slow(environ, start_response):
    import time
    time.sleep(float(environ["QUERY_STRING"] or "0.2"))
    body = b"x" * 100_000
    start_response("200 OK", [("Content-Type", "text/plain"),
                              ("Content-Length", str(len(body)))])
    return [body]


def mortal(environ, start_response):
    if environ["PATH_INFO"] == "/die":
        os._exit(3)  # a crash the app brings on itself, mid-life
    if environ["PATH_INFO"] == "/hang":
        import time
        open("hang.in", "w").close()  # the test waits for this: the app has the request
        time.sleep(120)  # a request that never finishes in time
    return app(environ, start_response)


def handler(conn, ev, data):
    from cymongoose import MG_EV_HTTP_MSG
    if ev == MG_EV_HTTP_MSG:
        conn.reply(200, b"raw:" + data.uri.encode())


def broken_factory():
    raise RuntimeError("factory failed")


def make_app():
    return app
'''


def cli_env(*, keep_asan: bool = False, **extra: str) -> dict[str, str]:
    """This environment without variables that would change the command's behaviour.
    `keep_asan`: keep the AddressSanitizer preload, for a command a test under
    `make asan-test` starts (an ASan build of the extension refuses to load without it)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("CYMONGOOSE_") and k not in ("PYTHONPATH",)}
    if not keep_asan:
        env.pop("LD_PRELOAD", None)
        env.pop("ASAN_OPTIONS", None)
    env.update(extra)
    return env


class CLI:
    """`python -m cymongoose ARGS` running in `cwd` (where `cli_app.py` is written)."""

    def __init__(self, cwd: Path, *args: str, env: dict[str, str] | None = None,
                 pass_fds: tuple[int, ...] = ()) -> None:
        (cwd / "cli_app.py").write_text(HELLO_APP)
        self.cwd = cwd
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cymongoose", *args], cwd=cwd, env=env or cli_env(),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, pass_fds=pass_fds)
        self.out = ""
        self.err = ""
        _started.add(self)

    def wait_http(self, port: int, path: str = "/", timeout: float = 20.0) -> None:
        """Until a GET on `port` is answered; fails with stderr if the process ends first.
        `timeout` is stretched where a process starts slowly (support.process_start)."""
        def answered() -> bool:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", path)
                c.getresponse().read()
                c.close()
                return True
            except OSError:
                if self.proc.poll() is not None:
                    raise AssertionError("exited") from None
                return False

        try:
            wait_for(answered, start_bound(timeout), f"a GET on {port}", interval=0.05)
        except AssertionError:
            self.stop()
            raise AssertionError(f"server did not come up: {self.err}") from None

    def log_until(self, pattern: str, timeout: float = 20.0) -> re.Match[str]:
        """The first stderr line matching `pattern`, read as the process writes it (the
        lines read are kept in `err`)."""
        assert self.proc.stderr is not None
        deadline = time.monotonic() + start_bound(timeout)
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.err += line
            found = re.search(pattern, line)
            if found:
                return found
        raise AssertionError(f"no line matching {pattern!r} in: {self.err}")

    def send(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        _started.discard(self)
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            self.out, self.err = self.out + out, self.err + err
            raise AssertionError(f"did not stop within {timeout} s: {self.err}") from None
        # After what log_until() read already.
        self.out, self.err = self.out + out, self.err + err
        return self.proc.returncode

    def worker_pids(self) -> list[int]:
        """The supervisor's worker processes (children running with --worker-socket)."""
        # Without the AddressSanitizer preload of make asan-test: pgrep hangs under it.
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True,
                             text=True, env=cli_env()).stdout
        return [int(p) for p in out.split()]


# Every CLI not stopped yet. A test that fails (or that pytest-timeout ends) before its
# stop() would otherwise leave its server running after the suite: end_leftovers() runs when
# the suite ends (tests/conftest.py).
_started: set[CLI] = set()


def end_leftovers() -> None:
    """Stop every CLI a test started and did not stop: SIGTERM, then SIGKILL after 10 s."""
    while _started:
        cli = _started.pop()
        try:
            cli.stop(timeout=10)  # or, if it ended by itself, read the rest of its pipes
        except AssertionError:
            pass  # it did not stop and was killed; the test's own failure is the news


def run_cli(cwd: Path, *args: str, timeout: float = 30.0,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    (cwd / "cli_app.py").write_text(HELLO_APP)
    return subprocess.run([sys.executable, "-m", "cymongoose", *args], cwd=cwd,
                          env=env or cli_env(), capture_output=True, text=True,
                          timeout=timeout)


@dataclass
class LoadResult:
    ok: int = 0
    failed: list[str] = field(default_factory=list)  # no status line on a fresh connection
    partial: list[str] = field(default_factory=list)  # a status line, then not all of it
    retried: int = 0  # reused connection closed before a status line: retried on a new one
    pids: set[str] = field(default_factory=set)


class LoadClient:
    """`threads` clients sending keep-alive GETs to `path` on `host` until stop() or
    `max_requests` each, `pace` seconds apart; `pids` gets the first `fields` of each
    answer (HELLO_APP's: the pid, then the client address the server saw). A request that
    fails on a reused connection before any status line is retried once on a fresh
    connection (as browsers and HTTP libraries do); any other failure counts."""

    def __init__(self, port: int, path: str = "/", threads: int = 4,
                 max_requests: int = 5000,
                 check: Callable[[bytes], bool] = lambda body: True, *,
                 host: str = "127.0.0.1", pace: float = 0.0, fields: int = 1) -> None:
        self.host = host
        self._fields = fields  # of HELLO_APP's body, kept in `pids` per answer
        self.pace = pace  # seconds each thread waits between its requests (0: none)
        self.port = port
        self.path = path
        self.result = LoadResult()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._max = max_requests
        self._check = check
        self._threads = [threading.Thread(target=self._run, daemon=True)
                         for _ in range(threads)]

    def __enter__(self) -> LoadClient:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> LoadResult:
        self._stop.set()
        for t in self._threads:
            t.join(30)
        return self.result

    def _run(self) -> None:
        conn: http.client.HTTPConnection | None = None
        used = False
        for _ in range(self._max):
            if self._stop.is_set() or (self.pace and self._stop.wait(self.pace)):
                break
            for attempt in (0, 1):
                if conn is None:
                    conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
                    used = False
                got_status = False
                try:
                    conn.request("GET", self.path)
                    resp = conn.getresponse()
                    got_status = True
                    body = resp.read()
                    with self._lock:
                        if resp.status == 200 and self._check(body):
                            self.result.ok += 1
                            self.result.pids.add(
                                "|".join(body.decode().split("|")[:self._fields]))
                        else:
                            self.result.failed.append(f"{resp.status} {body[:80]!r}")
                    used = True
                    if resp.will_close:
                        conn.close()
                        conn = None
                    break
                except (OSError, http.client.HTTPException) as exc:
                    conn.close()
                    conn = None
                    with self._lock:
                        if got_status:
                            self.result.partial.append(repr(exc))
                            break
                        if used and attempt == 0:
                            self.result.retried += 1
                            continue
                        if self._stop.is_set():  # refused after the server stopped
                            break
                        self.result.failed.append(repr(exc))
                    break
        if conn is not None:
            conn.close()


def pids_served(port: int, want: int, timeout: float = 10.0) -> set[str]:
    """The worker pids (HELLO_APP's first field) that answered GETs on fresh connections,
    until `want` of them did or `timeout` seconds passed."""
    from .http_client import get

    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    while len(seen) < want and time.monotonic() < deadline:
        seen.add(get(port, "/").body.split(b"|")[0].decode())
    return seen


def unix_get(path: str, target: str = "/", headers: str = "") -> bytes:
    """One GET over a Unix socket; the raw response."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(5)
        s.connect(path)
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: unix\r\n{headers}Connection: close\r\n\r\n"
                  .encode())
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


def proxied_get(port: int, source: str, tls: bool = False, headers: str = "") -> bytes:
    """GET /via from the loopback address `source` (any of 127/8), over TLS without
    verification if asked; the body of the 200 answer."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=5,
                                   source_address=(source, 0))
    sock: socket.socket = raw
    if tls:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        sock = ctx.wrap_socket(raw)
    with sock:
        sock.sendall(f"GET /via HTTP/1.1\r\nHost: shop.example\r\n{headers}"
                     "Connection: close\r\n\r\n".encode())
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
    head, _, body = out.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), out[:300]
    return body


def unix_answers(path: str) -> bool:
    try:
        return unix_get(path).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def port_open(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        time.sleep(0.05)
        return False


def self_signed_cert(tmp: Path, cn: str = "localhost", *extra: str, stem: str = "") -> None:
    """A throw-away P-256 certificate and key: `{stem}cert.pem`, `{stem}key.pem` in `tmp`
    (valid for 127.0.0.1 when `cn` is localhost; `extra`: more `openssl req` arguments)."""
    san = ["-addext", "subjectAltName=IP:127.0.0.1"] if cn == "localhost" else []
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", f"{stem}key.pem",
                    "-out", f"{stem}cert.pem", "-subj", f"/CN={cn}", "-days", "2", *san,
                    *extra], cwd=tmp, env=child_env(), check=True, capture_output=True)


def https_raw_get(port: int, ctx: ssl.SSLContext, target: str) -> bytes | None:
    """One HTTPS GET with `Connection: close`, the whole answer as bytes; None when the
    connection or the handshake fails."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
                ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            s.sendall(f"GET {target} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
                      .encode())
            out = b""
            while chunk := s.recv(65536):
                out += chunk
            return out
    except OSError:  # ssl.SSLError included: the handshake was refused
        return None
