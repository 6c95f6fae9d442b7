"""`--static URL=DIR`: a WSGI middleware that answers GET/HEAD under URL from DIR, and hands
everything else to the app. Files leave as `wsgi.file_wrapper`, which the WSGI server sends
with sendfile(2) from the loop, so a static file costs no Python per byte."""

from __future__ import annotations

import mimetypes
import os
import stat
from collections.abc import Iterable
from email.utils import formatdate, parsedate_to_datetime
from typing import Any

from .typedefs import StartResponse, WSGIApp

__all__ = ["StaticFiles", "parse_mount"]


def parse_mount(spec: str) -> tuple[str, str]:
    """`/static=./public` -> ("/static", "/abs/public"); ValueError saying what is wrong."""
    url, sep, directory = spec.partition("=")
    if not sep or not url.startswith("/") or not directory:
        raise ValueError(f"--static {spec!r}: give it as URL=DIR, e.g. /static=./public")
    path = os.path.realpath(directory)
    if not os.path.isdir(path):
        raise ValueError(f"--static {spec!r}: {directory!r} is not a directory")
    return url.rstrip("/") or "/", path


class StaticFiles:
    """Serve the files under each (url prefix, directory) mount; `app` gets the rest."""

    def __init__(self, app: WSGIApp, mounts: Iterable[tuple[str, str]]) -> None:
        self.app = app
        # Longest prefix first, so /static/img=... wins over /static=...
        self.mounts = sorted(((u, os.path.realpath(d)) for u, d in mounts),
                             key=lambda m: len(m[0]), reverse=True)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Any:
        path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
        for prefix, directory in self.mounts:
            if prefix == "/" or path == prefix or path.startswith(prefix + "/"):
                rest = path[len(prefix):] if prefix != "/" else path
                return self._serve(environ, start_response, directory, rest)
        return self.app(environ, start_response)

    def _serve(self, environ: dict[str, Any], start_response: StartResponse,
               directory: str, rest: str) -> Any:
        method = environ["REQUEST_METHOD"]
        if method not in ("GET", "HEAD"):
            return _plain(start_response, "405 Method Not Allowed", b"method not allowed\n",
                          [("Allow", "GET, HEAD")])
        # PATH_INFO is latin-1-decoded bytes (PEP 3333): back to the bytes, then UTF-8.
        try:
            relative = rest.encode("latin-1").decode("utf-8").lstrip("/")
        except UnicodeError:
            return _plain(start_response, "404 Not Found", b"not found\n")
        full = os.path.realpath(os.path.join(directory, relative))
        if full != directory and not full.startswith(directory + os.sep):
            return _plain(start_response, "404 Not Found", b"not found\n")  # ../ escapes
        if os.path.isdir(full):
            full = os.path.join(full, "index.html")
        try:
            fh = open(full, "rb")  # noqa: SIM115 - closed by the server via FileWrapper
        except OSError:
            return _plain(start_response, "404 Not Found", b"not found\n")
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            fh.close()
            return _plain(start_response, "404 Not Found", b"not found\n")
        last_modified = formatdate(st.st_mtime, usegmt=True)
        since = environ.get("HTTP_IF_MODIFIED_SINCE")
        if since:
            try:
                if int(st.st_mtime) <= parsedate_to_datetime(since).timestamp():
                    fh.close()
                    start_response("304 Not Modified", [("Last-Modified", last_modified)])
                    return []
            except (TypeError, ValueError):
                pass
        ctype = mimetypes.guess_type(full)[0] or "application/octet-stream"
        if ctype.startswith("text/"):
            ctype += "; charset=utf-8"
        start_response("200 OK", [("Content-Type", ctype),
                                  ("Content-Length", str(st.st_size)),
                                  ("Last-Modified", last_modified)])
        return environ["wsgi.file_wrapper"](fh, 65536)


def _plain(start_response: StartResponse, status: str, body: bytes,
           extra: list[tuple[str, str]] | None = None) -> list[bytes]:
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"),
                            ("Content-Length", str(len(body))), *(extra or [])])
    return [body]
