"""The compression phase's two bodies, made deterministically (the same bytes on every run):
a JSON API answer of about 10 KiB and an HTML page of about 100 KiB, both with the
repetition real ones have (field names, markup) and the variety they have too (names,
numbers, dates, prose). Written under .cache/compression with the page's precompressed
sibling (page.html.gz, gzip -9 as a build step makes it); the apps (servers/compression_apps.py)
and nginx serve those files. Also the reference sizes: each body compressed by zlib and
zstandard themselves at a level, the yardstick of the ratio goal.
"""

from __future__ import annotations

import gzip
import json
import random
import zlib
from pathlib import Path

JSON_SIZE = 10 * 1024
HTML_SIZE = 100 * 1024
SEED = 39
# (id, file, Content-Type as the apps send it)
BODIES = [("json", "data.json", "application/json"),
          ("html", "page.html", "text/html; charset=utf-8")]

_FIRST = ["Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Margaret",
          "Dennis", "Radia", "Leslie", "Sophie", "John", "Shafi", "Tim", "Hedy", "Niklaus"]
_LAST = ["Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson",
         "Hamilton", "Ritchie", "Perlman", "Lamport", "Wilson", "McCarthy", "Goldwasser",
         "Berners-Lee", "Lamarr", "Wirth"]
_CITIES = ["Lisbon", "Oslo", "Kyoto", "Austin", "Nairobi", "Lyon", "Quito", "Dublin", "Perth",
           "Tallinn", "Recife", "Gdansk"]
_TAGS = ["admin", "beta", "billing", "support", "ops", "research", "sales", "mobile", "api",
         "design"]
_WORDS = ("the server sends each response compressed when the client accepts it and the body "
          "is long enough a stream is flushed after every write so that events arrive at "
          "once while whole bodies are compressed in one step with a known length caches "
          "keep one copy per coding because the answer varies by accept encoding data "
          "tables lists forms images scripts styles requests latency throughput memory "
          "window level ratio bytes network client browser proxy origin edge").split()


def json_body(size: int = JSON_SIZE, seed: int = SEED) -> bytes:
    """A page of user records, as an API lists them, cut to whole records near `size`."""
    rng = random.Random(seed)
    users: list[dict[str, object]] = []
    out = b""
    while True:
        i = len(users) + 1
        first, last = rng.choice(_FIRST), rng.choice(_LAST)
        users.append({
            "id": 1000 + i, "name": f"{first} {last}",
            "email": f"{first.lower()}.{last.lower()}{rng.randrange(100)}@example.org",
            "city": rng.choice(_CITIES), "active": rng.random() < 0.8,
            "score": round(rng.uniform(0, 100), 2),
            "created": f"2026-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}T"
                       f"{rng.randrange(24):02d}:{rng.randrange(60):02d}:00Z",
            "tags": rng.sample(_TAGS, rng.randrange(1, 4)),
        })
        doc = json.dumps({"page": 1, "per_page": len(users), "users": users},
                         separators=(",", ":")).encode()
        if len(doc) > size:
            return out
        out = doc


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randrange(8, 20))]
    return " ".join(words).capitalize() + "."


def html_body(size: int = HTML_SIZE, seed: int = SEED) -> bytes:
    """A catalogue page: head, navigation, articles and a table, closed near `size`."""
    rng = random.Random(seed)
    head = ('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<title>Catalogue</title>\n<link rel="stylesheet" href="/static/site.css">\n'
            '</head>\n<body>\n<nav class="top"><ul>'
            + "".join(f'<li><a href="/section/{t}">{t.title()}</a></li>' for t in _TAGS)
            + "</ul></nav>\n<main>\n")
    tail = "</main>\n<footer><p>Generated for the compression benchmark.</p></footer>\n" \
           "</body>\n</html>\n"
    parts = [head]
    length = len(head) + len(tail)
    n = 0
    while True:
        n += 1
        if n % 4:
            block = (f'<article class="item" id="item-{n}">\n<h2>{rng.choice(_FIRST)} '
                     f'{rng.choice(_LAST)}, {rng.choice(_CITIES)}</h2>\n<p>'
                     + " ".join(_sentence(rng) for _ in range(rng.randrange(2, 5)))
                     + f'</p>\n<p class="meta">Score <b>{rng.uniform(0, 100):.1f}</b>, '
                     f'<a href="/items/{n}">details</a></p>\n</article>\n')
        else:
            rows = "".join(
                f"<tr><td>{rng.randrange(10**6)}</td><td>{rng.choice(_FIRST)}</td>"
                f"<td>{rng.choice(_CITIES)}</td><td class=\"num\">{rng.uniform(0, 1e4):.2f}"
                "</td></tr>\n" for _ in range(rng.randrange(4, 9)))
            block = ('<table class="grid">\n<thead><tr><th>Order</th><th>Customer</th>'
                     f"<th>City</th><th>Total</th></tr></thead>\n<tbody>\n{rows}</tbody>\n"
                     "</table>\n")
        if length + len(block) > size:
            break
        parts.append(block)
        length += len(block)
    return ("".join(parts) + tail).encode()


def write(directory: Path) -> dict[str, Path]:
    """The two bodies and page.html.gz in `directory` (rewritten only when they differ)."""
    directory.mkdir(parents=True, exist_ok=True)
    made = {"json": json_body(), "html": html_body()}
    paths = {}
    for body_id, name, _ctype in BODIES:
        path = directory / name
        if not path.exists() or path.read_bytes() != made[body_id]:
            path.write_bytes(made[body_id])
        paths[body_id] = path
    gz = directory / "page.html.gz"
    data = gzip.compress(made["html"], compresslevel=9, mtime=0)
    if not gz.exists() or gz.read_bytes() != data:
        gz.write_bytes(data)
    paths["html.gz"] = gz
    return paths


def reference_sizes(body: bytes, level: int = 3) -> dict[str, int]:
    """The body compressed by the libraries themselves at `level`: gzip (zlib, with its
    18-byte gzip frame, as a server sends it) and zstd (zstandard, a frame with its size)."""
    out = {"gzip": len(gzip.compress(body, compresslevel=level, mtime=0))}
    try:
        import zstandard
    except ImportError:
        return out
    out["zstd"] = len(zstandard.ZstdCompressor(level=level).compress(body))
    return out


def decode(data: bytes, coding: str) -> bytes:
    """A response body decoded by its Content-Encoding ("identity": as it is)."""
    if coding == "gzip":
        return zlib.decompress(data, wbits=31)
    if coding == "zstd":
        import zstandard
        # A streamed frame has no content size: the stream reader takes those too.
        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    if coding == "identity":
        return data
    raise ValueError(f"unknown coding {coding!r}")
