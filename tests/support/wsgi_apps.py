"""The WSGI app every generic case runs, on our server and on the reference one alike.

`app` routes on PATH_INFO. Routes under /raw/ run unwrapped (they break the protocol on
purpose, or use what wsgiref.validate forbids, such as read() without a size); every other
route runs inside `wsgiref.validate.validator`, so a server that hands it a wrong environ or
never calls close() fails the case. Per-token state (close() called, bytes produced, errors
seen) lives in this process and is read back over HTTP at /_ctl/state, so that the same
test works when the server runs in another process. /_ctl/release sets a token's Event."""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import parse_qs
from wsgiref.validate import validator

from .patterns import pattern_chunks

Environ = dict[str, Any]
StartResponse = Callable[..., Callable[[bytes], object]]

_lock = threading.Lock()
_state: dict[str, dict[str, Any]] = {}
_events: dict[str, threading.Event] = {}

TEXT = [("Content-Type", "text/plain")]


def _token_state(token: str) -> dict[str, Any]:
    with _lock:
        return _state.setdefault(token, {})


def _record(token: str, **values: Any) -> None:
    if token:
        with _lock:
            _state.setdefault(token, {}).update(values)


def _event(token: str) -> threading.Event:
    with _lock:
        return _events.setdefault(token, threading.Event())


def _query(environ: Environ) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}


def _json(start_response: StartResponse, obj: object, status: str = "200 OK") -> list[bytes]:
    body = json.dumps(obj).encode()
    start_response(status, [("Content-Type", "application/json"),
                            ("Content-Length", str(len(body)))])
    return [body]


def _text(start_response: StartResponse, body: bytes, status: str = "200 OK") -> list[bytes]:
    start_response(status, TEXT + [("Content-Length", str(len(body)))])
    return [body]


class Tracked:
    """A response iterable that records when the server calls its close()."""

    def __init__(self, token: str, parts: Iterable[bytes]) -> None:
        self.token = token
        self._it = iter(parts)
        with _lock:
            _state.setdefault(token, {}).update(closed=False, produced=0)

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        part = next(self._it)
        with _lock:
            _state[self.token]["produced"] += len(part)
        return part

    def close(self) -> None:
        close = getattr(self._it, "close", None)
        if close is not None:
            close()
        with _lock:
            _state[self.token]["closed"] = True


def environ_view(environ: Environ) -> dict[str, Any]:
    """What a test can check about an environ, as JSON (str values kept as str)."""
    out: dict[str, Any] = {k: v for k, v in environ.items() if isinstance(v, str)}
    out["wsgi.version"] = list(environ["wsgi.version"])
    for key in ("wsgi.multithread", "wsgi.multiprocess", "wsgi.run_once",
                "wsgi.input_terminated"):
        out[key] = environ.get(key)
    inp = environ["wsgi.input"]
    out["input_methods"] = [m for m in ("read", "readline", "readlines", "__iter__")
                            if hasattr(inp, m)]
    errors = environ["wsgi.errors"]
    errors.write("wsgi.errors works\n")
    errors.writelines(["two\n", "lines\n"])
    errors.flush()
    out["has_file_wrapper"] = callable(environ.get("wsgi.file_wrapper"))
    out["types"] = {k: type(v).__name__ for k, v in environ.items()
                    if not k.startswith("wsgi.") and "." not in k}
    return out


def _read_input(environ: Environ, mode: str, n: int) -> list[bytes]:
    inp = environ["wsgi.input"]
    parts: list[bytes] = []
    if mode == "read":  # read() with no size: not allowed by validator, so under /raw/
        parts.append(inp.read())
    elif mode == "readn":
        while True:
            piece = inp.read(n)
            if not piece:
                break
            parts.append(piece)
    elif mode == "readline":
        while True:
            line = inp.readline()
            if not line:
                break
            parts.append(line)
    elif mode == "readline_n":
        while True:
            line = inp.readline(n)
            if not line:
                break
            parts.append(line)
    elif mode == "readlines":
        parts.extend(inp.readlines())
    elif mode == "iter":
        parts.extend(inp)
    else:
        raise ValueError(mode)
    return parts


def _stream(q: dict[str, str]) -> Iterator[bytes]:
    size = int(q.get("size", "1048576"))
    chunk = int(q.get("chunk", "65536"))
    yield from pattern_chunks(size, chunk)


def _gated(token: str, timeout: float) -> Iterator[bytes]:
    yield b"first\n"
    _record(token, waiting=True)
    released = _event(token).wait(timeout)
    _record(token, released=released)
    yield b"second\n"


def _exc_info_case(mode: str, token: str, start_response: StartResponse) -> Iterable[bytes]:
    if mode == "again":
        start_response("200 OK", TEXT)
        try:
            start_response("201 Created", TEXT)
        except Exception as exc:  # the server must refuse a second call without exc_info
            return [f"second call raised {type(exc).__name__}".encode()]
        return [b"second call did not raise"]
    if mode == "replace":
        start_response("200 OK", TEXT + [("X-First", "yes")])
        try:
            raise RuntimeError("changed my mind")
        except RuntimeError:
            start_response("503 Service Unavailable", TEXT + [("X-Second", "yes")],
                           sys.exc_info())
        return [b"replaced"]
    if mode == "after_sent":
        def body() -> Iterator[bytes]:
            yield b"already sent\n"
            try:
                raise RuntimeError("too late")
            except RuntimeError as original:
                try:
                    start_response("500 Internal Server Error", TEXT, sys.exc_info())
                except RuntimeError as again:
                    _record(token, reraised=again is original)
                    raise
                _record(token, reraised=False)
            yield b"start_response did not re-raise\n"
        start_response("200 OK", TEXT)
        return Tracked(token, body())
    if mode == "write":
        write = start_response("200 OK", TEXT)
        write(b"via write; ")
        return [b"via iterable"]
    raise ValueError(mode)


def _bad(kind: str, start_response: StartResponse) -> Iterable[Any]:
    """Protocol-breaking apps: the server must answer 500 or close, never send them on."""
    statuses = {"status_200OK": "200OK", "status_abc": "abc",
                "status_crlf": "200 OK\r\nX-Injected: 1", "status_lf": "200 OK\nX-Injected: 1",
                "status_bytes": b"200 OK", "status_nul": "200 O\x00K"}
    headers = {"name_crlf": ("X-A\r\nX-Injected", "1"), "value_crlf": ("X-A", "a\r\nX-Injected: 1"),
               "value_lf": ("X-A", "a\nX-Injected: 1"), "value_cr": ("X-A", "a\rb"),
               "value_nul": ("X-A", "a\x00b"), "name_nul": ("X\x00A", "1"),
               "name_space": ("X A", "1"), "name_colon": ("X:A", "1"),
               "name_empty": ("", "1"), "value_not_latin1": ("X-A", "\u20ac"),
               "value_bytes": ("X-A", b"1")}
    if kind in statuses:
        start_response(statuses[kind], TEXT)
        return [b"body"]
    if kind in headers:
        start_response("200 OK", TEXT + [headers[kind]])
        return [b"body"]
    if kind == "str_body":
        start_response("200 OK", TEXT)
        return ["a str is not bytes"]
    if kind == "str_body_later":
        start_response("200 OK", TEXT)
        return iter([b"bytes first, ", "then a str"])
    if kind == "cl_short":
        start_response("200 OK", TEXT + [("Content-Length", "10")])
        return [b"12345"]
    if kind == "cl_short_stream":
        start_response("200 OK", TEXT + [("Content-Length", "100000")])
        return iter([b"x" * 10000])
    if kind == "cl_long":
        start_response("200 OK", TEXT + [("Content-Length", "5")])
        return [b"1234567890"]
    if kind == "cl_long_stream":
        start_response("200 OK", TEXT + [("Content-Length", "5")])
        return iter([b"123", b"4567890"])
    raise ValueError(kind)


def router(environ: Environ, start_response: StartResponse) -> Iterable[Any]:
    path = environ.get("PATH_INFO", "")
    q = _query(environ)
    token = q.get("token", "")
    if path.startswith("/raw/"):
        path = path[4:]
    if path == "/_ctl/ping":
        return _text(start_response, b"pong")
    if path == "/_ctl/state":
        return _json(start_response, dict(_token_state(token)))
    if path == "/_ctl/release":
        _event(token).set()
        return _text(start_response, b"released")
    if path == "/hello":
        return _text(start_response, b"hello")
    if path == "/environ" or path.startswith("/environ/"):
        return _json(start_response, environ_view(environ))
    if path == "/echo":
        parts = _read_input(environ, q.get("mode", "readn"), int(q.get("n", "8192")))
        return _json(start_response, {"parts": [p.decode("latin-1") for p in parts]})
    if path == "/hash":
        h = hashlib.sha256()
        total = 0
        inp = environ["wsgi.input"]
        while True:
            piece = inp.read(64 * 1024)
            if not piece:
                break
            h.update(piece)
            total += len(piece)
        return _json(start_response, {"length": total, "sha256": h.hexdigest()})
    if path == "/read_until_error":
        # Reads a body the client abandons; records what reading it raised.
        _record(token, done=False)
        try:
            while environ["wsgi.input"].read(65536):
                pass
            _record(token, error=None)
        except Exception as exc:
            _record(token, error=type(exc).__name__, oserror=isinstance(exc, OSError))
            raise
        finally:
            _record(token, done=True)
        return _text(start_response, b"read it all")
    if path == "/stream":
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return Tracked(token, _stream(q))
    if path == "/stream_cl":
        size = int(q.get("size", "1048576"))
        start_response("200 OK", [("Content-Type", "application/octet-stream"),
                                  ("Content-Length", str(size))])
        return Tracked(token, _stream(q))
    if path == "/nocl":
        start_response("200 OK", TEXT)
        return [b"no ", b"content-", b"length"]
    if path == "/empty":
        start_response("200 OK", TEXT)
        return []
    if path == "/gated":
        start_response("200 OK", TEXT)
        return Tracked(token, _gated(token, float(q.get("timeout", "10"))))
    if path == "/sleep":
        _record(token, sleeping=True)  # with ?token=: the test knows the app has it
        time.sleep(float(q.get("s", "1")))
        return _text(start_response, b"slept")
    if path == "/status":
        code = q.get("code", "200")
        reasons = {"200": "OK", "204": "No Content", "304": "Not Modified",
                   "404": "Not Found", "418": "I'm a teapot"}
        status = f"{code} {reasons[code]}"
        if code in ("204", "304"):
            start_response(status, [])
            return []
        return _text(start_response, status.encode(), status)
    if path == "/raise_before":
        raise RuntimeError("app failed before start_response")
    if path == "/raise_after_start":
        start_response("200 OK", TEXT)
        raise RuntimeError("app failed after start_response, before any body")
    if path == "/raise_in_body":
        def failing() -> Iterator[bytes]:
            yield b"partial body, then "
            raise RuntimeError("app failed while streaming")
        start_response("200 OK", TEXT)
        return Tracked(token, failing())
    if path == "/raise_in_body_cl":
        def failing_cl() -> Iterator[bytes]:
            yield b"0123456789"
            raise RuntimeError("app failed while streaming")
        start_response("200 OK", TEXT + [("Content-Length", "100")])
        return Tracked(token, failing_cl())
    if path == "/exc_info":
        return _exc_info_case(q.get("mode", ""), token, start_response)
    if path == "/bad":
        return _bad(q.get("kind", ""), start_response)
    if path == "/file":
        size = int(q.get("size", "100000"))
        f = tempfile.TemporaryFile()
        for piece in pattern_chunks(size):
            f.write(piece)
        f.seek(0)
        start_response("200 OK", [("Content-Type", "application/octet-stream"),
                                  ("Content-Length", str(size))])
        wrapper = environ["wsgi.file_wrapper"](f, 8192)
        return Tracked(token, wrapper) if token else wrapper
    if path == "/headers_out":
        start_response("200 OK", TEXT + [("X-Multi", "a"), ("X-Multi", "b"),
                                         ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2"),
                                         ("X-Latin", "caf\xe9"), ("Content-Length", "2")])
        return [b"ok"]
    return _text(start_response, b"no such route\n", "404 Not Found")


_validated = validator(router)


def app(environ: Environ, start_response: StartResponse) -> Iterable[Any]:
    if environ.get("PATH_INFO", "").startswith("/raw/"):
        return router(environ, start_response)
    return _validated(environ, start_response)


def make_app() -> Callable[[Environ, StartResponse], Iterable[Any]]:
    """For factory=True."""
    return app
