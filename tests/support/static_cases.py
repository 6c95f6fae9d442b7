"""The static-file HTTP cases every static path answers alike (raw `serve_dir`, `--static`
under WSGI and ASGI), checked against nginx serving the same tree (`gzip_static on`,
`gzip_vary on`) where the behaviour should match, and our own choices where it differs
(several ranges get the whole file; br and zstd siblings, which nginx-light cannot send)."""

from __future__ import annotations

from email.utils import formatdate

from .http_client import HttpConnection, Response, get, get_as_sent
from .static_tree import Precompressed

NGINX_GZIP_STATIC = "gzip_static on; gzip_vary on;"

# The fields compared with nginx's, when the answer carries them.
_COMPARED = ("content-length", "content-range", "content-encoding", "vary", "location")


def _ask(port: int, method: str, target: str, headers: list[tuple[str, str]]) -> Response:
    with HttpConnection(port) as c:
        return c.request(method, target, headers)


def _same(ours: Response, theirs: Response, what: str, etag: bool = True) -> None:
    assert ours.status == theirs.status, (what, ours.status, theirs.status, ours.body)
    assert ours.body == theirs.body, what
    for name in _COMPARED:
        mine, nginx = ours.header(name), theirs.header(name)
        if name == "location" and nginx is not None:
            # nginx writes an absolute URL, we the path: the same place.
            assert mine is not None and nginx.endswith(mine), (what, mine, nginx)
            continue
        assert mine == nginx, (what, name, mine, nginx)
    if etag:
        assert ours.header("etag") == theirs.header("etag"), what
    if ours.status in (200, 206, 304):
        assert ours.header("last-modified") == theirs.header("last-modified"), what
    assert ours.header("date"), what


def compare_with_nginx(port: int, nginx: int, prefix: str, files: Precompressed) -> None:
    """The requests whose answers must match nginx's (status, body and the fields above)."""
    page, plain = f"{prefix}/pc/page.txt", f"{prefix}/pc/plain.txt"
    first = get(nginx, plain)
    etag, modified = first.header("etag"), first.header("last-modified")
    assert etag and modified
    future = formatdate(files.mtime + 10 * 365 * 86400, usegmt=True)
    cases: list[tuple[str, str, list[tuple[str, str]]]] = [
        ("GET", plain, []),
        ("HEAD", plain, []),
        ("GET", plain, [("Range", "bytes=0-3")]),
        ("GET", plain, [("Range", "bytes=5-")]),
        ("GET", plain, [("Range", "bytes=-3")]),  # a suffix: the last three bytes
        ("GET", plain, [("Range", "bytes=-100")]),  # longer than the file: all of it
        ("GET", plain, [("Range", "bytes=3-1000")]),  # the end clipped
        ("GET", plain, [("Range", "bytes=100-")]),  # past the end: 416, bytes */21
        ("GET", plain, [("Range", "lines=1-2")]),  # another unit: ignored
        ("GET", plain, [("If-None-Match", etag)]),
        ("GET", plain, [("If-None-Match", "W/" + etag)]),  # weak comparison
        ("GET", plain, [("If-None-Match", '"nope", ' + etag)]),
        ("GET", plain, [("If-None-Match", "*")]),
        ("GET", plain, [("If-None-Match", '"nope"')]),
        ("HEAD", plain, [("If-None-Match", etag)]),
        ("GET", plain, [("If-Modified-Since", modified)]),
        ("GET", plain, [("If-Modified-Since", future)]),  # in the future: ignored
        ("GET", plain, [("If-Modified-Since", "yesterday")]),
        ("GET", plain, [("If-None-Match", '"nope"'), ("If-Modified-Since", modified)]),
        ("GET", plain, [("Range", "bytes=0-3"), ("If-Range", etag)]),
        ("GET", plain, [("Range", "bytes=0-3"), ("If-Range", '"old"')]),  # changed: all
        ("GET", plain, [("Range", "bytes=0-3"), ("If-Range", modified)]),
        ("GET", page, []),  # identity, with Vary: siblings exist
        ("GET", page, [("Accept-Encoding", "gzip")]),
        ("GET", page, [("Accept-Encoding", "gzip;q=0, identity")]),
        ("HEAD", page, [("Accept-Encoding", "gzip")]),
        ("GET", f"{prefix}/pc/dir?x=1&y=2", []),  # to the slash, the query kept
        ("GET", f"{prefix}/pc/dir/", []),
        ("GET", f"{prefix}/pc/plain.txt/", []),  # a file URL with a slash names no file
        ("GET", f"{prefix}/pc/missing.txt", []),
        ("POST", plain, []),
        ("DELETE", plain, []),
    ]
    for method, target, headers in cases:
        ours, theirs = (_ask(port, method, target, headers),
                        _ask(nginx, method, target, headers))
        what = f"{method} {target} {headers}"
        if ours.status in (404, 405, 301, 416):
            # Error pages differ in wording; the status, the redirect's place and the size
            # a 416 gives must not.
            assert ours.status == theirs.status, (what, ours.status, theirs.status)
            if ours.status == 301:
                _same_location(ours, theirs, what)
            if ours.status == 416:
                assert ours.header("content-range") == theirs.header("content-range"), what
            assert ours.header("date"), what
            continue
        gz = any(k == "Accept-Encoding" and v == "gzip" for k, v in headers)
        _same(ours, theirs, what, etag=not gz)  # a sibling's ETag is ours to choose
        if method == "HEAD":
            assert ours.body == b"", what


def _same_location(ours: Response, theirs: Response, what: str) -> None:
    mine, nginx = ours.header("location"), theirs.header("location")
    assert mine is not None and nginx is not None and nginx.endswith(mine), (what, mine,
                                                                             nginx)


def check_our_choices(port: int, prefix: str, files: Precompressed) -> None:
    """Where we choose differently from nginx, or where nginx-light has nothing to compare."""
    page, plain = f"{prefix}/pc/page.txt", f"{prefix}/pc/plain.txt"
    # Several ranges: the whole file, never a multipart body (see docs/server-behaviour.md).
    for spec in ("bytes=0-1,3-4", "bytes=0-0,-1", "bytes=" + ",".join(["0-0"] * 500)):
        r = _ask(port, "GET", plain, [("Range", spec)])
        assert r.status == 200 and r.body == files.plain, spec[:40]
    # A malformed field, or a range that ends before it starts, is ignored (RFC 9110
    # 14.1.1, 14.2; nginx answers 416 to both).
    for spec in ("bytes=abc", "bytes=5-2", "bytes=1-2-3", "bytes=", "bytes=-", "bytes=+1-2"):
        r = _ask(port, "GET", plain, [("Range", spec)])
        assert r.status == 200 and r.body == files.plain, spec
    # A huge number is no crash: past the end.
    r = _ask(port, "GET", plain, [("Range", "bytes=99999999999999999999999-")])
    assert r.status == 416 and r.header("content-range") == "bytes */21"
    # The sibling chosen by Accept-Encoding: zstd > br > gzip on equal q, q-values first.
    for ae, coding, body in (("gzip, br, zstd", "zstd", files.zst), ("br, gzip", "br", files.br),
                             ("zstd;q=0.5, gzip", "gzip", files.gz), ("identity", None,
                                                                      files.page),
                             ("gzip;q=x", None, files.page)):  # malformed: identity
        r = _ask(port, "GET", page, [("Accept-Encoding", ae)])
        assert r.status == 200 and r.header("content-encoding") == coding, ae
        assert r.body == body and r.header("vary") == "Accept-Encoding", ae
        assert (r.header("content-type") or "").startswith("text/plain"), ae
    # Each representation has its own ETag; a range applies to the one chosen.
    ident = _ask(port, "GET", page, [])
    br = _ask(port, "GET", page, [("Accept-Encoding", "br")])
    assert ident.header("etag") != br.header("etag")
    assert (br.header("etag") or "").endswith('-br"')
    r = _ask(port, "GET", page, [("Accept-Encoding", "br"), ("Range", "bytes=-4")])
    assert r.status == 206 and r.body == files.br[-4:]
    assert r.header("content-encoding") == "br"
    r = _ask(port, "GET", page, [("Accept-Encoding", "br"),
                                 ("If-None-Match", br.header("etag") or "")])
    assert r.status == 304 and r.header("vary") == "Accept-Encoding"
    # No sibling: no Vary. 405 says what is allowed.
    assert get(port, plain).header("vary") is None
    r = _ask(port, "POST", plain, [])
    assert r.status == 405 and r.header("allow") == "GET, HEAD" and r.header("date")
    # And the server goes on serving after all that.
    assert get_as_sent(port, plain).body == files.plain
