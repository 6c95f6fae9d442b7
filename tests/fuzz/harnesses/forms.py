"""The small parsers an app calls on request data: form variables (http_var), multipart
bodies (http_parse_multipart), glob patterns (match), URL parts and URL encoding, on
arbitrary input. The first byte picks the parser; NUL bytes separate its arguments.
Differential where a reference exists: url_encode against urllib's unquote, match against
the glob run as a set of pattern positions (glob_reference), a different algorithm; the
captures are pieces of the string, in order."""

from __future__ import annotations

import urllib.parse

import cymongoose._mongoose as cm

from ..wire import fields

SEEDS = [
    b"\x00a=1&b=%41%2&c\x00b",
    b"\x01--x\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.txt\"\r\n\r\n"
    b"data\r\n--x\r\nContent-Disposition: form-data; name=g\r\n\r\nv\r\n--x--\r\n",
    b"\x02/api/v1/users/42\x00/api/*/users/#",
    b"\x02a?c/d\x00a\\?c/*",
    b"\x03https://u:p@[::1]:8443/p?q#f",
    b"\x04h\xc3\xa9llo w/rld?&=%",
]


def glob_reference(s: str, pattern: str) -> bool:
    """Our glob over characters (`?` one character, `*` a run without '/', `#` any run) as
    a set of pattern positions moved along s, each set a bit mask: linear in len(s) for a
    given pattern, where a regular expression backtracks exponentially on many stars."""
    p: list[str] = []
    for c in pattern:  # a run of '*'/'#' matches what its widest member matches
        if c in "*#" and p and p[-1] in "*#":
            p[-1] = "#" if "#" in (c, p[-1]) else "*"
        else:
            p.append(c)
    stars = sum(1 << i for i, c in enumerate(p) if c in "*#")
    hashes = sum(1 << i for i, c in enumerate(p) if c == "#")
    any_char = sum(1 << i for i, c in enumerate(p) if c == "?")
    consumes: dict[str, int] = {}

    def closure(states: int) -> int:
        return states | ((states & stars) << 1)  # a star may match nothing

    states = closure(1)
    for ch in s:
        if ch not in consumes:
            consumes[ch] = any_char | sum(1 << i for i, c in enumerate(p)
                                          if c == ch and c not in "*#?")
        stay = hashes if ch == "/" else stars
        states = closure(((states & consumes[ch]) << 1) | (states & stay))
        if not states:
            return False
    return bool(states >> len(p) & 1)


def _multipart(body: bytes) -> None:
    offset = 0
    for _ in range(len(body) + 1):
        nxt, part = cm.http_parse_multipart(body, offset)
        if part is None:
            assert nxt == 0
            return
        assert offset < nxt <= len(body), (offset, nxt, len(body))
        assert isinstance(part["name"], str) and isinstance(part["filename"], str)
        assert part["body"] in body
        offset = nxt
    raise AssertionError("http_parse_multipart never ended")


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def one_input(data: bytes) -> None:
    if not data:
        return
    kind, rest = data[0] % 5, data[1:]
    if kind == 0:
        buf, name = fields(rest, 2)
        value = cm.http_var(buf, _text(name))
        assert value is None or isinstance(value, str)
    elif kind == 1:
        _multipart(rest)
    elif kind == 2:
        s, pattern = (_text(f) for f in fields(rest, 2))
        matched, captures = cm.match(s, pattern)
        assert matched == glob_reference(s, pattern), (s, pattern, matched)
        if matched:  # in order, each a piece of s
            at = 0
            for cap in captures:
                found = s.find(cap, at)
                assert found >= 0, (s, pattern, captures)
                at = found + len(cap)
    elif kind == 3:
        url = _text(rest).replace("\0", "")
        assert 0 <= cm.url_port(url) < 65536
        for part in (cm.url_host(url), cm.url_user(url), cm.url_pass(url), cm.url_uri(url)):
            assert isinstance(part, str)
        assert isinstance(cm.url_is_ssl(url), bool)
    else:
        text = _text(rest)
        encoded = cm.url_encode(text)
        assert encoded.isascii() and " " not in encoded, encoded
        assert urllib.parse.unquote(encoded, errors="strict") == text, (text, encoded)
