"""Malformed-input corpus, judged against h11 as the reference strict parser.

Each case is sent on a fresh connection. For every case:
- the requests the app sees are a prefix of what h11 reads from the same bytes (never a
  request framed differently, never a smuggled one);
- our output is valid HTTP/1.1 framing for the requests it answers (h11 client-side);
- when h11 rejects the input, the request it rejects is not answered 2xx;
- the statuses are exactly the expected ones, a refusal is the last response and the
  connection is closed after it, and each refusal leaves one debug entry in the
  `cymongoose` logger.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

import pytest

from .support import Server, exchange, get, h11_oracle, parse_responses

MAX_BODY = 1024 * 1024
H = b"Host: x\r\n"


def req(line: bytes = b"GET / HTTP/1.1", *headers: bytes, body: bytes = b"",
        host: bool = True) -> bytes:
    head = line + b"\r\n" + (H if host else b"") + b"".join(h + b"\r\n" for h in headers)
    return head + b"\r\n" + body


def post(*headers: bytes, body: bytes = b"", target: bytes = b"/") -> bytes:
    return req(b"POST " + target + b" HTTP/1.1", *headers, body=body)


def chunked(body: bytes, *extra: bytes) -> bytes:
    return post(b"Transfer-Encoding: chunked", *extra, body=body)


SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
X30 = tuple(b"X-Filler-%d: %d" % (i, i) for i in range(30))

# (id, bytes, expected statuses in order)
CASES: list[tuple[str, bytes, tuple[int, ...]]] = [
    # Request line
    ("rl-valid", req(), (200,)),
    ("rl-lowercase-method", req(b"get / HTTP/1.1"), (200,)),
    ("rl-extension-method", req(b"PURGE /x HTTP/1.1"), (200,)),
    ("rl-empty-method", req(b" / HTTP/1.1"), (400,)),
    ("rl-double-space", req(b"GET  / HTTP/1.1"), (400,)),
    ("rl-tab-separator", req(b"GET\t/ HTTP/1.1"), (400,)),
    ("rl-trailing-space", req(b"GET / HTTP/1.1 "), (400,)),
    ("rl-missing-version", req(b"GET /"), (400,)),
    ("rl-missing-target", req(b"GET HTTP/1.1"), (400,)),
    ("rl-extra-token", req(b"GET / HTTP/1.1 x"), (400,)),
    ("rl-lowercase-protocol", req(b"GET / http/1.1"), (400,)),
    ("rl-version-2.0", req(b"GET / HTTP/2.0"), (505,)),
    ("rl-version-0.9", req(b"GET / HTTP/0.9"), (505,)),
    ("rl-version-1.2", req(b"GET / HTTP/1.2"), (200,)),  # served as 1.1 (RFC 9110 §2.5)
    ("rl-version-1.10", req(b"GET / HTTP/1.10"), (400,)),
    ("rl-version-short", req(b"GET / HTTP/1"), (400,)),
    ("rl-version-letters", req(b"GET / HTTP/a.b"), (400,)),
    ("rl-nul-in-method", req(b"G\x00T / HTTP/1.1"), (400,)),
    ("rl-nul-in-target", req(b"GET /\x00 HTTP/1.1"), (400,)),
    ("rl-ctl-in-target", req(b"GET /\x01 HTTP/1.1"), (400,)),
    ("rl-del-in-target", req(b"GET /\x7f HTTP/1.1"), (400,)),
    ("rl-utf8-target", req("GET /é HTTP/1.1".encode()), (400,)),
    ("rl-space-in-target", req(b"GET /a b HTTP/1.1"), (400,)),
    ("rl-query-only-target", req(b"GET ?x HTTP/1.1"), (400,)),
    ("rl-bad-scheme", req(b"GET 1http://x/ HTTP/1.1"), (400,)),
    ("rl-asterisk", req(b"OPTIONS * HTTP/1.1"), (200,)),
    ("rl-absolute-form", req(b"GET http://example.com/p?q=1 HTTP/1.1"), (200,)),
    ("rl-connect-authority", req(b"CONNECT example.com:443 HTTP/1.1"), (200,)),
    ("rl-method-with-slash", req(b"GE/T / HTTP/1.1"), (400,)),
    ("rl-leading-crlf", b"\r\n" + req(), (400,)),
    ("rl-leading-lf", b"\n" + req(), (400,)),
    ("rl-bare-lf-lines", b"GET / HTTP/1.1\nHost: x\n\n", (400,)),
    ("rl-bare-cr", b"GET / HTTP/1.1\rHost: x\r\n\r\n", (400,)),
    ("rl-uri-too-long", req(b"GET /" + b"a" * 9000 + b" HTTP/1.1"), (414,)),
    ("rl-uri-at-limit", req(b"GET /" + b"a" * 8191 + b" HTTP/1.1"), (200,)),
    ("rl-method-too-long", req(b"A" * 20000 + b" / HTTP/1.1"), (431,)),
    ("rl-head", req(b"HEAD /h HTTP/1.1"), (200,)),
    ("rl-only-crlf", b"\r\n\r\n", (400,)),
    ("rl-binary-garbage", bytes(range(256)), (400,)),
    ("rl-tls-on-plain", b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"\x00" * 40, (400,)),
    # Header fields
    ("hd-no-host-http11", req(host=False), (400,)),
    ("hd-no-host-http10", req(b"GET / HTTP/1.0", host=False), (200,)),
    ("hd-duplicate-host", req(b"GET / HTTP/1.1", b"Host: y"), (400,)),
    ("hd-empty-host", req(b"GET / HTTP/1.1", b"X-A: b", host=False).replace(
        b"X-A: b", b"Host:"), (200,)),
    ("hd-space-before-colon", req(b"GET / HTTP/1.1", b"X-A : b"), (400,)),
    ("hd-tab-before-colon", req(b"GET / HTTP/1.1", b"X-A\t: b"), (400,)),
    ("hd-empty-name", req(b"GET / HTTP/1.1", b": b"), (400,)),
    ("hd-bad-name-char", req(b"GET / HTTP/1.1", b"X(A): b"), (400,)),
    ("hd-utf8-name", req(b"GET / HTTP/1.1", "Xé: b".encode()), (400,)),
    ("hd-no-colon", req(b"GET / HTTP/1.1", b"X-A b"), (400,)),
    ("hd-obs-fold-space", req(b"GET / HTTP/1.1", b"X-A: a", b" b"), (400,)),
    ("hd-obs-fold-tab", req(b"GET / HTTP/1.1", b"X-A: a", b"\tb"), (400,)),
    ("hd-space-before-first", b"GET / HTTP/1.1\r\n Host: x\r\n\r\n", (400,)),
    ("hd-nul-in-value", req(b"GET / HTTP/1.1", b"X-A: a\x00b"), (400,)),
    ("hd-ctl-in-value", req(b"GET / HTTP/1.1", b"X-A: a\x01b"), (400,)),
    ("hd-del-in-value", req(b"GET / HTTP/1.1", b"X-A: a\x7fb"), (400,)),
    ("hd-bare-cr-in-value", req(b"GET / HTTP/1.1", b"X-A: a\rb"), (400,)),
    ("hd-bare-lf-line", b"GET / HTTP/1.1\r\nX-A: a\nHost: x\r\n\r\n", (400,)),
    ("hd-cr-in-name", req(b"GET / HTTP/1.1", b"X\rA: b"), (400,)),
    ("hd-obs-text-value", req(b"GET / HTTP/1.1", "X-A: café".encode()), (200,)),
    ("hd-trailing-whitespace", req(b"GET / HTTP/1.1", b"X-A: a \t "), (200,)),
    ("hd-empty-value", req(b"GET / HTTP/1.1", b"X-A:"), (200,)),
    ("hd-colon-in-value", req(b"GET / HTTP/1.1", b"X-A: a:b"), (200,)),
    ("hd-100-fields", req(b"GET / HTTP/1.1", *(b"X-%d: v" % i for i in range(99))), (200,)),
    ("hd-101-fields", req(b"GET / HTTP/1.1", *(b"X-%d: v" % i for i in range(100))), (431,)),
    ("hd-200-fields", req(b"GET / HTTP/1.1", *(b"X-%d: v" % i for i in range(199))), (431,)),
    ("hd-huge-value", req(b"GET / HTTP/1.1", b"X-A: " + b"a" * 20000), (431,)),
    ("hd-head-too-large", req(b"GET / HTTP/1.1", *(b"X-%d: " % i + b"v" * 300
                                                    for i in range(60))), (431,)),
    ("hd-large-head-ok", req(b"GET / HTTP/1.1", *(b"X-%d: " % i + b"v" * 200
                                                   for i in range(50))), (200,)),
    ("hd-duplicate-authorization", req(b"GET / HTTP/1.1", b"Authorization: a",
                                       b"Authorization: b"), (400,)),
    ("hd-duplicate-cookie", req(b"GET / HTTP/1.1", b"Cookie: a=1", b"Cookie: b=2"), (400,)),
    # List fields on several lines are one list (RFC 9110 §5.3).
    ("hd-repeated-connection", req(b"GET / HTTP/1.1", b"Connection: keep-alive",
                                   b"Connection: close"), (200,)),
    ("hd-repeated-expect", req(b"GET / HTTP/1.1", b"Expect: a", b"Expect: b"), (200,)),
    ("hd-unknown-expect", req(b"GET / HTTP/1.1", b"Expect: something"), (200,)),
    # Transfer-Encoding hidden behind 30 fields: 0.2.5 dropped it and read the body as a
    # second request.
    ("hd-te-as-31st", post(*X30, b"Transfer-Encoding: chunked", body=b"0\r\n\r\n" + SMUGGLED),
     (200, 200)),
    ("hd-te-as-31st-with-cl", post(*X30, b"Content-Length: 5",
                                   b"Transfer-Encoding: chunked", body=b"0\r\n\r\n"), (400,)),
    # Content-Length
    ("cl-valid", post(b"Content-Length: 5", body=b"hello"), (200,)),
    ("cl-zero", post(b"Content-Length: 0"), (200,)),
    ("cl-leading-zeros", post(b"Content-Length: 005", body=b"hello"), (200,)),
    ("cl-ows", post(b"Content-Length:   5  ", body=b"hello"), (200,)),
    ("cl-duplicate-same", post(b"Content-Length: 5", b"Content-Length: 5", body=b"hello"),
     (400,)),
    ("cl-duplicate-different", post(b"Content-Length: 5", b"Content-Length: 6",
                                    body=b"hello!"), (400,)),
    ("cl-list", post(b"Content-Length: 5, 5", body=b"hello"), (400,)),
    ("cl-negative", post(b"Content-Length: -1", body=b"hello"), (400,)),
    ("cl-plus-sign", post(b"Content-Length: +5", body=b"hello"), (400,)),
    ("cl-hex", post(b"Content-Length: 0x5", body=b"hello"), (400,)),
    ("cl-suffix", post(b"Content-Length: 5a", body=b"hello"), (400,)),
    ("cl-empty", post(b"Content-Length:", body=b"hello"), (400,)),
    ("cl-inner-space", post(b"Content-Length: 5 5", body=b"hello"), (400,)),
    ("cl-nul", post(b"Content-Length: 5\x00", body=b"hello"), (400,)),
    ("cl-huge", post(b"Content-Length: 99999999999999999999999"), (413,)),
    ("cl-over-limit", post(b"Content-Length: %d" % (MAX_BODY + 1)), (413,)),
    ("cl-body-shorter", post(b"Content-Length: 10", body=b"hello"), (408,)),
    ("cl-body-longer", post(b"Content-Length: 3", body=b"hello"), (200, 408)),
    ("cl-on-get", req(b"GET / HTTP/1.1", b"Content-Length: 3", body=b"abc"), (200,)),
    # Transfer-Encoding
    ("te-valid", chunked(b"5\r\nhello\r\n0\r\n\r\n"), (200,)),
    ("te-multi-chunk", chunked(b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"), (200,)),
    ("te-uppercase", post(b"Transfer-Encoding: CHUNKED", body=b"5\r\nhello\r\n0\r\n\r\n"),
     (200,)),
    ("te-ows", post(b"Transfer-Encoding:  chunked \t", body=b"5\r\nhello\r\n0\r\n\r\n"),
     (200,)),
    ("te-tab-before-value", post(b"Transfer-Encoding:\tchunked",
                                 body=b"5\r\nhello\r\n0\r\n\r\n"), (200,)),
    # RFC 9112 §6.3: chunked not the final coding (or not there, or twice) -> 400 and close;
    # a coding we lack before a final chunked -> 501 (§6.1).
    ("te-xchunked", post(b"Transfer-Encoding: xchunked", body=b"0\r\n\r\n"), (400,)),
    ("te-chunked-twice-in-list", post(b"Transfer-Encoding: chunked, chunked",
                                      body=b"0\r\n\r\n"), (400,)),
    ("te-chunked-gzip", post(b"Transfer-Encoding: chunked, gzip", body=b"0\r\n\r\n"), (400,)),
    ("te-gzip-chunked", post(b"Transfer-Encoding: gzip, chunked", body=b"0\r\n\r\n"), (501,)),
    ("te-identity", post(b"Transfer-Encoding: identity", body=b"hello"), (400,)),
    ("te-quoted", post(b'Transfer-Encoding: "chunked"', body=b"0\r\n\r\n"), (400,)),
    ("te-empty", post(b"Transfer-Encoding:", body=b"0\r\n\r\n"), (400,)),
    ("te-vertical-tab", post(b"Transfer-Encoding: chunked\x0b", body=b"0\r\n\r\n"), (400,)),
    ("te-nul", post(b"Transfer-Encoding: chunked\x00", body=b"0\r\n\r\n"), (400,)),
    ("te-duplicate-fields", post(b"Transfer-Encoding: chunked", b"Transfer-Encoding: chunked",
                                 body=b"0\r\n\r\n"), (400,)),
    ("te-http10", req(b"POST / HTTP/1.0", b"Transfer-Encoding: chunked",
                      body=b"5\r\nhello\r\n0\r\n\r\n"), (400,)),
    ("te-space-before-colon", post(b"Transfer-Encoding : chunked", body=b"0\r\n\r\n"), (400,)),
    ("te-obs-fold", post(b"Transfer-Encoding:", b" chunked", body=b"0\r\n\r\n"), (400,)),
    ("te-underscore-name", post(b"Transfer_Encoding: chunked", body=b"5\r\nhello\r\n0\r\n\r\n"),
     (200, 400)),
    ("te-after-cl", post(b"Content-Length: 5", b"Transfer-Encoding: chunked",
                         body=b"0\r\n\r\n"), (400,)),
    # Chunked bodies
    ("ch-extension", chunked(b"5;ext=1\r\nhello\r\n0\r\n\r\n"), (200,)),
    ("ch-0x-prefix", chunked(b"0x5\r\nhello\r\n0\r\n\r\n"), (400,)),
    ("ch-negative", chunked(b"-5\r\nhello\r\n0\r\n\r\n"), (400,)),
    ("ch-leading-space", chunked(b" 5\r\nhello\r\n0\r\n\r\n"), (400,)),
    ("ch-trailing-space", chunked(b"5 \r\nhello\r\n0\r\n\r\n"), (400,)),
    ("ch-non-hex", chunked(b"g\r\nhello\r\n0\r\n\r\n"), (400,)),
    # Leading zeros are allowed (RFC 9112 §7.1); nine significant digits are too many.
    ("ch-nine-chars-leading-zeros", chunked(b"000000005\r\nhello\r\n0\r\n\r\n"), (200,)),
    ("ch-nine-digits", chunked(b"100000000\r\nhello\r\n0\r\n\r\n"), (400,)),
    ("ch-over-limit", chunked(b"%x\r\n" % (MAX_BODY + 1)), (413,)),
    ("ch-total-over-limit", chunked(b"".join(b"%x\r\n" % 400000 + b"a" * 400000 + b"\r\n"
                                             for _ in range(3)) + b"0\r\n\r\n"), (413,)),
    ("ch-huge-size", chunked(b"ffffffff\r\n"), (413,)),
    ("ch-data-longer", chunked(b"5\r\nhelloX\r\n0\r\n\r\n"), (400,)),
    ("ch-data-shorter", chunked(b"5\r\nhel\r\n0\r\n\r\n"), (400,)),
    ("ch-bare-lf-size", chunked(b"5\nhello\r\n0\r\n\r\n"), (400,)),
    ("ch-bare-lf-data", chunked(b"5\r\nhello\n0\r\n\r\n"), (400,)),
    ("ch-bare-cr-size", chunked(b"5\rhello\r\n0\r\n\r\n"), (400,)),
    ("ch-trailer-field", chunked(b"5\r\nhello\r\n0\r\nX-T: y\r\n\r\n"), (200,)),
    # Framing fields may not be trailers (RFC 9110 §6.5.1); found by fuzzing against h11.
    ("ch-trailer-transfer-encoding",
     chunked(b"0\r\nTransfer-Encoding: chun(ked\r\n\r\n"), (400,)),
    ("ch-trailer-content-length", chunked(b"5\r\nhello\r\n0\r\ncontent-LENGTH: 5\r\n\r\n"),
     (400,)),
    ("ch-lowercase-hex", chunked(b"a\r\n0123456789\r\n0\r\n\r\n"), (200,)),
    ("ch-uppercase-hex", chunked(b"A\r\n0123456789\r\n0\r\n\r\n"), (200,)),
    ("ch-leading-zeros", chunked(b"0005\r\nhello\r\n0\r\n\r\n"), (200,)),
    ("ch-empty-size-line", chunked(b"\r\nhello\r\n0\r\n\r\n"), (400,)),
    ("ch-unterminated", chunked(b"5\r\nhello\r\n"), (408,)),
    ("ch-no-final-crlf", chunked(b"5\r\nhello\r\n0\r\n"), (408,)),
    # Request smuggling classics
    ("sm-cl-te", post(b"Content-Length: 6", b"Transfer-Encoding: chunked",
                      body=b"0\r\n\r\nG"), (400,)),
    ("sm-te-cl", post(b"Transfer-Encoding: chunked", b"Content-Length: 3",
                      body=b"8\r\nSMUGGLED\r\n0\r\n\r\n"), (400,)),
    ("sm-te-te", post(b"Transfer-Encoding: chunked", b"Transfer-encoding: cow",
                      body=b"0\r\n\r\n" + SMUGGLED), (400,)),
    ("sm-te-space-name-cl", post(b"Content-Length: 4", b"Transfer-Encoding : chunked",
                                 body=b"0\r\n\r\n"), (400,)),
    ("sm-te-xchunked-cl", post(b"Transfer-Encoding: xchunked", b"Content-Length: 4",
                               body=b"0\r\n\r\n"), (400,)),
    ("sm-cl-cl", post(b"Content-Length: 0", b"Content-Length: %d" % len(SMUGGLED),
                      body=SMUGGLED), (400,)),
    ("sm-body-looks-like-request", req(b"GET / HTTP/1.1", b"Content-Length: %d" % len(SMUGGLED),
                                       body=SMUGGLED), (200,)),
    ("sm-nul-in-te-name", post(b"Transfer-Encoding\x00: chunked", body=b"0\r\n\r\n"), (400,)),
    ("sm-te-in-fold", post(b"X-A: b", b" Transfer-Encoding: chunked", body=b"0\r\n\r\n"),
     (400,)),
    ("sm-head-with-body", req(b"HEAD / HTTP/1.1", b"Content-Length: 5", body=b"hello"), (200,)),
    ("sm-post-without-length", post(target=b"/a") + SMUGGLED, (200, 200)),
    # Pipelining, Connection and HTTP/1.0
    ("pl-three", req(b"GET /1 HTTP/1.1") + req(b"GET /2 HTTP/1.1") + req(b"GET /3 HTTP/1.1"),
     (200, 200, 200)),
    ("pl-ten", b"".join(req(b"GET /%d HTTP/1.1" % i) for i in range(10)), (200,) * 10),
    ("pl-valid-then-bad", req() + b"BAD\r\n\r\n", (200, 400)),
    ("pl-valid-then-oversized", req() + post(b"Content-Length: %d" % (MAX_BODY + 1)),
     (200, 413)),
    ("pl-close-then-more", req(b"GET /1 HTTP/1.1", b"Connection: close") + req(b"GET /2 HTTP/1.1"),
     (200,)),
    ("pl-http10-then-more", req(b"GET /1 HTTP/1.0") + req(b"GET /2 HTTP/1.1"), (200,)),
    ("pl-head-then-get", req(b"HEAD /1 HTTP/1.1") + req(b"GET /2 HTTP/1.1"), (200, 200)),
    ("pl-chunked-then-get", chunked(b"5\r\nhello\r\n0\r\n\r\n") + req(b"GET /2 HTTP/1.1"),
     (200, 200)),
    ("pl-expect-100-with-body", post(b"Content-Length: 5", b"Expect: 100-continue",
                                     body=b"hello"), (200,)),
    ("pl-http10-keep-alive", req(b"GET / HTTP/1.0", b"Connection: keep-alive", host=False),
     (200,)),
    ("pl-connection-close-token-list", req(b"GET / HTTP/1.1", b"Connection: foo, close"),
     (200,)),
]


@pytest.fixture(scope="module")
def corpus_server() -> Iterator[tuple[Server, list[logging.LogRecord]]]:
    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("cymongoose")
    handler = Collect(level=logging.DEBUG)
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        with Server(max_body_size=MAX_BODY, header_timeout_ms=1000, body_timeout_ms=1000,
                    keepalive_timeout_ms=300) as server:
            yield server, records
            assert not server.errors
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


def test_corpus_size() -> None:
    assert len(CASES) >= 100
    assert len({case[0] for case in CASES}) == len(CASES)


@pytest.mark.parametrize(("data", "expected"), [pytest.param(d, e, id=i) for i, d, e in CASES])
def test_malformed_input(corpus_server: tuple[Server, list[logging.LogRecord]], data: bytes,
                         expected: tuple[int, ...]) -> None:
    server, records = corpus_server
    oracle = h11_oracle(data)
    refusal = expected[-1] >= 300

    port: list[int] = []

    def enough(raw: bytes) -> bool:
        # Stop once the expected answers are in (a refusal is only complete with the close).
        if refusal:
            return False
        methods = [m for m, _, _ in server.seen_by(port[0])] if port else []
        return len(parse_responses(raw, methods, False).responses) >= len(expected)

    first_record = len(records)
    res = exchange(server.port, data, timeout=4.0, until=enough, server=server,
                   on_connect=port.append)
    seen = server.seen_by(res.local_port)

    # Same framing as the strict parser: the app sees a prefix of h11's requests, in order.
    assert seen == oracle.requests[:len(seen)], (seen, oracle)
    assert b"/smuggled" not in b"".join(t.encode() for _, t, _ in seen) or any(
        t == "/smuggled" for _, t, _ in oracle.requests)

    methods = [m for m, _, _ in seen]
    parsed = parse_responses(res.raw, methods, res.closed)
    assert parsed.error is None, (parsed, res.raw[:300])
    assert parsed.leftover == b"", res.raw[:300]
    statuses = tuple(r.status for r in parsed.responses)
    assert statuses == expected, (statuses, res.raw[:300], oracle)

    answered = sum(200 <= s < 300 for s in statuses)
    assert answered == len(seen)
    if oracle.verdict == "reject":
        # The request h11 rejects is never answered 2xx.
        assert answered <= len(oracle.requests), oracle
        assert refusal
    for response, (method, target, body) in zip(parsed.responses, seen, strict=False):
        if method == "CONNECT":
            continue  # h11 reads what follows a 2xx to CONNECT as tunnel data
        expected_body = b"" if method == "HEAD" else f"{method} {target} {len(body)}".encode()
        assert response.body == expected_body
    if refusal:
        assert res.closed, "a refused request must be followed by a close"
        last = parsed.responses[-1]
        assert last.headers.get("connection") == "close"
        pattern = re.compile(rf"refused a request from 127\.0\.0\.1:{res.local_port} ")
        assert server.call(lambda: True)  # the poll loop has run past the refusal
        logged = [r for r in records[first_record:] if pattern.search(r.getMessage())]
        assert len(logged) == 1 and logged[0].levelno == logging.DEBUG
        assert f": {expected[-1]}," in logged[0].getMessage()


def test_server_still_serves_after_corpus(
        corpus_server: tuple[Server, list[logging.LogRecord]]) -> None:
    server, _ = corpus_server
    assert get(server.port, "/canary") == (200, b"GET /canary 0")


SEEDS = [
    req(b"GET /a?b=c HTTP/1.1", b"Accept: */*"),
    post(b"Content-Length: 5", body=b"hello"),
    chunked(b"5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n"),
    req(b"GET /1 HTTP/1.1") + post(b"Content-Length: 2", body=b"hi") + req(b"HEAD /3 HTTP/1.1"),
    req(b"GET / HTTP/1.0", b"Connection: keep-alive", host=False),
]
SPECIAL = [b"\r", b"\n", b"\x00", b" ", b"\t", b":", b",", b"\r\n", b"\x7f", b"\xff", b"0",
           b"Transfer-Encoding: chunked\r\n", b"Content-Length: 3\r\n", b"\r\n\r\n"]


def mutations(count: int, seed: int = 20251122) -> list[bytes]:
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(count):
        data = bytearray(rng.choice(SEEDS))
        for _ in range(rng.randint(1, 3)):
            pos = rng.randrange(len(data) + 1)
            op = rng.randrange(4)
            if op == 0 and pos < len(data):
                data[pos] = rng.randrange(256)
            elif op == 1:
                data[pos:pos] = rng.choice(SPECIAL)
            elif op == 2:
                del data[pos:pos + rng.randint(1, 4)]
            else:
                end = min(len(data), pos + rng.randint(1, 20))
                data[pos:pos] = data[pos:end]
        out.append(bytes(data))
    return out


def test_mutation_fuzz(corpus_server: tuple[Server, list[logging.LogRecord]]) -> None:
    """Seeded random mutations of valid requests: whatever the bytes, the app sees what h11
    sees (or less), our output is well framed, and what h11 rejects is not answered 2xx."""
    from concurrent.futures import ThreadPoolExecutor

    server, _ = corpus_server
    cases = mutations(1000)

    def check(data: bytes) -> str | None:
        oracle = h11_oracle(data)
        res = exchange(server.port, data, timeout=4.0, server=server)
        seen = server.seen_by(res.local_port)
        if seen != oracle.requests[:len(seen)]:
            return f"framing differs from h11: {seen} vs {oracle}"
        methods = [m for m, _, _ in seen]
        parsed = parse_responses(res.raw, methods, res.closed)
        if parsed.error:  # the refused request was a HEAD: its refusal has no body
            parsed = parse_responses(res.raw, [*methods, "HEAD"], res.closed)
        if parsed.error or parsed.leftover:
            return f"badly framed output: {parsed}"
        statuses = [r.status for r in parsed.responses]
        answered = sum(200 <= s < 300 for s in statuses)
        if answered != len(seen) or any(s >= 300 for s in statuses[:-1]):
            return f"statuses {statuses} for {len(seen)} requests seen"
        if oracle.verdict == "reject" and answered > len(oracle.requests):
            return f"answered 2xx to a request h11 rejects: {oracle}"
        if not res.closed:
            return "connection neither answered to the end nor closed"
        return None

    with ThreadPoolExecutor(48) as pool:
        problems = [(data, p) for data, p in zip(cases, pool.map(check, cases), strict=True)
                    if p is not None]
    assert problems == []
    assert get(server.port, "/after-fuzz")[0] == 200
