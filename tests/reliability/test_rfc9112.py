"""RFC 9112 conformance of the request guard, with h11 as the differential reference.

A corpus of requests labelled by the RFC's grammar (valid or not) runs through our server,
both the buffered path (Mongoose's parser behind the guard) and the streamed one
(`stream_body=True`, what WSGI and ASGI use), and through h11:
- every valid request is answered 200, and the body the handler sees is the one h11 decodes;
- every invalid request is refused with the status the RFC asks for (buffered) or gets no
  2xx (streamed: the head was already delivered, so a bad body closes the connection);
- h11 rejects the invalid ones too, except the cases listed in H11_ACCEPTS, where h11 is
  more lenient than the grammar (it does not check Host, the target form, or chunk
  extensions beyond ";"); the list pins the differences so a change on either side shows.
  h11 accepts every valid one: where it is stricter than the grammar (a chunk size of more
  than 20 digits with leading zeros, BWS before a chunk-ext's ";"), the oracle
  (fuzz.reference.strict_framing) takes the difference out first.
"""

from __future__ import annotations

from typing import Any

import pytest

from .support import Server, cm, exchange, h11_oracle, parse_responses


def post_chunked(body: bytes, target: bytes = b"/c", *headers: bytes) -> bytes:
    return (b"POST " + target + b" HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
            + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + body)


def get(target: bytes = b"/", host: bytes | None = b"x", method: bytes = b"GET") -> bytes:
    head = method + b" " + target + b" HTTP/1.1\r\n"
    if host is not None:
        head += b"Host: " + host + b"\r\n"
    return head + b"\r\n"


MANY = b"".join(b"64;n=%d;q=\"a b\"\r\n" % i + bytes([65 + i % 26]) * 100 + b"\r\n"
                for i in range(300)) + b"0;end\r\nX-Sum: 1\r\n\r\n"

# (id, request bytes, expected status). Valid ones expect 200.
VALID: list[tuple[str, bytes]] = [
    ("ext-name", post_chunked(b"5;a\r\nhello\r\n0\r\n\r\n")),
    ("ext-token-value", post_chunked(b"5;a=1\r\nhello\r\n0\r\n\r\n")),
    ("ext-quoted-value", post_chunked(b'5;a="x y;z\\"q"\r\nhello\r\n0\r\n\r\n')),
    ("ext-several-bws", post_chunked(b"5 ; a = 1 ;b\t;c=\"\"\r\nhello\r\n0\r\n\r\n")),
    ("ext-on-last-chunk", post_chunked(b"5\r\nhello\r\n0;done=yes\r\n\r\n")),
    ("ext-every-chunk", post_chunked(b"2;x\r\nhe\r\n3;y=z\r\nllo\r\n0;w\r\n\r\n")),
    ("trailer-one", post_chunked(b"5\r\nhello\r\n0\r\nX-Checksum: abc\r\n\r\n")),
    ("trailer-several", post_chunked(b"5\r\nhello\r\n0\r\nA: 1\r\nB:2\r\nC: \t\r\n\r\n")),
    ("trailer-and-ext", post_chunked(b"5;a\r\nhello\r\n0;b\r\nX-T: y\r\n\r\n")),
    ("many-ext-chunks", post_chunked(MANY)),
    ("host-name-port", get(host=b"example.com:8080")),
    ("host-ipv4", get(host=b"127.0.0.1")),
    ("host-ipv6", get(host=b"[::1]:80")),
    ("host-empty", get(host=b"")),
    ("host-pct-encoded", get(host=b"a%2Db.example")),
    ("host-sub-delims", get(host=b"a!$&'()*+,;=b")),
    ("target-absolute", get(b"http://example.com/p?q=1")),
    ("target-asterisk", get(b"*", method=b"OPTIONS")),
    ("target-connect", get(b"example.com:443", method=b"CONNECT")),
    # RFC 9110 §2.5: a higher HTTP/1 minor version is served as 1.1.
    ("version-1.2", b"GET / HTTP/1.2\r\nHost: x\r\n\r\n"),
    ("version-1.9", b"GET / HTTP/1.9\r\nHost: x\r\nConnection: keep-alive\r\n\r\n"),
    # RFC 9110 §5.3: a list field's lines are one list.
    ("connection-two-lines", b"GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n"
                             b"X-A: 1\r\nconnection:x-foo\r\n\r\n"),
    ("connection-three-lines", b"GET / HTTP/1.1\r\nConnection: x-a\r\nHost: x\r\n"
                               b"Connection:  x-b \r\nConnection: x-c\r\nX-B: 2\r\n\r\n"),
    ("expect-two-lines", b"GET / HTTP/1.1\r\nHost: x\r\nExpect: x-a\r\nExpect: x-b\r\n\r\n"),
    ("connection-two-lines-body", post_chunked(b"5\r\nhello\r\n0\r\n\r\n", b"/c",
                                               b"Connection: keep-alive",
                                               b"Connection: x-foo")),
    # RFC 9112 §7.1: a chunk size may have any number of leading zeros.
    ("chunk-size-leading-zeros", post_chunked(b"000000005\r\nhello\r\n" + b"0" * 20
                                              + b"\r\n\r\n")),
    ("chunk-size-zeros-and-ext", post_chunked(b"0" * 30 + b"5;a=1\r\nhello\r\n00;b\r\n\r\n")),
]

INVALID: list[tuple[str, bytes, int]] = [
    ("ext-no-name", post_chunked(b"5;\r\nhello\r\n0\r\n\r\n"), 400),
    ("ext-empty-value", post_chunked(b"5;a=\r\nhello\r\n0\r\n\r\n"), 400),
    ("ext-open-quote", post_chunked(b'5;a="x\r\nhello\r\n0\r\n\r\n'), 400),
    ("ext-space-in-name", post_chunked(b"5;a b\r\nhello\r\n0\r\n\r\n"), 400),
    ("ext-trailing-bws", post_chunked(b"5;a \r\nhello\r\n0\r\n\r\n"), 400),
    ("size-then-bws", post_chunked(b"5 \r\nhello\r\n0\r\n\r\n"), 400),
    ("ext-control-char", post_chunked(b"5;a=\x01\r\nhello\r\n0\r\n\r\n"), 400),
    ("ext-too-long", post_chunked(b"5;" + b"a" * 5000 + b"\r\nhello\r\n0\r\n\r\n"), 400),
    ("trailer-space-in-name", post_chunked(b"5\r\nhello\r\n0\r\nX T: y\r\n\r\n"), 400),
    ("trailer-no-name", post_chunked(b"5\r\nhello\r\n0\r\n: y\r\n\r\n"), 400),
    ("trailer-no-colon", post_chunked(b"5\r\nhello\r\n0\r\nX-T y\r\n\r\n"), 400),
    ("trailer-obs-fold", post_chunked(b"5\r\nhello\r\n0\r\nX: y\r\n z\r\n\r\n"), 400),
    ("trailer-bare-lf", post_chunked(b"5\r\nhello\r\n0\r\nX: y\n\r\n"), 400),
    ("host-space", get(host=b"exa mple.com"), 400),
    ("host-userinfo", get(host=b"user@example.com"), 400),
    ("host-two-ports", get(host=b"example.com:80:90"), 400),
    ("host-port-letters", get(host=b"example.com:http"), 400),
    ("host-open-bracket", get(host=b"[::1"), 400),
    ("host-empty-brackets", get(host=b"[]"), 400),
    ("host-quoted", get(host=b'"example.com"'), 400),
    ("host-path", get(host=b"example.com/x"), 400),
    ("te-chunked-gzip", post_chunked(b"0\r\n\r\n").replace(b"chunked\r\n",
                                                          b"chunked, gzip\r\n"), 400),
    ("te-gzip", post_chunked(b"0\r\n\r\n").replace(b"chunked\r\n", b"gzip\r\n"), 400),
    ("te-gzip-chunked", post_chunked(b"0\r\n\r\n").replace(b"chunked\r\n",
                                                          b"gzip, chunked\r\n"), 501),
    ("target-authority-get", get(b"example.com:80"), 400),
    ("target-authority-options", get(b"example.com:443", method=b"OPTIONS"), 400),
    ("target-connect-origin", get(b"/x", method=b"CONNECT"), 400),
    ("target-connect-no-port", get(b"example.com", method=b"CONNECT"), 400),
]

# Where h11 (the reference) accepts what RFC 9112's grammar does not: it leaves Host and the
# request-target form to the application, takes anything after ";" in a chunk line, and
# reads trailer fields loosely (folded lines, bare LF).
H11_ACCEPTS = {
    "ext-no-name", "ext-empty-value", "ext-open-quote", "ext-space-in-name",
    "ext-trailing-bws", "size-then-bws", "ext-too-long", "ext-control-char",
    "trailer-obs-fold", "trailer-bare-lf",
    "host-space", "host-userinfo", "host-two-ports", "host-port-letters",
    "host-open-bracket", "host-empty-brackets", "host-quoted", "host-path",
    "target-authority-get", "target-authority-options", "target-connect-origin",
    "target-connect-no-port",
}


def _stream_app(conn: Any, ev: int, msg: Any) -> None:
    # Streamed listener: collect the body as it arrives, answer with what was read.
    if ev == cm.MG_EV_HTTP_HDRS:
        conn.userdata = bytearray()
    if ev in (cm.MG_EV_HTTP_HDRS, cm.MG_EV_READ, cm.MG_EV_POLL) and isinstance(
            conn.userdata, bytearray):
        conn.userdata += conn.body_read()
        if conn.body_complete:
            body = bytes(conn.userdata)
            conn.userdata = None
            conn.http_respond(200, [("Content-Type", "text/plain")], b"%d %s" % (
                len(body), body))


def _echo_app(conn: Any, ev: int, msg: Any) -> None:
    if ev == cm.MG_EV_HTTP_MSG:
        body = msg.body_bytes
        conn.reply(200, b"%d %s" % (len(body), body))


@pytest.fixture(scope="module")
def servers() -> Any:
    with Server(_echo_app) as buffered, Server(_stream_app, stream_body=True) as streamed:
        yield {"buffered": buffered, "streamed": streamed}


def _send(server: Server, data: bytes, pieces: int = 1) -> tuple[list[int], list[bytes]]:
    # Split at odd places so extensions and trailers arrive across reads.
    step = max(1, len(data) // pieces + 7)
    chunks = [data[i:i + step] for i in range(0, len(data), step)]
    res = exchange(server.port, chunks, pause=0.01 if pieces > 1 else 0.0, timeout=3,
                   until=lambda raw: raw.count(b"HTTP/1.1 ") >= 1 and b"\r\n\r\n" in raw,
                   grace=0.1)
    method = data.split(b" ", 1)[0].decode()
    parsed = parse_responses(res.raw, [method], res.closed)
    return [r.status for r in parsed.responses], [r.body for r in parsed.responses]


@pytest.mark.parametrize("path", ["buffered", "streamed"])
@pytest.mark.parametrize("case_id,data", VALID, ids=[c[0] for c in VALID])
def test_valid_requests_are_served(servers: Any, path: str, case_id: str, data: bytes) -> None:
    oracle = h11_oracle(data)
    assert oracle.verdict == "ok", (case_id, oracle)
    expected_body = oracle.requests[0][2] if oracle.requests else b"hello"
    for pieces in (1, 5):
        statuses, bodies = _send(servers[path], data, pieces)
        assert statuses == [200], (case_id, path, pieces, statuses)
        if data.startswith(b"POST"):
            assert bodies[0] == b"%d %s" % (len(expected_body), expected_body)


@pytest.mark.parametrize("case_id,data,status", INVALID, ids=[c[0] for c in INVALID])
def test_invalid_requests_are_refused(servers: Any, case_id: str, data: bytes,
                                      status: int) -> None:
    oracle = h11_oracle(data)
    h11_accepts = oracle.verdict == "ok"
    assert h11_accepts == (case_id in H11_ACCEPTS), (case_id, oracle)
    statuses, _ = _send(servers["buffered"], data)
    assert statuses == [status], (case_id, statuses)
    # Streamed: chunk framing errors come after the head was delivered (no status can be
    # sent any more, the connection is closed); head errors are refused as above.
    statuses, _ = _send(servers["streamed"], data)
    assert not any(200 <= s < 300 for s in statuses), (case_id, statuses)
    if not case_id.startswith(("ext-", "trailer-", "size-")):
        assert statuses == [status], (case_id, statuses)


def test_pipelined_after_extensions_and_trailers(servers: Any) -> None:
    # Cutting extensions and trailers out of the buffer must leave the next request intact.
    data = (post_chunked(b"5;a=1\r\nhello\r\n0\r\nX-T: y\r\n\r\n")
            + get(b"/next") + post_chunked(b"3;b\r\nabc\r\n0\r\n\r\n"))
    for path in ("buffered", "streamed"):
        res = exchange(servers[path].port, data, timeout=3,
                       until=lambda raw: raw.count(b"HTTP/1.1 200") >= 3, grace=0.1)
        parsed = parse_responses(res.raw, ["POST", "GET", "POST"], res.closed)
        assert [r.status for r in parsed.responses] == [200, 200, 200], (path, res.raw)
        assert parsed.responses[0].body == b"5 hello"
        assert parsed.responses[2].body == b"3 abc"
