"""`--static URL=DIR`: middleware that answers GET/HEAD under URL from DIR and hands everything
else to the app, for WSGI (`StaticFiles`) and ASGI (`ASGIStaticFiles`) apps. Files leave through
the servers' sendfile path (`wsgi.file_wrapper`, `http.response.pathsend`), so a static file
costs no Python per byte. Both share one lookup: the longest mount prefix wins, paths that
leave the directory are 404 (through `..` or a symlink, index files included), a path with a
NUL is 400, a directory serves its index.html and is never listed (404 without one),
If-Modified-Since gets 304."""

from __future__ import annotations

import mimetypes
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from email.utils import formatdate, parsedate_to_datetime
from typing import IO, Any

from .typedefs import ASGIApp, StartResponse, WSGIApp

__all__ = ["ASGIStaticFiles", "StaticFiles", "parse_mount"]


def parse_mount(spec: str) -> tuple[str, str]:
    """`/static=./public` -> ("/static", "/abs/public"); ValueError saying what is wrong."""
    url, sep, directory = spec.partition("=")
    if not sep or not url.startswith("/") or not directory:
        raise ValueError(f"--static {spec!r}: give it as URL=DIR, e.g. /static=./public")
    path = os.path.realpath(directory)
    if not os.path.isdir(path):
        raise ValueError(f"--static {spec!r}: {directory!r} is not a directory")
    return url.rstrip("/") or "/", path


@dataclass
class _Answer:
    """What a static request gets: a short text answer, or an open file (`file`, `path`)."""

    status: int
    reason: str
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    file: IO[bytes] | None = None
    path: str = ""


class _Mounts:
    """The (url prefix, directory) mounts, longest prefix first (/static/img=... wins over
    /static=...), and the lookup both middlewares share."""

    def __init__(self, mounts: Iterable[tuple[str, str]]) -> None:
        self.mounts = sorted(((u, os.path.realpath(d)) for u, d in mounts),
                             key=lambda m: len(m[0]), reverse=True)

    def find(self, path: str) -> tuple[str, str] | None:
        """(directory, rest of the path) of the mount serving `path`, or None."""
        for prefix, directory in self.mounts:
            if prefix == "/" or path == prefix or path.startswith(prefix + "/"):
                return directory, path[len(prefix):] if prefix != "/" else path
        return None


def _text(status: int, reason: str, body: bytes,
          extra: list[tuple[str, str]] | None = None) -> _Answer:
    return _Answer(status, reason, [("Content-Type", "text/plain; charset=utf-8"),
                                    ("Content-Length", str(len(body))), *(extra or [])], body)


def _inside(directory: str, full: str) -> bool:
    return full == directory or full.startswith(directory.rstrip(os.sep) + os.sep)


def _lookup(directory: str, relative: str | None, method: str,
            if_modified_since: str | None) -> _Answer:
    """The answer for `relative` (a decoded path under `directory`; None: undecodable)."""
    if method not in ("GET", "HEAD"):
        return _text(405, "Method Not Allowed", b"method not allowed\n",
                     [("Allow", "GET, HEAD")])
    if relative is None:
        return _text(404, "Not Found", b"not found\n")
    if "\0" in relative:
        # Our servers refuse "%00" in a path before the app runs; behind another server it
        # arrives decoded, and a file name cannot hold it (nginx answers 400 too).
        return _text(400, "Bad Request", b"bad request\n")
    # realpath resolves every symlink: what is opened is the resolved path, checked to be
    # inside the mount (`..` and links out of it are 404 alike).
    full = os.path.realpath(os.path.join(directory, relative.lstrip("/")))
    if not _inside(directory, full):
        return _text(404, "Not Found", b"not found\n")
    if os.path.isdir(full):
        # The index file may be a symlink too: resolved and checked like any path. A
        # directory without one is 404, never a listing.
        full = os.path.realpath(os.path.join(full, "index.html"))
        if not _inside(directory, full):
            return _text(404, "Not Found", b"not found\n")
    try:
        fh = open(full, "rb")  # noqa: SIM115 - the caller closes it (or the server does)
    except OSError:
        return _text(404, "Not Found", b"not found\n")
    st = os.fstat(fh.fileno())
    if not stat.S_ISREG(st.st_mode):
        fh.close()
        return _text(404, "Not Found", b"not found\n")
    last_modified = formatdate(st.st_mtime, usegmt=True)
    if if_modified_since:
        try:
            if int(st.st_mtime) <= parsedate_to_datetime(if_modified_since).timestamp():
                fh.close()
                return _Answer(304, "Not Modified", [("Last-Modified", last_modified)])
        except (TypeError, ValueError):
            pass
    ctype = mimetypes.guess_type(full)[0] or "application/octet-stream"
    if ctype.startswith("text/"):
        ctype += "; charset=utf-8"
    return _Answer(200, "OK", [("Content-Type", ctype), ("Content-Length", str(st.st_size)),
                               ("Last-Modified", last_modified)], file=fh, path=full)


class StaticFiles:
    """WSGI: serve the files under each (url prefix, directory) mount; `app` gets the rest."""

    def __init__(self, app: WSGIApp, mounts: Iterable[tuple[str, str]]) -> None:
        self.app = app
        self._mounts = _Mounts(mounts)
        self.mounts = self._mounts.mounts

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Any:
        found = self._mounts.find(environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", ""))
        if found is None:
            return self.app(environ, start_response)
        directory, rest = found
        # PATH_INFO is latin-1-decoded bytes (PEP 3333): back to the bytes, then UTF-8.
        try:
            relative: str | None = rest.encode("latin-1").decode("utf-8")
        except UnicodeError:
            relative = None
        answer = _lookup(directory, relative, environ["REQUEST_METHOD"],
                         environ.get("HTTP_IF_MODIFIED_SINCE"))
        start_response(f"{answer.status} {answer.reason}", answer.headers)
        if answer.file is not None:
            return environ["wsgi.file_wrapper"](answer.file, 65536)
        return [answer.body] if answer.body else []


class ASGIStaticFiles:
    """ASGI: serve the files under each mount (http requests only); `app` gets the rest,
    WebSockets and lifespan included. A file leaves as `http.response.pathsend` when the
    server offers it (ours sends it with sendfile), else read into one body message."""

    def __init__(self, app: ASGIApp, mounts: Iterable[tuple[str, str]]) -> None:
        self.app = app
        self._mounts = _Mounts(mounts)
        self.mounts = self._mounts.mounts

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        found = self._mounts.find(scope["path"]) if scope["type"] == "http" else None
        if found is None:
            await self.app(scope, receive, send)
            return
        directory, rest = found
        since = next((v.decode("latin-1") for k, v in scope["headers"]
                      if k == b"if-modified-since"), None)
        answer = _lookup(directory, rest, scope["method"], since)
        headers = [(k.lower().encode("latin-1"), v.encode("latin-1"))
                   for k, v in answer.headers]
        await send({"type": "http.response.start", "status": answer.status,
                    "headers": headers})
        if answer.file is None:
            await send({"type": "http.response.body", "body": answer.body})
            return
        with answer.file as fh:
            if "http.response.pathsend" in scope.get("extensions", {}):
                await send({"type": "http.response.pathsend", "path": answer.path})
            else:
                await send({"type": "http.response.body", "body": fh.read()})
