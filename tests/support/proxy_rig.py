"""The reverse proxy's test rig: upstream servers that record what reaches them (our own
Manager on a thread, or a raw socket that answers whatever bytes a test wants), and a
proxy (a Manager with a ReverseProxy attached, polled on a thread)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from cymongoose import MG_EV_ACCEPT, MG_EV_HTTP_MSG, Connection, ReverseProxy

from .poll_thread import PollThread
from .ports import HOST, bound_listener

Answer = Callable[[Connection, Any], None]


@dataclass
class Seen:
    """One request as the upstream received it."""

    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        values = [v for k, v in self.headers if k.lower() == name.lower()]
        return ", ".join(values) if values else None


@dataclass
class Upstream:
    """A cymongoose HTTP server on a thread: each request is recorded in `seen`, then
    answered by `answers[path]` (the target before '?'), or 200 "<name> <target>"."""

    name: str = "up"
    answers: dict[str, Answer] = field(default_factory=dict)
    limits: dict[str, Any] = field(default_factory=dict)
    ws_handler: Any = None  # gets every event but MG_EV_HTTP_MSG (WebSocket messages)
    tls: Any = None  # TlsOpts: an HTTPS upstream, reached as https://localhost:PORT
    seen: list[Seen] = field(default_factory=list)
    accepted: int = 0
    port: int = 0
    thread: PollThread | None = None

    def start(self) -> Upstream:
        from cymongoose import Manager

        self.thread = PollThread(Manager(self._handle), poll_ms=5, name=f"upstream-{self.name}")
        scheme = "https" if self.tls is not None else "http"
        conn = self.thread.manager.listen(f"{scheme}://{HOST}:{self.port}", self._handle,
                                          **self.limits)
        self.port = int(conn.local_addr[1])
        self.thread.start()
        return self

    @property
    def url(self) -> str:
        if self.tls is not None:
            return f"https://localhost:{self.port}"  # the name its certificate carries
        return f"http://{HOST}:{self.port}"

    def stop(self) -> None:
        if self.thread is not None:
            self.thread.stop()
            self.thread = None

    def _handle(self, conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_ACCEPT:
            self.accepted += 1
            if self.tls is not None:
                conn.tls_init(self.tls)
        if ev != MG_EV_HTTP_MSG:
            if self.ws_handler is not None:
                self.ws_handler(conn, ev, msg)
            return
        target = msg.uri + ("?" + msg.query if msg.query else "")
        headers = [(bytes(k).decode("latin-1"), bytes(v).decode("latin-1"))
                   for k, v in msg.header_views()]
        self.seen.append(Seen(msg.method, target, headers, msg.body_bytes))
        answer = self.answers.get(msg.uri)
        if answer is not None:
            answer(conn, msg)
        else:
            conn.reply(200, f"{self.name} {msg.method} {target}\n",
                       headers={"Content-Type": "text/plain"})


class RawUpstream:
    """A listening socket whose every connection gets `reply(request_bytes)` written back
    once a request head arrived (None: nothing, the connection stays open). Requests are
    kept in `requests`; `close_after` closes the connection after the reply."""

    def __init__(self, reply: Callable[[bytes], bytes | None], close_after: bool = True,
                 read_body: int = 0) -> None:
        self.reply = reply
        self.close_after = close_after
        self.read_body = read_body
        self.requests: list[bytes] = []
        self.accepted = 0
        self.sock = bound_listener()
        self.port = self.sock.getsockname()[1]
        self.url = f"http://{HOST}:{self.port}"
        self._conns: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="raw-upstream", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self.sock.settimeout(0.05)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        data = b""
        try:
            while not self._stop.is_set():
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, _, rest = data.partition(b"\r\n\r\n")
                while len(rest) < self.read_body:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    rest += chunk
                self.requests.append(head + b"\r\n\r\n" + rest)
                data = b""
                out = self.reply(head)
                if out is None:
                    self._stop.wait(30)
                    return
                conn.sendall(out)
                if self.close_after:
                    return
        except OSError:
            return
        finally:
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self.sock.close()
        self._thread.join(5)


class Proxy:
    """A Manager on a thread with `proxy` attached, answering `app` (a raw handler) for the
    paths no route takes."""

    def __init__(self, proxy: ReverseProxy, app: Answer | None = None, tls: Any = None,
                 **limits: Any) -> None:
        from cymongoose import Manager

        self.reverse_proxy = proxy
        self.refusals: list[tuple[int, str, str, int]] = []

        def handler(conn: Connection, ev: int, msg: Any) -> None:
            if ev == MG_EV_ACCEPT and tls is not None:
                conn.tls_init(tls)
            elif ev == MG_EV_HTTP_MSG:
                if app is not None:
                    app(conn, msg)
                else:
                    conn.reply(404, "app 404\n")

        manager = Manager(handler)
        manager.refusal_handler = self._refused
        proxy.attach(manager)
        self.thread = PollThread(manager, poll_ms=5, name="proxy")
        scheme = "https" if tls is not None else "http"
        conn = manager.listen(f"{scheme}://{HOST}:0", handler, **limits)
        self.port = int(conn.local_addr[1])
        self.thread.start()

    def _refused(self, conn: Connection, status: int, reason: str, line: str,
                 size: int) -> None:
        self.refusals.append((status, reason, line, size))

    def stats(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.thread.call(self.reverse_proxy.stats)
        return result

    def stop(self) -> None:
        self.thread.stop()


def started(*upstreams: Upstream) -> Iterator[None]:
    for u in upstreams:
        u.start()
    try:
        yield
    finally:
        for u in upstreams:
            u.stop()
