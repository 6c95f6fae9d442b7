"""h11, the reference strict parser, on both sides of the wire: which requests a strict
server reads from the client's bytes (with their framing), and whether our reply is valid
HTTP/1.1 for the requests we answered."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

import h11

# Our limits bound the head; h11's own 16 KiB default must not be the reason it disagrees.
H11_HEAD_LIMIT = 1 << 20


@dataclass(frozen=True)
class Request:
    method: bytes
    target: bytes
    headers: tuple[tuple[bytes, bytes], ...]  # lower-case names, in wire order
    body: bytes


@dataclass
class Framing:
    requests: list[Request] = field(default_factory=list)
    stopped: str = "ok"  # "ok", "reject" (with why), "incomplete"
    why: str = ""


def normal_headers(pairs: list[tuple[bytes, bytes]]) -> tuple[tuple[bytes, bytes], ...]:
    """Names lower-cased, values without surrounding whitespace, every Connection line as
    one list (RFC 9110 §5.3: our guard joins them in place, h11 keeps them apart; empty
    members dropped), and what
    h11 normalises itself: Transfer-Encoding lower-cased, a Content-Length given more than
    once with one value kept once."""
    out: list[tuple[bytes, bytes]] = []
    connection: list[bytes] = []
    at = -1
    for name, value in pairs:
        name, value = name.lower(), value.strip(b" \t")
        if name == b"transfer-encoding":
            value = value.lower()
        elif name == b"content-length":
            values = {v.strip(b" \t") for v in value.split(b",")}
            if len(values) == 1:
                value = values.pop()
                if (name, value) in out:
                    continue
        if name == b"connection":
            if at < 0:
                at = len(out)
                out.append((name, b""))
            connection.append(value)
            continue
        out.append((name, value))
    # As a list (RFC 9110 §5.6.1): empty elements do not count, so an empty line adds none.
    members = [m.strip(b" \t") for line in connection for m in line.split(b",")]
    joined = b", ".join(m for m in members if m)
    if at >= 0 and joined:
        out[at] = (b"connection", joined)
    elif at >= 0:
        del out[at]
    return tuple(out)


def strict_framing(data: bytes, head_limit: int = H11_HEAD_LIMIT) -> Framing:
    """The complete requests h11 reads from data before it stops, and why it stops.

    Two deliberate differences in chunk-size lines are taken out first, where h11 is
    stricter than RFC 9112's grammar (tests/reliability/test_rfc9112.py lists both):
    - a chunk size may have any number of leading zeros (§7.1; our guard counts significant
      digits only), where h11 takes 20 hex digits in all;
    - BWS may come between the size and a chunk-ext's ";" (§7.1.1), which h11 refuses.
    A chunk-size line h11 refuses for these alone is given to it again without them."""
    for _ in range(8):
        framing = _strict_framing(data, head_limit)
        quoted = _REFUSED_CHUNK_LINE.search(framing.why)
        if framing.stopped != "reject" or quoted is None:
            return framing
        bad = bytes(ast.literal_eval(quoted.group(1)))
        good = _h11_chunk_line(bad)
        if good == bad or b"\r\n" + bad not in data:
            return framing
        data = data.replace(b"\r\n" + bad, b"\r\n" + good, 1)
    return framing


def _h11_chunk_line(line: bytes) -> bytes:
    """`line` as h11 takes it: the size's leading zeros dropped (one kept for a size of 0),
    and the BWS between the size and a ";" removed."""
    m = _CHUNK_SIZE.match(line)
    if m is None:
        return line
    size = m.group(1).lstrip(b"0") or b"0"
    rest = line[m.end(1):]
    if rest.lstrip(b" \t").startswith(b";"):
        rest = rest.lstrip(b" \t")
    return size + rest


_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]+)")

# h11's message for a refused chunk-size line quotes the line as a bytearray's repr.
_REFUSED_CHUNK_LINE = re.compile(
    r"illegal chunk header: bytearray\((b'(?:[^'\\]|\\.)*'|b\"(?:[^\"\\]|\\.)*\")\)")


def _strict_framing(data: bytes, head_limit: int) -> Framing:
    conn = h11.Connection(our_role=h11.SERVER, max_incomplete_event_size=head_limit)
    conn.receive_data(data)
    result = Framing()
    head: h11.Request | None = None
    body = bytearray()
    eof_sent = False
    try:
        while True:
            ev = conn.next_event()
            if ev is h11.NEED_DATA:
                if eof_sent:
                    result.stopped = "incomplete"
                    return result
                conn.receive_data(b"")
                eof_sent = True
                continue
            if isinstance(ev, h11.ConnectionClosed) or ev is h11.PAUSED:
                return result  # PAUSED: CONNECT or Upgrade took the stream over
            if isinstance(ev, h11.Request):
                head, body = ev, bytearray()
            elif isinstance(ev, h11.Data):
                body += ev.data
            elif isinstance(ev, h11.EndOfMessage):
                assert head is not None
                result.requests.append(Request(
                    bytes(head.method), bytes(head.target),
                    normal_headers([(bytes(n), bytes(v)) for n, v in head.headers.raw_items()]),
                    bytes(body)))
                if head.method == b"CONNECT":
                    return result
                conn.send(h11.Response(status_code=200, headers=[("Content-Length", "0")]))
                conn.send(h11.EndOfMessage())
                if h11.MUST_CLOSE in (conn.our_state, conn.their_state):
                    return result  # Connection: close or HTTP/1.0: nothing more is read
                conn.start_next_cycle()
    except h11.RemoteProtocolError as exc:
        result.stopped = "incomplete" if eof_sent else "reject"
        result.why = str(exc)
        return result


@dataclass
class Response:
    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes


def parse_replies(raw: bytes, methods: list[bytes], closed: bool) -> list[Response]:
    """Our bytes read as a client that sent `methods` in order, and then one request more
    (the one a refusal answers, a GET or a HEAD, whose refusal has no body), would: every
    response must frame cleanly. Raises h11.RemoteProtocolError for a reply a strict client
    cannot read either way."""
    try:
        return _parse_replies(raw, [*methods, b"GET"], closed)
    except h11.RemoteProtocolError:
        return _parse_replies(raw, [*methods, b"HEAD"], closed)


def _parse_replies(raw: bytes, methods: list[bytes], closed: bool) -> list[Response]:
    conn = h11.Connection(our_role=h11.CLIENT, max_incomplete_event_size=H11_HEAD_LIMIT)
    out: list[Response] = []
    pending = list(methods)
    conn.receive_data(raw)
    if closed:
        conn.receive_data(b"")
    while pending and conn.trailing_data[0]:
        method = pending.pop(0)
        conn.send(h11.Request(method=method, target="/", headers=[("Host", "x")]))
        conn.send(h11.EndOfMessage())
        status = 0
        headers: tuple[tuple[bytes, bytes], ...] = ()
        body = bytearray()
        while True:
            try:
                ev = conn.next_event()
            except h11.RemoteProtocolError:
                if status or conn.trailing_data[0]:
                    raise
                return out  # closed after a 100 Continue: no final response was owed
            if ev is h11.PAUSED:  # a 2xx to CONNECT: what follows is the tunnel's
                out.append(Response(status, headers, bytes(body)))
                return out
            if ev is h11.NEED_DATA or isinstance(ev, h11.ConnectionClosed):
                if status:
                    raise h11.RemoteProtocolError(f"response {status} cut short")
                return out
            if isinstance(ev, h11.InformationalResponse):
                continue
            if isinstance(ev, h11.Response):
                status = ev.status_code
                headers = tuple((bytes(n), bytes(v)) for n, v in ev.headers.raw_items())
            elif isinstance(ev, h11.Data):
                body += ev.data
            elif isinstance(ev, h11.EndOfMessage):
                out.append(Response(status, headers, bytes(body)))
                break
        if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
            return out
        if conn.their_state is h11.SWITCHED_PROTOCOL:
            return out
        conn.start_next_cycle()
    return out


def judge(sent: bytes, seen: list[Request], raw: bytes, closed: bool) -> None:
    """What every HTTP harness asserts of one exchange: each request the app was given, h11
    reads from `sent` with the same framing (and never one h11 refuses), each got its
    answer, the reply (`raw`) is valid HTTP/1.1 for a strict client, the delivered requests
    were answered 200 and anything after them is a 4xx or 5xx refusal."""
    strict = strict_framing(sent)
    theirs = strict.requests
    assert len(seen) <= len(theirs), (
        f"request {len(theirs) + 1} was delivered; h11: {strict.stopped} {strict.why}")
    for i, (ours, ref) in enumerate(zip(seen, theirs, strict=False)):
        if ref.target.endswith(b"?") and ref.target.count(b"?") == 1:
            ref = Request(ref.method, ref.target[:-1], ref.headers, ref.body)  # "/a?" is "/a"
        assert ours == ref, f"request {i + 1} framed differently:\n ours {ours}\n h11  {ref}"
    replies = parse_replies(raw, [r.method for r in seen], closed)
    assert len(replies) >= len(seen), (
        f"{len(seen)} requests delivered, {len(replies)} answered: {raw[:300]!r}")
    for i, response in enumerate(replies):
        if i < len(seen):
            assert response.status == 200, f"request {i + 1} answered {response.status}"
        else:
            assert 400 <= response.status < 600, f"an undelivered request got {response.status}"
