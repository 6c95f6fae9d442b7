"""The access log: one line per answered request on the `cymongoose.access` logger, in a
gunicorn-style format or as JSON. Shared by the WSGI and ASGI servers: each calls
`AccessLog.log()` once a response is complete, with plain values, and never builds anything
when the logger would drop the record.

Format atoms (gunicorn's, so existing log parsers keep working):

| Atom | Value |
|---|---|
| `h` | client address | `l` | `-` | `u` | user name from `REMOTE_USER`, else `-` |
| `t` | time, `[24/Nov/2026:18:02:37 +0000]` | `r` | request line | `m` | method |
| `U` | path | `q` | query string | `H` | protocol | `s` | status |
| `B` | body bytes | `b` | body bytes, `-` for 0 | `f` | Referer | `a` | User-Agent |
| `T` | seconds (int) | `M` | milliseconds (int) | `D` | microseconds (int) |
| `L` | seconds (decimal) | `p` | `<pid>` | `{name}i` | request header `name` |

Nothing a client chose reaches a line as it came: the request line is the one the client sent
(its target undecoded, as nginx and gunicorn log it, so `%0d%0a` stays those six
characters), and every text atom passes through the core's `log_escape()` (control and
non-ASCII characters, `"` and `\\` as `\\xNN`, as nginx writes them), so a client can
neither start a line of its own nor end a quoted field. The JSON format leaves escaping to
`json.dumps()` (ASCII only, control characters as `\\u00NN`), which is exact JSON.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from ._mongoose import log_escape_fields

__all__ = ["AccessLog", "AccessLogWriter", "DEFAULT_FORMAT", "HeaderLookup"]

DEFAULT_FORMAT = '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s" %(L)s'

# A request header by lower-case name, None when absent (WSGI: from the environ; ASGI: from
# the scope's header list).
HeaderLookup = Callable[[str], "str | None"]

_ATOM = re.compile(r"%\(([^)]*)\)")


# Each atom as an expression over log()'s arguments; the format is compiled once into a
# function returning the tuple of its values (no per-atom call or dict per request), and
# log_escape_fields() escapes its str items in one call (the same tuple back, after a C scan,
# when nothing needs it): what a client chose, and server-made text, which never changes.
_EXPR = {
    "h": "client or '-'", "l": "'-'", "u": "user or '-'", "t": "self._time()",
    "r": "f\"{method} {target} {protocol}\"", "m": "method",
    "U": "path", "q": "query", "H": "protocol", "s": "status", "B": "size",
    "b": "size or '-'", "f": "lookup('referer') or '-'", "a": "lookup('user-agent') or '-'",
    "T": "int(duration_s)", "M": "int(duration_s * 1000)",
    "D": "int(duration_s * 1000000)", "L": "'%.6f' % duration_s", "p": "self._pid",
}
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")


class AccessLog:
    """Formats and emits access-log records. `fmt` is a gunicorn-style format (default
    `DEFAULT_FORMAT`); `as_json=True` emits one JSON object per line instead, with the
    fields client, method, path, query, protocol, status, bytes, duration_ms, referer,
    user_agent and time (ISO 8601 with milliseconds and the UTC offset).

    Records go to `logger` (default `cymongoose.access`) like any other. When the logger's
    only handler is an `AccessLogWriter` (what `--access-log` installs), the line is handed to
    it directly, without a `LogRecord`: the access log then costs a few microseconds per
    request instead of a `logging` call."""

    __slots__ = ("logger", "_fmt", "_values", "_json", "_pid", "_tz_second", "_tz_value",
                 "_iso_second", "_iso_prefix", "_iso_zone")

    def __init__(self, fmt: str | None = None, *, as_json: bool = False,
                 logger: logging.Logger | None = None) -> None:
        self.logger = logger or logging.getLogger("cymongoose.access")
        fmt = fmt or DEFAULT_FORMAT
        atoms = _ATOM.findall(fmt)
        exprs = []
        for atom in atoms:
            if atom in _EXPR:
                exprs.append(_EXPR[atom])
            elif (atom.startswith("{") and atom.endswith("}i")
                  and _HEADER_NAME.match(atom[1:-2])):
                exprs.append(f"lookup({atom[1:-2].lower()!r}) or '-'")
            else:
                raise ValueError(f"access-log format: unknown atom %({atom})s; the atoms are "
                                 f"{', '.join(sorted(_EXPR))} and {{header-name}}i")
        self._fmt = _ATOM.sub("%", fmt)  # positional: one value per atom, in order
        source = ("lambda self, client, method, path, query, protocol, status, size, "
                  f"duration_s, lookup, user, target: ({', '.join(exprs)},)")
        self._values = eval(source)  # noqa: S307 - built only from the fixed _EXPR table
        self._pid = f"<{os.getpid()}>"
        self._tz_second = -1
        self._tz_value = ""
        self._iso_second = -1
        self._iso_prefix = ""
        self._iso_zone = ""
        try:  # a sample request, with the value types real ones have
            self._fmt % self._values(self, "192.0.2.1", "GET", "/", "", "HTTP/1.1", 200, 0,
                                     0.0, _no_headers, None, "/")
        except (TypeError, ValueError) as exc:
            raise ValueError(f"access-log format {fmt!r} is not a valid %-format: "
                             f"{exc}") from None
        self._json = as_json

    @property
    def enabled(self) -> bool:
        """Whether a record would be emitted (checked per request; cheap)."""
        return self.logger.isEnabledFor(logging.INFO)

    def log(self, client: str, method: str, path: str, query: str, protocol: str,
            status: int, size: int, duration_s: float, header: HeaderLookup | None = None,
            user: str | None = None, target: str | None = None) -> None:
        """Emit the record of one answered request. `path` is the decoded path, `query`
        the raw query string (no `?`), `protocol` e.g. `HTTP/1.1`, `size` the body bytes
        sent, `duration_s` from the request head to the end of the response, `target` the
        request target as the client sent it (path and query, undecoded: what the request
        line and the JSON `path` show; when None, `path` and `query` stand for it). Values
        are written escaped (see the module's docstring)."""
        logger = self.logger
        if not logger.isEnabledFor(logging.INFO):
            return
        lookup = header or _no_headers
        if target is None:
            target = f"{path}?{query}" if query else path
        if self._json:
            line = json.dumps({
                "time": self._iso_time(), "client": client, "method": method,
                "path": target.partition("?")[0], "query": query, "protocol": protocol,
                "status": status, "bytes": size, "duration_ms": round(duration_s * 1000.0, 3),
                "referer": lookup("referer"), "user_agent": lookup("user-agent"),
            }, separators=(",", ":"))
        else:
            line = self._fmt % log_escape_fields(self._values(
                self, client, method, path, query, protocol, status, size, duration_s, lookup,
                user, target))
        handlers = logger.handlers
        if (len(handlers) == 1 and type(handlers[0]) is AccessLogWriter
                and not logger.propagate and not logger.filters):
            handlers[0].write_line(line)
        else:
            logger.info(line)

    def log_refusal(self, conn: Any, status: int, reason: str, request_line: str,
                    body_size: int, *, duration_s: float = 0.0,
                    header: HeaderLookup | None = None) -> None:
        """The record of a request the server answered before any app saw it (malformed,
        over a limit, timed out): `Manager.refusal_handler`'s signature, so a server sets
        `manager.refusal_handler = access_log.log_refusal`. The request line as the client
        sent it (latin-1, one character per byte; escaped when written, as every line is)
        stands for method, target and protocol; the client is the peer (no proxy header was
        read)."""
        if not self.logger.isEnabledFor(logging.INFO):
            return
        addr = conn.remote_addr
        method, _, rest = request_line.partition(" ")
        target, _, protocol = rest.partition(" ")
        path, _, query = target.partition("?")
        self.log(addr[0] if addr and addr[0] else "-", method or "-", path, query, protocol,
                 status, body_size, duration_s, header, target=target)

    def log_proxied(self, conn: Any, status: int, request_line: str, body_size: int,
                    duration_s: float, referer: str | None, user_agent: str | None) -> None:
        """The record of a request the reverse proxy answered: `Manager.proxy_log_handler`'s
        signature, so a server sets `manager.proxy_log_handler = access_log.log_proxied`.
        Written as `log_refusal` writes the request line, with the real duration, Referer
        and User-Agent."""
        if not self.logger.isEnabledFor(logging.INFO):
            return
        fields = {"referer": referer, "user-agent": user_agent}
        self.log_refusal(conn, status, "proxied", request_line, body_size,
                         duration_s=duration_s, header=fields.get)

    def _time(self) -> str:
        now = int(time.time())
        if now != self._tz_second:  # formatted once per second, not per request
            self._tz_second = now
            self._tz_value = time.strftime("[%d/%b/%Y:%H:%M:%S %z]", time.localtime(now))
        return self._tz_value


    def _iso_time(self) -> str:
        """ISO 8601 local time with milliseconds and the UTC offset, what log pipelines
        parse without a pattern: `2026-11-25T14:03:07.123+00:00`."""
        now = time.time()
        second = int(now)
        if second != self._iso_second:  # the date part once per second
            self._iso_second = second
            local = time.localtime(second)
            zone = time.strftime("%z", local)
            self._iso_prefix = time.strftime("%Y-%m-%dT%H:%M:%S", local)
            self._iso_zone = f"{zone[:3]}:{zone[3:]}"
        return f"{self._iso_prefix}.{int((now - second) * 1000):03d}{self._iso_zone}"


def _no_headers(name: str) -> str | None:
    return None


class AccessLogWriter(logging.Handler):
    """A `logging` handler for access lines that writes them in batches: lines gather in
    memory and reach the file (or stdout) at most `flush_interval` seconds later, every 256
    lines, and at exit, in one write each. It formats records of any logger like other
    handlers; `AccessLog` hands it ready lines without making a record.

    Like `logging.FileHandler`, a closed writer opens its file again at the next line:
    `logging.config.dictConfig()` closes every existing handler, and an app that configures
    logging while it is imported (Django does) must not silence the access log."""

    def __init__(self, path: str | None = None, flush_interval: float = 0.2) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(message)s"))
        self._path = path
        self._own = path is not None
        self._fd = -1
        self._lines: list[str] = []
        self._write_lock = threading.Lock()
        self._interval = flush_interval
        self._stop = threading.Event()
        self._closed = True
        self._open()
        _WRITERS.add(self)

    def _open(self) -> None:
        """The descriptor and the flushing thread (again, after a close)."""
        with self._write_lock:
            if not self._closed:
                return
            if self._path is None:
                self._fd = sys.stdout.fileno()
            else:
                self._fd = os.open(self._path,
                                   os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            self._stop = threading.Event()
            threading.Thread(target=self._flush_often, args=(self._stop,), daemon=True,
                             name="cymongoose-access-log").start()
            self._closed = False

    def write_line(self, line: str) -> None:
        if self._closed:
            self._open()
        lines = self._lines
        lines.append(line)  # atomic under the GIL; flush() swaps the list out
        if len(lines) >= 256:
            self.flush()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.write_line(self.format(record))
        except Exception:
            self.handleError(record)

    def flush(self) -> None:
        with self._write_lock:
            lines, self._lines = self._lines, []
            if not lines or self._fd < 0:
                return
            data = ("\n".join(lines) + "\n").encode("utf-8", "backslashreplace")
            try:
                while data:
                    data = data[os.write(self._fd, data):]
            except OSError as exc:
                print(f"cymongoose: access log write failed: {exc}", file=sys.stderr)

    def _flush_often(self, stop: threading.Event) -> None:
        while not stop.wait(self._interval):
            self.flush()

    def close(self) -> None:
        self._stop.set()
        self.flush()
        with self._write_lock:
            if self._own and self._fd >= 0:
                os.close(self._fd)
            self._fd = -1
            self._closed = True
        super().close()


# Every writer, closed (flushed) at exit: after a dictConfig() `logging.shutdown()` no longer
# knows them, and a process that ends with os._exit() calls close_writers() itself.
_WRITERS: weakref.WeakSet[AccessLogWriter] = weakref.WeakSet()


@atexit.register
def close_writers() -> None:
    """Write out what every access-log writer still holds, and close them."""
    for writer in list(_WRITERS):
        writer.close()
