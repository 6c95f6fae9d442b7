"""`--static URL=DIR`: middleware that answers GET/HEAD under URL from DIR and hands everything
else to the app, for WSGI (`StaticFiles`) and ASGI (`ASGIStaticFiles`) apps.

Finding the file is done here: the longest mount prefix wins, paths that leave the directory
are 404 (through `..` or a symlink, index files and precompressed siblings included), a path
with a NUL is 400, a directory URL without its slash is redirected to it (301, query kept), a
directory serves its index.html and is never listed (404 without one), a file URL ending in a
slash is 404. Answering is the core's `static_file_response()`, which raw `serve_dir` uses
too, so both paths agree: methods other than GET/HEAD are 405, ranges (one range: 206;
several: the whole file), If-Range, ETag/If-None-Match, Last-Modified/If-Modified-Since,
precompressed .zst/.br/.gz siblings with Vary (docs/server-behaviour.md, "Static files").
Files leave through the servers' sendfile path (`wsgi.file_wrapper`,
`http.response.pathsend`), so a static file costs no Python per byte; a range under ASGI is
read in 64 KiB pieces (pathsend has no offset)."""

from __future__ import annotations

import mimetypes
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO, Any
from urllib.parse import quote

from ._mongoose import static_file_response
from .typedefs import ASGIApp, StartResponse, WSGIApp

__all__ = ["ASGIStaticFiles", "StaticFiles", "parse_mount"]

_PIECE = 65536
# Left as they are in a redirect's Location: RFC 3986 pchar and the path's slashes.
_PATH_SAFE = "/:@!$&'()*+,;=-._~"


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
    """What a static request gets: a short answer (`body`), or `count` bytes of descriptor
    `fd` from `offset` (the caller closes it); `path` is the file those bytes come from."""

    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    fd: int = -1
    offset: int = 0
    count: int = 0
    path: str = ""
    size: int = 0  # the whole file's, to tell a full body (pathsend) from a range


@dataclass
class _Request:
    """What the lookup reads of a request, whatever the interface."""

    method: str
    url_path: bytes  # the path as the client sent it (percent-encoded), for a redirect
    query: bytes
    fields: dict[str, str]  # the conditional and negotiation fields, by lower-case name


_FIELDS = ("range", "if-range", "if-none-match", "if-modified-since", "accept-encoding")


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


def _text(status: int, body: bytes, extra: list[tuple[str, str]] | None = None) -> _Answer:
    return _Answer(status, [("Content-Type", "text/plain; charset=utf-8"),
                            ("Content-Length", str(len(body))), *(extra or [])], body)


def _inside(directory: str, full: str) -> bool:
    return full == directory or full.startswith(directory.rstrip(os.sep) + os.sep)


def _content_type(path: str) -> str:
    ctype = mimetypes.guess_type(path)[0] or "application/octet-stream"
    return ctype + "; charset=utf-8" if ctype.startswith("text/") else ctype


def _lookup(directory: str, relative: str | None, req: _Request) -> _Answer:
    """The answer for `relative` (a decoded path under `directory`; None: undecodable)."""
    if req.method not in ("GET", "HEAD"):
        return _text(405, b"Method Not Allowed\n", [("Allow", "GET, HEAD")])
    if relative is None:
        return _text(404, b"Not Found\n")
    if "\0" in relative:
        # Our servers refuse "%00" in a path before the app runs; behind another server it
        # arrives decoded, and a file name cannot hold it (nginx answers 400 too).
        return _text(400, b"Bad Request\n")
    # realpath resolves every symlink: what is opened is the resolved path, checked to be
    # inside the mount (`..` and links out of it are 404 alike).
    full = os.path.realpath(os.path.join(directory, relative.lstrip("/")))
    if not _inside(directory, full):
        return _text(404, b"Not Found\n")
    if os.path.isdir(full):
        if not relative.endswith("/"):
            # With the slash, the index page's relative links resolve inside the directory.
            location = quote(req.url_path + b"/", safe=_PATH_SAFE)
            if req.query:
                location += "?" + req.query.decode("latin-1")
            return _text(301, b"Moved Permanently\n", [("Location", location)])
        # The index file may be a symlink too: resolved and checked like any path. A
        # directory without one is 404, never a listing.
        full = os.path.realpath(os.path.join(full, "index.html"))
        if not _inside(directory, full):
            return _text(404, b"Not Found\n")
    elif relative.endswith("/"):
        return _text(404, b"Not Found\n")  # a file URL with a slash names no file (nginx)
    f = req.fields
    r = static_file_response(
        req.method, full, _content_type(full), range=f.get("range"),
        if_range=f.get("if-range"), if_none_match=f.get("if-none-match"),
        if_modified_since=f.get("if-modified-since"),
        accept_encoding=f.get("accept-encoding"), within=directory)
    size = 0
    if r.fd >= 0:
        try:
            size = os.fstat(r.fd).st_size
        except OSError:
            r.close()
            return _text(404, b"Not Found\n")
    return _Answer(r.status, list(r.headers), r.body, r.fd, r.offset, r.count,
                   r.path or "", size)


class _FileWindow:
    """`count` bytes of an open file from its current position, for `wsgi.file_wrapper`:
    a server that iterates it reads no further, and ours sends it with sendfile(2) from
    `fileno()`'s position, bounded by the Content-Length."""

    def __init__(self, fh: IO[bytes], count: int) -> None:
        self._fh = fh
        self._left = count

    def read(self, n: int = -1) -> bytes:
        n = self._left if n < 0 else min(n, self._left)
        data = self._fh.read(n) if n else b""
        self._left -= len(data)
        return data

    def fileno(self) -> int:
        return self._fh.fileno()

    def close(self) -> None:
        self._fh.close()


class StaticFiles:
    """WSGI: serve the files under each (url prefix, directory) mount; `app` gets the rest."""

    def __init__(self, app: WSGIApp, mounts: Iterable[tuple[str, str]]) -> None:
        self.app = app
        self._mounts = _Mounts(mounts)
        self.mounts = self._mounts.mounts

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Any:
        url_path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
        found = self._mounts.find(url_path)
        if found is None:
            return self.app(environ, start_response)
        directory, rest = found
        # PATH_INFO is latin-1-decoded bytes (PEP 3333): back to the bytes, then UTF-8.
        try:
            relative: str | None = rest.encode("latin-1").decode("utf-8")
        except UnicodeError:
            relative = None
        fields = {}
        for name in _FIELDS:
            value = environ.get("HTTP_" + name.upper().replace("-", "_"))
            if value is not None:
                fields[name] = value
        method = environ["REQUEST_METHOD"]
        answer = _lookup(directory, relative, _Request(
            method, url_path.encode("latin-1"),
            environ.get("QUERY_STRING", "").encode("latin-1"), fields))
        start_response(f"{answer.status} {_reason(answer.status)}", answer.headers)
        if answer.fd < 0:
            return [answer.body] if answer.body else []
        if method == "HEAD" or answer.count == 0:
            os.close(answer.fd)
            return []
        fh = os.fdopen(answer.fd, "rb")
        fh.seek(answer.offset)
        return environ["wsgi.file_wrapper"](_FileWindow(fh, answer.count), _PIECE)


class ASGIStaticFiles:
    """ASGI: serve the files under each mount (http requests only); `app` gets the rest,
    WebSockets and lifespan included. A whole file leaves as `http.response.pathsend` when
    the server offers it (ours sends it with sendfile), else, and for a range, read in
    pieces."""

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
        fields = {}
        for key, value in scope["headers"]:
            name = key.decode("latin-1").lower()
            if name in _FIELDS:
                fields[name] = value.decode("latin-1")
        raw_path = scope.get("raw_path") or quote(scope["path"]).encode("ascii")
        answer = _lookup(directory, rest, _Request(
            scope["method"], raw_path.partition(b"?")[0], scope.get("query_string", b""),
            fields))
        headers = [(k.lower().encode("latin-1"), v.encode("latin-1"))
                   for k, v in answer.headers]
        await send({"type": "http.response.start", "status": answer.status,
                    "headers": headers})
        if answer.fd < 0 or scope["method"] == "HEAD" or answer.count == 0:
            if answer.fd >= 0:
                os.close(answer.fd)
            await send({"type": "http.response.body", "body": answer.body})
            return
        try:
            whole = answer.offset == 0 and answer.count == answer.size
            if whole and "http.response.pathsend" in scope.get("extensions", {}):
                await send({"type": "http.response.pathsend", "path": answer.path})
                return
            offset, left = answer.offset, answer.count
            while left > 0:
                piece = os.pread(answer.fd, min(_PIECE, left), offset)
                if not piece:
                    raise OSError(f"{answer.path} ended early")
                offset += len(piece)
                left -= len(piece)
                await send({"type": "http.response.body", "body": piece,
                            "more_body": left > 0})
        finally:
            os.close(answer.fd)


_REASONS = {200: "OK", 206: "Partial Content", 301: "Moved Permanently", 304: "Not Modified",
            400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            416: "Range Not Satisfiable"}


def _reason(status: int) -> str:
    return _REASONS.get(status, "")
