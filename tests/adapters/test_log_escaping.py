"""No client writes a line of its own into a log: a client sends raw bytes over a socket to a
WSGI server, an ASGI server and a raw Manager, and the access-log file and the error log are
read back. The request line is the one sent (the target undecoded, as nginx and gunicorn log
it), and every field a client chose has its control characters, `"`, `\\` and bytes from 0x80
on escaped as `\\xNN` (nginx's escaping), so each request is one line whose quoted fields a
plain `"[^"]*"` parser splits right; JSON lines are exact JSON.

On c32a341 the access log wrote the percent-decoded path (`%0d%0a` became a line break and
the rest of the target a line of the client's choosing), a Referer's `"` unescaped, and the
error log's "the app failed" line the decoded path as well."""

from __future__ import annotations

import json
import logging
import re
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support.asgi_server import running_asgi_server
from support.poll_thread import ServerThread
from support.routes import read_to_eof
from support.waiting import wait_for
from support.wsgi_server import running_wsgi_server

from cymongoose import MG_EV_HTTP_MSG, Connection
from cymongoose.access_log import DEFAULT_FORMAT, AccessLog, AccessLogWriter

pytestmark = pytest.mark.timeout(60)

# The target decodes to a line break and a whole forged access line after it.
FORGED_TARGET = ("/a%0d%0a203.0.113.9%20-%20-%20[01/Jan/2026:00:00:00%20+0000]%20"
                 "%22GET%20/admin%20HTTP/1.1%22%20200%200?x=%0a")
REQUEST = (f"GET {FORGED_TARGET} HTTP/1.1\r\nHost: shop.example\r\n"
           'Referer: http://r/" 200 "forged\r\n').encode() + \
    b"User-Agent: ua\t\"\\\xc3\xa9\xe2\x80\xa8\x85\r\nConnection: close\r\n\r\n"
# One access line: quoted fields without a `"` inside, as the escaping promises.
ACCESS_LINE = re.compile(r'^(?P<client>\S+) - - \[[^\]]+\] "(?P<request>[^"]*)" (?P<status>\d{3}) '
                         r'(?P<bytes>\S+) "(?P<referer>[^"]*)" "(?P<agent>[^"]*)" '
                         r'(?P<seconds>\d+\.\d{6}) "(?P<path>[^"]*)"$')


def wsgi_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
    if environ["PATH_INFO"].startswith("/boom"):
        raise RuntimeError("the app failed on purpose")
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]


async def asgi_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    if scope["path"].startswith("/boom"):
        raise RuntimeError("the app failed on purpose")
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@contextmanager
def access_file(tmp_path: Path, fmt: str | None) -> Iterator[tuple[AccessLog, Path]]:
    """An AccessLog writing to a file through AccessLogWriter, as --access-log-file does."""
    path = tmp_path / "access.log"
    logger = logging.getLogger(f"cymongoose.access.escaping.{tmp_path.name}")
    writer = AccessLogWriter(str(path), flush_interval=0.05)
    logger.handlers[:] = [writer]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield AccessLog(None if fmt == "json" else fmt, as_json=fmt == "json",
                        logger=logger), path
    finally:
        logger.handlers[:] = []
        writer.close()


@contextmanager
def serving(kind: str, access_log: AccessLog | None = None) -> Iterator[int]:
    kwargs = {"access_log": access_log} if access_log is not None else {}
    if kind == "wsgi":
        with running_wsgi_server(wsgi_app, server_kwargs=kwargs) as run:
            yield run.port
    else:
        with running_asgi_server(asgi_app, server_kwargs=kwargs) as run:
            yield run.port


def exchange(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(payload)
        return read_to_eof(s)


def logged_lines(path: Path, count: int, timeout: float = 10.0) -> list[str]:
    """The file's lines once it holds `count` (lines are written after the response left)."""
    lines: list[str] = []

    def enough() -> bool:
        nonlocal lines
        lines = (path.read_bytes().decode("ascii") if path.exists() else "").splitlines()
        return len(lines) >= count

    wait_for(enough, timeout, lambda: f"{count} lines in {path.name}: {lines}", interval=0.02)
    return lines


@pytest.mark.parametrize("kind", ["wsgi", "asgi"])
def test_a_forged_line_stays_inside_its_request_line(tmp_path: Path, kind: str) -> None:
    with access_file(tmp_path, DEFAULT_FORMAT + ' "%(U)s"') as (log, path):
        with serving(kind, log) as port:
            assert exchange(port, REQUEST).startswith(b"HTTP/1.1 200")
            lines = logged_lines(path, 1)
    assert len(lines) == 1, lines
    m = ACCESS_LINE.match(lines[0])
    assert m, lines[0]
    assert m["request"] == f"GET {FORGED_TARGET} HTTP/1.1"  # as sent, never decoded
    assert m["status"] == "200" and m["client"] == "127.0.0.1"
    assert m["referer"] == r"http://r/\x22 200 \x22forged"
    assert m["agent"] == r"ua\x09\x22\x5c\xc3\xa9\xe2\x80\xa8\x85"
    # The decoded path (%(U)s) is escaped the same way.
    assert m["path"] == (r"/a\x0d\x0a203.0.113.9 - - [01/Jan/2026:00:00:00 +0000] "
                         r"\x22GET /admin HTTP/1.1\x22 200 0")


@pytest.mark.parametrize("kind", ["wsgi", "asgi"])
def test_json_lines_are_exact_json(tmp_path: Path, kind: str) -> None:
    with access_file(tmp_path, "json") as (log, path):
        with serving(kind, log) as port:
            assert exchange(port, REQUEST).startswith(b"HTTP/1.1 200")
            lines = logged_lines(path, 1)
    assert len(lines) == 1, lines
    record = json.loads(lines[0])
    assert record["path"] == FORGED_TARGET.partition("?")[0]  # as sent
    assert record["query"] == "x=%0a"
    assert record["referer"] == 'http://r/" 200 "forged'
    # Header bytes are latin-1 characters, each written as a JSON \u escape.
    assert record["user_agent"] == 'ua\t"\\' + b"\xc3\xa9\xe2\x80\xa8\x85".decode("latin-1")


class _Messages(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.mark.parametrize("kind", ["wsgi", "asgi"])
def test_the_error_log_names_the_request_as_sent_and_escaped(kind: str) -> None:
    errors = logging.getLogger("cymongoose.error")
    capture = _Messages()
    errors.addHandler(capture)
    try:
        with serving(kind) as port:
            answer = exchange(port, b'GET /boom%0d%0aforged"\\?q=%0a HTTP/1.1\r\nHost: h\r\n'
                                    b"Connection: close\r\n\r\n")
            assert answer.startswith(b"HTTP/1.1 500")
            wait_for(lambda: capture.messages, 10, "the error log's message")
    finally:
        errors.removeHandler(capture)
    failed = [m for m in capture.messages if "the app failed" in m]
    assert failed == [r"GET /boom%0d%0aforged\x22\x5c?q=%0a: the app failed; answered 500"], \
        capture.messages


def test_a_refused_request_line_is_escaped_the_same_way(tmp_path: Path) -> None:
    """A raw handler's Manager with an AccessLog as its refusal handler (what the servers
    do): the guard refuses a target with an ESC sequence, and the line shows it escaped."""
    def answer(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            conn.reply(200, b"ok")

    st = ServerThread(answer)
    with access_file(tmp_path, None) as (log, path):
        st.manager.refusal_handler = log.log_refusal
        port = st.listen()
        st.start()
        try:
            answer_bytes = exchange(port, b'GET /\x1b[2J"\\\xe9 HTTP/1.1\r\nHost: h\r\n\r\n')
            assert answer_bytes.startswith(b"HTTP/1.1 400")
            lines = logged_lines(path, 1)
        finally:
            st.stop()
    assert len(lines) == 1, lines
    assert r'"GET /\x1b[2J\x22\x5c\xe9 HTTP/1.1" 400 ' in lines[0], lines[0]
