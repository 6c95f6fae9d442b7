"""Shared helpers of the reliability suite: a polled server thread whose app records what it
sees, raw-socket exchanges, and h11 (the reference strict parser) on both sides of the wire."""

from __future__ import annotations

import collections
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import h11
from fuzz.reference import strict_framing
from support.poll_thread import PollThread

import cymongoose._mongoose as cm

Seen = tuple[str, str, bytes]  # method, target (path + "?" + query), body


class Server:
    """A Manager polled in its own thread. The default app answers every request with 200 and
    a body naming what it saw, and records each request under the client's port."""

    def __init__(self, handler: Callable[..., None] | None = None,
                 url: str = "http://127.0.0.1:0", poll_ms: int = 5,
                 **limits: int) -> None:
        self.errors: list[BaseException] = []
        self.seen: dict[int, list[Seen]] = collections.defaultdict(list)
        self._lock = threading.Lock()
        self.mgr = cm.Manager(error_handler=self.errors.append)
        self.listener = self.mgr.listen(url, handler or self.app, **limits)
        self.port: int = self.listener.local_addr[1]
        self._poller = PollThread(self.mgr, poll_ms, "cymongoose-server")

    def __enter__(self) -> Server:
        self._poller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._poller.stop()

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run fn in the poll thread (Manager objects are not thread-safe) and return its
        result."""
        return self._poller.call(fn)

    def connection_count(self) -> int:
        return self.call(lambda: len(self.mgr.connections)) - 1  # minus the listener

    def record(self, conn: Any, msg: Any) -> Seen:
        target = msg.uri + ("?" + msg.query if msg.query else "")
        item = (msg.method, target, msg.body_bytes)
        with self._lock:
            self.seen[conn.remote_addr[1]].append(item)
        return item

    def forget(self, port: int) -> None:
        with self._lock:
            self.seen.pop(port, None)

    def seen_by(self, port: int) -> list[Seen]:
        with self._lock:
            return list(self.seen.get(port, ()))

    def app(self, conn: Any, ev: int, data: Any) -> None:
        if ev != cm.MG_EV_HTTP_MSG:
            return
        method, target, body = self.record(conn, data)
        conn.reply(200, f"{method} {target} {len(body)}".encode())


@dataclass
class Exchange:
    raw: bytes
    closed: bool  # the server closed the connection (EOF or reset)
    reset: bool
    elapsed: float  # from the last byte sent to EOF (or to giving up)
    local_port: int


def exchange(port: int, data: bytes | Iterable[bytes], *, timeout: float = 5.0,
             pause: float = 0.0, until: Callable[[bytes], bool] | None = None,
             grace: float = 0.05, server: Server | None = None,
             on_connect: Callable[[int], None] | None = None) -> Exchange:
    """Send data (pieces `pause` s apart), then read until the server closes, or `timeout`
    passes, or `until(received)` holds and nothing more arrives for `grace` s. With
    `server`, forget what its app recorded under our port before (ports get reused)."""
    pieces = [data] if isinstance(data, bytes) else list(data)
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    local_port = sock.getsockname()[1]
    if server is not None:
        server.forget(local_port)
    if on_connect is not None:
        on_connect(local_port)
    raw = b""
    closed = reset = False
    try:
        for i, piece in enumerate(pieces):
            if i and pause:
                time.sleep(pause)
            try:
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                closed = reset = True
                break
        start = time.monotonic()
        deadline = start + timeout
        while not closed:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            satisfied = until is not None and until(raw)
            sock.settimeout(min(left, grace) if satisfied else left)
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            except ConnectionResetError:
                closed = reset = True
                break
            if not chunk:
                closed = True
                break
            raw += chunk
        return Exchange(raw, closed, reset, time.monotonic() - start, local_port)
    finally:
        sock.close()


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes
    interim: list[int] = field(default_factory=list)


@dataclass
class Parsed:
    responses: list[Response]
    error: str | None  # our output is not valid HTTP/1.1 framing for these requests
    leftover: bytes  # bytes after the last response a strict client could read


def parse_responses(raw: bytes, methods: list[str], closed: bool) -> Parsed:
    """Read our bytes as h11 would, one response per request method given (GET past the
    end of the list)."""
    conn = h11.Connection(our_role=h11.CLIENT)
    conn.receive_data(raw)
    if closed:
        conn.receive_data(b"")
    out: list[Response] = []
    i = 0
    try:
        while True:
            method = methods[i] if i < len(methods) else "GET"
            conn.send(h11.Request(method=method, target="/", headers=[("Host", "x")]))
            conn.send(h11.EndOfMessage())
            interim: list[int] = []
            current: Response | None = None
            while True:
                ev = conn.next_event()
                if ev is h11.NEED_DATA or isinstance(ev, h11.ConnectionClosed):
                    return Parsed(out, None, conn.trailing_data[0])
                if ev is h11.PAUSED:  # a 2xx to CONNECT: the rest is a tunnel
                    if current is not None:
                        out.append(current)
                    return Parsed(out, None, b"")
                if isinstance(ev, h11.InformationalResponse):
                    interim.append(ev.status_code)
                elif isinstance(ev, h11.Response):
                    current = Response(ev.status_code, {k.decode().lower(): v.decode("latin-1")
                                                        for k, v in ev.headers}, b"", interim)
                elif isinstance(ev, h11.Data):
                    assert current is not None
                    current.body += bytes(ev.data)
                elif isinstance(ev, h11.EndOfMessage):
                    assert current is not None
                    out.append(current)
                    break
            i += 1
            if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
                conn.start_next_cycle()
                if not conn.trailing_data[0]:
                    return Parsed(out, None, b"")
            else:
                return Parsed(out, None, conn.trailing_data[0])
    except (h11.RemoteProtocolError, h11.LocalProtocolError) as exc:
        return Parsed(out, f"{type(exc).__name__}: {exc}", b"")


@dataclass
class Oracle:
    requests: list[Seen]
    verdict: str  # "ok" (whole input is complete requests), "reject", "incomplete"
    reason: str = ""


H11_DEFAULT_HEAD_LIMIT = 16 * 1024  # h11.Connection's own max_incomplete_event_size


def h11_oracle(data: bytes) -> Oracle:
    """What a strict server-side parser makes of data: the complete requests it reads before
    it stops, and why it stops (fuzz.reference.strict_framing, with h11's own head limit)."""
    framing = strict_framing(data, head_limit=H11_DEFAULT_HEAD_LIMIT)
    requests: list[Seen] = []
    for r in framing.requests:
        target = r.target.decode("latin-1")
        if target.endswith("?") and target.count("?") == 1:
            target = target[:-1]  # HttpMessage cannot tell "/a?" from "/a"
        requests.append((r.method.decode(), target, r.body))
    return Oracle(requests, framing.stopped, framing.why)


def rss_kib(pid: int | None = None) -> int:
    with open(f"/proc/{pid or 'self'}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def fd_count(pid: int | None = None) -> int:
    return len(os.listdir(f"/proc/{pid or 'self'}/fd"))


def get(port: int, path: str = "/", timeout: float = 5.0) -> tuple[int, bytes]:
    """One fresh-connection GET; the canary that the server still serves everyone else."""
    res = exchange(port, f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode(),
                   timeout=timeout)
    parsed = parse_responses(res.raw, ["GET"], res.closed)
    assert parsed.error is None and parsed.responses, (res, parsed)
    return parsed.responses[0].status, parsed.responses[0].body


class ServerProcess:
    """tests/reliability/server_main.py in a child process (RSS and fds of the server alone)."""

    def __init__(self, app: str = "ok", nofile: tuple[int, int] | None = None,
                 capture_stderr: bool = False, **limits: int) -> None:
        """nofile: the (soft, hard) open-file limits the server starts with; the soft limit
        it serves with (after listen() raised it) is in self.nofile_soft. capture_stderr:
        keep its log output for self.stderr_text() instead of passing it through."""
        import json
        import subprocess
        import tempfile

        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "server_main.py")
        args = [sys.executable, script, "--app", app, "--limits", json.dumps(limits)]
        if nofile is not None:
            args += ["--nofile", f"{nofile[0]},{nofile[1]}"]
        # A file, not a pipe: a server that logs a lot must never block on a full pipe.
        self._stderr = tempfile.TemporaryFile() if capture_stderr else None
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self._stderr,
                                     text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.strip():
            self.proc.kill()
            raise RuntimeError("the server process did not start")
        port, soft = line.split()
        self.port = int(port)
        self.nofile_soft = int(soft)
        self.pid = self.proc.pid
        self.summary: dict[str, int] = {}

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> dict[str, int]:
        import json
        import signal
        import subprocess

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                out, _ = self.proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                out, _ = self.proc.communicate()
            if out.strip():
                self.summary = json.loads(out.strip().splitlines()[-1])
        return self.summary

    def cpu_seconds(self) -> float:
        """User plus system CPU time the server process has used so far."""
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stderr_text(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", "replace")


def read_response(sock: socket.socket, buf: bytearray) -> tuple[int, bytes, bool]:
    """A minimal, fast reader of one Content-Length-framed response from sock (bytes already
    received in buf are used first and the rest is left there). Returns (status, body,
    server_closes)."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before a response head")
        buf += chunk
    head, _, _ = bytes(buf).partition(b"\r\n\r\n")
    del buf[:len(head) + 4]
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length = 0
    closes = False
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"connection" and b"close" in value.lower():
            closes = True
    while len(buf) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed inside a response body")
        buf += chunk
    body = bytes(buf[:length])
    del buf[:length]
    return status, body, closes
