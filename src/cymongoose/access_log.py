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
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable

__all__ = ["AccessLog", "DEFAULT_FORMAT", "HeaderLookup"]

DEFAULT_FORMAT = '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s" %(L)s'

# A request header by lower-case name, None when absent (WSGI: from the environ; ASGI: from
# the scope's header list).
HeaderLookup = Callable[[str], "str | None"]

_ATOM = re.compile(r"%\(([^)]*)\)")
_KNOWN = set("hlutrmUqHsBbfaTMDLp")


class AccessLog:
    """Formats and emits access-log records. `fmt` is a gunicorn-style format (default
    `DEFAULT_FORMAT`); `as_json=True` emits one JSON object per line instead, with the
    fields client, method, path, query, protocol, status, bytes, duration_ms, referer,
    user_agent (and time)."""

    __slots__ = ("logger", "_fmt", "_atoms", "_json", "_pid", "_tz_second", "_tz_value")

    def __init__(self, fmt: str | None = None, *, as_json: bool = False,
                 logger: logging.Logger | None = None) -> None:
        self.logger = logger or logging.getLogger("cymongoose.access")
        self._fmt = fmt or DEFAULT_FORMAT
        self._atoms = tuple(dict.fromkeys(_ATOM.findall(self._fmt)))
        for atom in self._atoms:
            if not (atom in _KNOWN or (atom.startswith("{") and atom.endswith("}i"))):
                raise ValueError(f"access-log format: unknown atom %({atom})s; the atoms are "
                                 f"{', '.join(sorted(_KNOWN))} and {{header}}i")
        try:
            self._fmt % {a: "" for a in self._atoms}
        except (TypeError, ValueError, KeyError) as exc:
            raise ValueError(f"access-log format {self._fmt!r} is not a valid %-format: "
                             f"{exc}") from None
        self._json = as_json
        self._pid = f"<{os.getpid()}>"
        self._tz_second = -1
        self._tz_value = ""

    @property
    def enabled(self) -> bool:
        """Whether a record would be emitted (checked per request; cheap)."""
        return self.logger.isEnabledFor(logging.INFO)

    def log(self, client: str, method: str, path: str, query: str, protocol: str,
            status: int, size: int, duration_s: float, header: HeaderLookup | None = None,
            user: str | None = None) -> None:
        """Emit the record of one answered request. `path` is the decoded path, `query`
        the raw query string (no `?`), `protocol` e.g. `HTTP/1.1`, `size` the body bytes
        sent, `duration_s` from the request head to the end of the response."""
        if not self.logger.isEnabledFor(logging.INFO):
            return
        lookup = header or _no_headers
        if self._json:
            record = {
                "time": self._time(), "client": client, "method": method, "path": path,
                "query": query, "protocol": protocol, "status": status, "bytes": size,
                "duration_ms": round(duration_s * 1000.0, 3),
                "referer": lookup("referer"), "user_agent": lookup("user-agent"),
            }
            self.logger.info(json.dumps(record, separators=(",", ":")))
            return
        values: dict[str, object] = {}
        for atom in self._atoms:
            values[atom] = self._value(atom, client, method, path, query, protocol, status,
                                       size, duration_s, lookup, user)
        self.logger.info(self._fmt % values)

    def _value(self, atom: str, client: str, method: str, path: str, query: str,
               protocol: str, status: int, size: int, duration_s: float,
               lookup: HeaderLookup, user: str | None) -> object:
        if atom == "h":
            return client or "-"
        if atom == "r":
            return f"{method} {path}{'?' + query if query else ''} {protocol}"
        if atom == "s":
            return status
        if atom == "b":
            return size if size else "-"
        if atom == "B":
            return size
        if atom == "t":
            return self._time()
        if atom in "lu":
            return (user or "-") if atom == "u" else "-"
        if atom == "m":
            return method
        if atom == "U":
            return path
        if atom == "q":
            return query
        if atom == "H":
            return protocol
        if atom == "f":
            return lookup("referer") or "-"
        if atom == "a":
            return lookup("user-agent") or "-"
        if atom == "T":
            return int(duration_s)
        if atom == "M":
            return int(duration_s * 1000)
        if atom == "D":
            return int(duration_s * 1_000_000)
        if atom == "L":
            return f"{duration_s:.6f}"
        if atom == "p":
            return self._pid
        return lookup(atom[1:-2].lower()) or "-"  # {name}i

    def _time(self) -> str:
        now = int(time.time())
        if now != self._tz_second:  # formatted once per second, not per request
            self._tz_second = now
            self._tz_value = time.strftime("[%d/%b/%Y:%H:%M:%S %z]", time.localtime(now))
        return self._tz_value


def _no_headers(name: str) -> str | None:
    return None
