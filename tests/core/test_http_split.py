"""The request heads the guard validated reach Mongoose's http_cb already split
(http_split.pxi), not parsed a second time by mg_http_parse(): for every head the split
answers for, its message is byte for byte what mg_http_parse() gives; the heads it leaves to
mg_http_parse() are those where Mongoose does more than split (UTF-8 checks, the repeated
fields it refuses, a Content-Length it reads differently, more fields than fit)."""

from __future__ import annotations

import random

import pytest

from cymongoose import _mongoose

FILLED = [
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /a/b?c=d&e HTTP/1.1\r\nHost: x\r\nX-A:  spaced  \r\nX-B:\ttabbed\t\r\n\r\n",
    b"GET /? HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /a??b HTTP/1.1\r\nHost: x\r\nEmpty:\r\nAlso-Empty:   \r\n\r\n",
    b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
    b"POST /p HTTP/1.1\r\nHost: x\r\ncontent-length: 0\r\n\r\n",
    b"POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    b"GET http://example.com:8080/c?d HTTP/1.1\r\nHost: example.com:8080\r\n\r\n",
    b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
    b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
    b"GET / HTTP/1.0\r\n\r\n",
    b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    b"DELETE /x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\nCookie: a=b; c=d\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nX: 1\r\nX: 2\r\n\r\n",  # repeated, not one Mongoose refuses
]

LEFT_TO_MONGOOSE = [
    b"GET / HTTP/1.1\r\nHost: x\r\nCookie: a\r\nCookie: b\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nAuthorization: a\r\nAuthorization: b\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nConnection: a\r\nconnection: b\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
    b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nX: caf\xc3\xa9\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nX: \xff\r\n\r\n",
    b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(129)) + b"\r\n",
]


@pytest.mark.parametrize("head", FILLED)
def test_the_split_gives_what_mg_http_parse_gives(head: bytes) -> None:
    assert _mongoose._split_agrees(head) == (True, True)


@pytest.mark.parametrize("head", LEFT_TO_MONGOOSE)
def test_heads_mongoose_reads_differently_are_left_to_it(head: bytes) -> None:
    assert _mongoose._split_agrees(head) == (False, True)


def test_generated_heads_agree() -> None:
    rng = random.Random(22)
    token = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~"
    for _ in range(2000):
        method = "".join(rng.choice(token) for _ in range(rng.randint(1, 8)))
        path = "/" + "".join(rng.choice("abc/%=&?-._~") for _ in range(rng.randint(0, 30)))
        lines = [f"{method} {path} HTTP/1.{rng.randint(0, 1)}", "Host: h"]
        for _ in range(rng.randint(0, 127)):
            name = "".join(rng.choice(token) for _ in range(rng.randint(1, 12)))
            if name.lower() in ("content-length", "transfer-encoding", "authorization",
                                "cookie", "connection"):
                continue
            value = "".join(rng.choice("abc xyz,;=\t\"") for _ in range(rng.randint(0, 20)))
            lines.append(f"{name}:{rng.choice(['', ' ', '  ', chr(9)])}{value}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode()
        filled, same = _mongoose._split_agrees(head)
        assert same, head
        assert filled or len(lines) > 129, head
