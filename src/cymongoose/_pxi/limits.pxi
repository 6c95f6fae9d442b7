# HTTP limits, timeouts and strict request framing, enforced in front of Mongoose's HTTP parser.
#
# mg_http_listen() installs Mongoose's http_cb as the listener's protocol handler (c->pfn) and
# accepted connections inherit it. _install_http_guard() swaps in _http_guard, which sees every
# event of an accepted connection before the user's handler (mg_call runs pfn, then fn). The
# guard validates the request at the front of c->recv with rules stricter than Mongoose's
# (see docs/server-behaviour.md) and only then lets http_cb parse it, one request at a time:
# http_cb is handed a receive buffer cut just after that request, so a request the guard has
# not checked is never parsed, and pipelined requests are answered strictly in order.
# The guard is plain C on the connection's HttpGuard (reached through c->pfn_data): it runs
# without the GIL and takes it only to log a refusal.

from libc.string cimport memmove

cdef extern from "<sys/socket.h>" nogil:
    int shutdown(int fd, int how)
    enum:
        SHUT_WR

cdef HttpLimits _DEFAULT_LIMITS = HttpLimits(
    max_header_count=100, max_header_size=16384, max_uri_size=8192,
    max_body_size=16 * 1024 * 1024, header_timeout_ms=30000, body_timeout_ms=60000,
    keepalive_timeout_ms=5000, tls_handshake_timeout_ms=10000, send_timeout_ms=60000)

cdef tuple _LIMIT_NAMES = (
    "max_header_count", "max_header_size", "max_uri_size", "max_body_size",
    "header_timeout_ms", "body_timeout_ms", "keepalive_timeout_ms", "tls_handshake_timeout_ms",
    "send_timeout_ms")

cdef enum:
    # After refusing a request the server keeps reading (and discarding) for a while before
    # it closes: closing a socket with unread input makes the kernel send a reset, which can
    # destroy the refusal before the client reads it (a client still uploading a 413 body).
    _LINGER_MAX_MS = 10000
    _LINGER_IDLE_MS = 1000
    # Body progress: bytes each body_timeout_ms window must bring (or the rest of the body).
    _MIN_PROGRESS = 1024
    _MAX_TIMEOUT_MS = 7 * 24 * 3600 * 1000
    _MAX_BODY = 1 << 30
    _MAX_HEAD = 16 * 1024 * 1024

cdef enum:
    _PH_NONE = 0  # not guarded (client connections, or not attached yet)
    _PH_WAIT = 1  # waiting for the first byte of a request (new or keep-alive connection)
    _PH_HEAD = 2  # part of a request head buffered
    _PH_BODY = 3  # head accepted, body still arriving
    _PH_RESP = 4  # request handed to the handler, response not complete yet
    _PH_LINGER = 5  # refused: input discarded until the client goes or the linger ends
    _PH_STREAM = 6  # head handed to the handler, body streaming (http_stream.pxi)

cdef enum:
    _BODY_NONE = 0
    _BODY_LENGTH = 1
    _BODY_CHUNKED = 2

cdef enum:
    _GF_HEAD = 1  # method is HEAD: the response carries no body
    _GF_HTTP10 = 2
    _GF_CLOSE = 4  # close once this response is complete
    _GF_KEEPALIVE = 8  # HTTP/1.0 request that asked for keep-alive
    _GF_EXPECT = 16  # Expect: 100-continue
    _GF_CONTINUED = 32  # 100 Continue sent
    _GF_DELIVERED = 64  # http_cb handed the request to the handler (MG_EV_HTTP_MSG seen)
    _GF_IN_PARSER = 128  # http_cb is running: its events are Mongoose's, not the socket's
    _GF_SHUT = 256  # linger: our write side is shut down

cdef enum:
    _SEEN_CL = 1
    _SEEN_TE = 2
    _SEEN_HOST = 4
    _SEEN_CONNECTION = 8
    _SEEN_AUTH = 16
    _SEEN_COOKIE = 32
    _SEEN_EXPECT = 64
    # Streamed listeners never run Mongoose's parser, so repeated Cookie fields (which an
    # HTTP/2-to-1 proxy may send) are passed on for the app server to join with "; ".
    _SEEN_COOKIES_OK = 128

cdef enum:
    _C_TCHAR = 1  # token character (RFC 9110 §5.6.2)
    _C_VCHAR = 2  # visible ASCII, the request-target alphabet
    _C_FIELD = 4  # field-value character: VCHAR, SP, HTAB, obs-text
    _C_HEX = 8
    _C_REGNAME = 16  # unreserved / sub-delims (RFC 3986): a reg-name without pct-encoding

cdef enum:
    _CHUNK_LINE_MAX = 4096  # a chunk-size line with its extensions

cdef unsigned char _CC[256]


cdef void _init_char_classes() noexcept:
    cdef int ch
    cdef bytes extra = b"!#$%&'*+-.^_`|~"
    cdef bytes regname = b"-._~!$&'()*+,;="
    for ch in range(256):
        _CC[ch] = 0
        if 0x21 <= ch <= 0x7e:
            _CC[ch] |= _C_VCHAR | _C_FIELD
            if (0x30 <= ch <= 0x39 or 0x41 <= ch <= 0x5a or 0x61 <= ch <= 0x7a
                    or ch in extra):
                _CC[ch] |= _C_TCHAR
            if (0x30 <= ch <= 0x39 or 0x41 <= ch <= 0x5a or 0x61 <= ch <= 0x7a
                    or ch in regname):
                _CC[ch] |= _C_REGNAME
            if 0x30 <= ch <= 0x39 or 0x41 <= ch <= 0x46 or 0x61 <= ch <= 0x66:
                _CC[ch] |= _C_HEX
        elif ch == 0x20 or ch == 0x09 or ch >= 0x80:
            _CC[ch] |= _C_FIELD


_init_char_classes()

# Mongoose's http_cb (static in mongoose.c, exported by build_fixes.py).
cdef mg.mg_event_handler_t _mg_http_cb = mg.cym_http_cb


cdef struct HeadInfo:
    size_t head_len
    size_t content_length
    int body_kind
    int flags
    int status
    const char *why


cdef inline int _bad(HeadInfo *h, int status, const char *why) noexcept nogil:
    h.status = status
    h.why = why
    return -1


cdef inline int _more(HeadInfo *h, size_t n, const HttpLimits *lim) noexcept nogil:
    # Ran out of bytes: either the head is still arriving or it has outgrown its limit.
    if n > lim.max_header_size:
        return _bad(h, 431, b"request head larger than max_header_size")
    return 0


cdef bint _ieq(const unsigned char *p, size_t n, const char *lower) noexcept nogil:
    """Case-insensitive comparison of p[:n] with a lower-case C string."""
    cdef size_t i
    cdef unsigned char ch
    for i in range(n):
        if lower[i] == 0:
            return False
        ch = p[i]
        if 0x41 <= ch <= 0x5a:
            ch += 32
        if ch != <unsigned char>lower[i]:
            return False
    return lower[n] == 0


cdef const char *_target_error(const unsigned char *p, size_t n, bint connect) noexcept nogil:
    """NULL when p[:n] is a request target this method may have (RFC 9112 §3.2): origin-form,
    asterisk-form, absolute-form (scheme "://"), and authority-form for CONNECT only.
    Mongoose splits the query at '?', so a target that starts with it would leave the parser
    an empty URI: refused here, with a status, instead."""
    cdef size_t k = 1
    if connect:
        if _authority_ok(p, n, True):
            return NULL
        return b"CONNECT target not host:port"
    if p[0] == c'/' or (n == 1 and p[0] == c'*'):
        return NULL
    if not _alpha(p[0]):
        return b"malformed request target"
    while k < n and (_alpha(p[k]) or 0x30 <= p[k] <= 0x39 or p[k] == c'+' or p[k] == c'-'
                     or p[k] == c'.'):
        k += 1
    if k + 2 < n and p[k] == c':' and p[k + 1] == c'/' and p[k + 2] == c'/':
        return NULL
    if _authority_ok(p, n, True):
        return b"authority-form target on a request other than CONNECT"
    return b"malformed request target"


cdef bint _authority_ok(const unsigned char *p, size_t n, bint need_port) noexcept nogil:
    # uri-host [ ":" port ] (RFC 9110 §7.2, RFC 3986 §3.2.2): an IP-literal in brackets or a
    # reg-name (IPv4 included), no userinfo; the port digits only. Host may be empty (§7.2).
    cdef size_t i = 0
    if n == 0:
        return not need_port
    if p[0] == c'[':
        i = 1
        while i < n and (_CC[p[i]] & _C_REGNAME or p[i] == c':'):
            i += 1
        if i == 1 or i == n or p[i] != c']':
            return False
        i += 1
    else:
        while i < n:
            if _CC[p[i]] & _C_REGNAME:
                i += 1
            elif p[i] == c'%' and i + 2 < n and _CC[p[i + 1]] & _C_HEX and _CC[p[i + 2]] & _C_HEX:
                i += 3
            else:
                break
    if i == n:
        return not need_port
    if p[i] != c':' or (need_port and i + 1 == n):
        return False
    i += 1
    while i < n:
        if not 0x30 <= p[i] <= 0x39:
            return False
        i += 1
    return True


cdef inline size_t _skip_ows(const unsigned char *p, size_t i, size_t n) noexcept nogil:
    while i < n and (p[i] == 32 or p[i] == 9):
        i += 1
    return i


cdef size_t _quoted_string_end(const unsigned char *p, size_t i, size_t n) noexcept nogil:
    """p[i] is a DQUOTE: the index after the closing one, or 0 if the quoted-string is
    malformed (RFC 9110 §5.6.4)."""
    cdef unsigned char ch
    i += 1
    while i < n:
        ch = p[i]
        if ch == 34:
            return i + 1
        if ch == 92:
            if i + 1 == n or not (_CC[p[i + 1]] & _C_FIELD):
                return 0
            i += 2
        elif _CC[ch] & _C_FIELD:
            i += 1
        else:
            return 0
    return 0


cdef bint _chunk_ext_ok(const unsigned char *p, size_t n) noexcept nogil:
    """p[:n], everything between a chunk size and its CRLF, is a valid chunk-ext (RFC 9112
    §7.1.1): *( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] ). Unknown
    extensions must be ignored, so valid ones are accepted and dropped, never interpreted."""
    cdef size_t i = 0, start, j
    while i < n:
        i = _skip_ows(p, i, n)
        if i == n or p[i] != c';':
            return False
        i = _skip_ows(p, i + 1, n)
        start = i
        while i < n and _CC[p[i]] & _C_TCHAR:
            i += 1
        if i == start:
            return False
        j = _skip_ows(p, i, n)
        if j < n and p[j] == c'=':
            i = _skip_ows(p, j + 1, n)
            if i < n and p[i] == 34:
                i = _quoted_string_end(p, i, n)
                if i == 0:
                    return False
            else:
                start = i
                while i < n and _CC[p[i]] & _C_TCHAR:
                    i += 1
                if i == start:
                    return False
    return True


cdef bint _field_line_ok(const unsigned char *p, size_t n) noexcept nogil:
    """p[:n] (without CRLF) is a field line: token ":" then field-value characters. Used for
    trailer fields (RFC 9112 §7.1.2), which are checked and then discarded."""
    cdef size_t i = 0
    while i < n and _CC[p[i]] & _C_TCHAR:
        i += 1
    if i == 0 or i == n or p[i] != c':':
        return False
    i += 1
    while i < n:
        if not (_CC[p[i]] & _C_FIELD):
            return False
        i += 1
    return True


cdef const char *_transfer_coding_error(const unsigned char *p, size_t n,
                                        int *status) noexcept nogil:
    """For a Transfer-Encoding other than exactly "chunked": RFC 9112 §6.3 wants 400 and a
    close when chunked is not the final coding (the body's end cannot be known); §6.1 lets
    a server answer 501 to a coding it does not implement (gzip, chunked)."""
    cdef size_t i = 0, start, end, codings = 0, chunked = 0
    cdef bint last_chunked = False
    while i < n:
        i = _skip_ows(p, i, n)
        start = i
        while i < n and _CC[p[i]] & _C_TCHAR:
            i += 1
        end = i
        i = _skip_ows(p, i, n)
        if i < n and p[i] != c',':
            status[0] = 400
            return b"malformed Transfer-Encoding"
        i += 1
        if end == start:
            continue  # empty list element (RFC 9110 §5.6.1)
        codings += 1
        last_chunked = _ieq(p + start, end - start, b"chunked")
        if last_chunked:
            chunked += 1
    if codings == 0:
        status[0] = 400
        return b"malformed Transfer-Encoding"
    if not last_chunked or chunked > 1:
        status[0] = 400
        return b"chunked is not the final transfer coding, once"
    status[0] = 501
    return b"transfer coding other than chunked"


cdef inline bint _alpha(unsigned char ch) noexcept nogil:
    return 0x41 <= ch <= 0x5a or 0x61 <= ch <= 0x7a


cdef void _connection_tokens(const unsigned char *v, size_t n, int *flags) noexcept nogil:
    cdef size_t k = 0, s
    while k < n:
        while k < n and (v[k] == 32 or v[k] == 9 or v[k] == c','):
            k += 1
        s = k
        while k < n and not (v[k] == 32 or v[k] == 9 or v[k] == c','):
            k += 1
        if _ieq(v + s, k - s, b"close"):
            flags[0] |= _GF_CLOSE
        elif _ieq(v + s, k - s, b"keep-alive"):
            flags[0] |= _GF_KEEPALIVE


cdef int _field(HeadInfo *h, const unsigned char *name, size_t nlen,
                const unsigned char *v, size_t vlen, int *seen,
                const unsigned char **te, size_t *te_len) noexcept nogil:
    """Rules for the fields that decide framing, and for the duplicates Mongoose would drop
    the connection on without an answer."""
    cdef size_t k
    cdef size_t value = 0
    if nlen == 14 and _ieq(name, nlen, b"content-length"):
        if seen[0] & _SEEN_CL:
            return _bad(h, 400, b"duplicate Content-Length")
        seen[0] |= _SEEN_CL
        if vlen == 0:
            return _bad(h, 400, b"invalid Content-Length")
        for k in range(vlen):
            if not (0x30 <= v[k] <= 0x39):
                return _bad(h, 400, b"invalid Content-Length")
        if vlen > 18:
            return _bad(h, 413, b"Content-Length larger than max_body_size")
        for k in range(vlen):
            value = value * 10 + (v[k] - 0x30)
        h.content_length = value
    elif nlen == 17 and _ieq(name, nlen, b"transfer-encoding"):
        if seen[0] & _SEEN_TE:
            return _bad(h, 400, b"duplicate Transfer-Encoding")
        seen[0] |= _SEEN_TE
        te[0] = v
        te_len[0] = vlen
    elif nlen == 4 and _ieq(name, nlen, b"host"):
        if seen[0] & _SEEN_HOST:
            return _bad(h, 400, b"duplicate Host")
        seen[0] |= _SEEN_HOST
        if not _authority_ok(v, vlen, False):
            return _bad(h, 400, b"Host is not a valid authority")
    elif nlen == 10 and _ieq(name, nlen, b"connection"):
        if seen[0] & _SEEN_CONNECTION:
            return _bad(h, 400, b"duplicate Connection")
        seen[0] |= _SEEN_CONNECTION
        _connection_tokens(v, vlen, &h.flags)
    elif nlen == 6 and _ieq(name, nlen, b"expect"):
        if seen[0] & _SEEN_EXPECT:
            return _bad(h, 400, b"duplicate Expect")
        seen[0] |= _SEEN_EXPECT
        if _ieq(v, vlen, b"100-continue"):
            h.flags |= _GF_EXPECT
    elif nlen == 13 and _ieq(name, nlen, b"authorization"):
        if seen[0] & _SEEN_AUTH:
            return _bad(h, 400, b"duplicate Authorization")
        seen[0] |= _SEEN_AUTH
    elif nlen == 6 and _ieq(name, nlen, b"cookie") and not (seen[0] & _SEEN_COOKIES_OK):
        if seen[0] & _SEEN_COOKIE:
            return _bad(h, 400, b"duplicate Cookie")
        seen[0] |= _SEEN_COOKIE
    return 0


cdef int _parse_head(const unsigned char *p, size_t n, const HttpLimits *lim,
                     HeadInfo *h) noexcept nogil:
    """Validate the request head at p[:n]. 1: complete and valid (h filled), 0: need more
    bytes, -1: refused (h.status, h.why). Never reads past p[n - 1]."""
    # Nothing past max_header_size is looked at: a head that has not ended by then is 431.
    cdef size_t m = n if n <= lim.max_header_size else lim.max_header_size
    cdef size_t i = 0, t0, n0, v0, v1, k
    cdef size_t count = 0
    cdef unsigned char ch
    cdef int seen = _SEEN_COOKIES_OK if lim.stream_body else 0
    cdef int r
    cdef bint connect, ok
    cdef const char *why
    cdef int status
    cdef const unsigned char *te = NULL
    cdef size_t te_len = 0
    cdef const char *version = b"HTTP/"
    memset(h, 0, sizeof(HeadInfo))

    while i < m and (_CC[p[i]] & _C_TCHAR):
        i += 1
    if i == m:
        return _more(h, n, lim)
    if p[i] != 32 or i == 0:
        return _bad(h, 400, b"malformed request line")
    if i == 4 and memcmp(p, b"HEAD", 4) == 0:
        h.flags |= _GF_HEAD
    connect = i == 7 and memcmp(p, b"CONNECT", 7) == 0
    i += 1
    t0 = i
    while i < m and (_CC[p[i]] & _C_VCHAR):
        i += 1
    if i - t0 > lim.max_uri_size:
        return _bad(h, 414, b"request target longer than max_uri_size")
    if i == m:
        return _more(h, n, lim)
    if p[i] != 32 or i == t0:
        return _bad(h, 400, b"malformed request line")
    why = _target_error(p + t0, i - t0, connect)
    if why != NULL:
        return _bad(h, 400, why)
    i += 1
    for k in range(10):  # "HTTP/" DIGIT "." DIGIT CRLF, checked as it arrives
        if i + k >= m:
            return _more(h, n, lim)
        ch = p[i + k]
        if k < 5:
            ok = ch == <unsigned char>version[k]
        elif k == 5 or k == 7:
            ok = 0x30 <= ch <= 0x39
        elif k == 6:
            ok = ch == c'.'
        elif k == 8:
            ok = ch == 13
        else:
            ok = ch == 10
        if not ok:
            return _bad(h, 400, b"malformed request line")
    if p[i + 5] != c'1' or p[i + 7] > c'1':
        return _bad(h, 505, b"HTTP version other than 1.0 and 1.1")
    if p[i + 7] == c'0':
        h.flags |= _GF_HTTP10
    i += 10

    while True:
        if i >= m:
            return _more(h, n, lim)
        ch = p[i]
        if ch == 13:
            if i + 1 >= m:
                return _more(h, n, lim)
            if p[i + 1] != 10:
                return _bad(h, 400, b"bare CR in request head")
            i += 2
            break
        if ch == 10:
            return _bad(h, 400, b"bare LF in request head")
        if ch == 32 or ch == 9:
            return _bad(h, 400, b"obsolete line folding or whitespace before a header name")
        count += 1
        if count > lim.max_header_count:
            return _bad(h, 431, b"more headers than max_header_count")
        n0 = i
        while i < m and (_CC[p[i]] & _C_TCHAR):
            i += 1
        if i >= m:
            return _more(h, n, lim)
        if p[i] != c':' or i == n0:
            return _bad(h, 400, b"malformed header name")
        k = i - n0
        i += 1
        while i < m and (p[i] == 32 or p[i] == 9):
            i += 1
        v0 = i
        while i < m and (_CC[p[i]] & _C_FIELD):
            i += 1
        if i >= m:
            return _more(h, n, lim)
        if p[i] != 13:
            if p[i] == 10:
                return _bad(h, 400, b"bare LF in request head")
            if p[i] == 0:
                return _bad(h, 400, b"NUL byte in header value")
            return _bad(h, 400, b"control character in header value")
        if i + 1 >= m:
            return _more(h, n, lim)
        if p[i + 1] != 10:
            return _bad(h, 400, b"bare CR in request head")
        v1 = i
        while v1 > v0 and (p[v1 - 1] == 32 or p[v1 - 1] == 9):
            v1 -= 1
        i += 2
        r = _field(h, p + n0, k, p + v0, v1 - v0, &seen, &te, &te_len)
        if r < 0:
            return r
    h.head_len = i

    if not (h.flags & _GF_HTTP10) and not (seen & _SEEN_HOST):
        return _bad(h, 400, b"HTTP/1.1 request without Host")
    if seen & _SEEN_TE:
        if h.flags & _GF_HTTP10:
            return _bad(h, 400, b"Transfer-Encoding in an HTTP/1.0 request")
        if seen & _SEEN_CL:
            return _bad(h, 400, b"both Content-Length and Transfer-Encoding")
        if not _ieq(te, te_len, b"chunked"):
            why = _transfer_coding_error(te, te_len, &status)
            return _bad(h, status, why)
        h.body_kind = _BODY_CHUNKED
    elif seen & _SEEN_CL:
        if h.content_length > lim.max_body_size:
            return _bad(h, 413, b"Content-Length larger than max_body_size")
        h.body_kind = _BODY_LENGTH if h.content_length else _BODY_NONE
    if h.flags & _GF_HTTP10:
        if not (h.flags & _GF_KEEPALIVE):
            h.flags |= _GF_CLOSE
        h.flags &= ~_GF_EXPECT
    if h.flags & _GF_CLOSE:
        h.flags &= ~_GF_KEEPALIVE
    if not (h.flags & _GF_HTTP10):
        h.flags &= ~_GF_KEEPALIVE  # only HTTP/1.0 needs keep-alive said back
    if h.body_kind == _BODY_NONE:
        h.flags &= ~_GF_EXPECT
    return 1


cdef inline size_t _hexval(unsigned char ch) noexcept nogil:
    if ch <= 0x39:
        return ch - 0x30
    return (ch | 0x20) - 0x61 + 10


cdef int _scan_chunks(mg.mg_connection *c, HttpGuard *g, const HttpLimits *lim,
                      HeadInfo *h) noexcept nogil:
    """Validate the chunked body after the head from where the last call stopped, and
    normalise it in place for Mongoose's decoder, which knows neither chunk extensions nor
    trailer fields: both are checked against RFC 9112 §7.1 and cut out (extensions must be
    ignored, trailers may be discarded). 1: complete (g.frame_len set), 0: need more, -1:
    refused. Linear overall: finished chunks are never looked at again, and what is cut
    out is closed up with one move per call (r reads the wire, w writes the normal form)."""
    cdef unsigned char *q = c.recv.buf + g.head_len
    cdef size_t avail = c.recv.len - g.head_len
    cdef size_t r = g.chunk_pos, w = g.chunk_pos
    cdef size_t j, e, t, k, size, digits, data
    cdef size_t wire_cap = 2 * lim.max_body_size + 65536
    cdef int result = 0
    while True:
        j = r
        size = 0
        digits = 0
        while j < avail and (_CC[q[j]] & _C_HEX):
            digits += 1
            if digits > 8:
                return _bad(h, 400, b"chunk size too long")
            size = size * 16 + _hexval(q[j])
            j += 1
        if j >= avail:
            break
        if digits == 0:
            return _bad(h, 400, b"invalid chunk size")
        e = j
        while e < avail and q[e] != 13 and q[e] != 10:
            e += 1
        if e - r > _CHUNK_LINE_MAX:
            return _bad(h, 400, b"chunk-size line longer than 4 KiB")
        if e + 1 >= avail:
            break
        if q[e] != 13:
            return _bad(h, 400, b"bare LF in chunk size line")
        if q[e + 1] != 10:
            return _bad(h, 400, b"bare CR in chunk size line")
        if not _chunk_ext_ok(q + j, e - j):
            return _bad(h, 400, b"invalid chunk size line or extension")
        data = e + 2
        if size == 0:
            # Trailer fields up to an empty line, counted against max_header_size.
            t = data
            while True:
                k = t
                while k < avail and q[k] != 13 and q[k] != 10:
                    k += 1
                if k - data > lim.max_header_size:
                    return _bad(h, 431, b"trailer fields larger than max_header_size")
                if k + 1 >= avail:
                    break
                if q[k] != 13:
                    return _bad(h, 400, b"bare LF in trailer fields")
                if q[k + 1] != 10:
                    return _bad(h, 400, b"bare CR in trailer fields")
                if k == t:
                    result = 1
                    break
                if not _field_line_ok(q + t, k - t):
                    return _bad(h, 400, b"malformed trailer field")
                t = k + 2
            if result == 0:
                break
            # The last chunk in its normal form: the size digits, CRLF, CRLF.
            memmove(q + w, q + r, j - r)
            w += j - r
            memcpy(q + w, b"\r\n\r\n", 4)
            w += 4
            r = k + 2
            break
        if g.decoded + size > lim.max_body_size:
            return _bad(h, 413, b"chunked body larger than max_body_size")
        if data + size + 2 > avail:
            break
        if q[data + size] != 13 or q[data + size + 1] != 10:
            return _bad(h, 400, b"chunk data not followed by CRLF")
        if w == r and e == j:
            w = data + size + 2  # already in normal form: nothing to move
        else:
            memmove(q + w, q + r, j - r)
            w += j - r
            q[w] = 13
            q[w + 1] = 10
            w += 2
            memmove(q + w, q + data, size + 2)
            w += size + 2
        r = data + size + 2
        g.decoded += size
        if w > wire_cap:
            return _bad(h, 413, b"chunked body framing overhead too large")
    if w != r:
        # Close up what was cut out; bytes after the body (a pipelined request) follow it.
        memmove(q + w, q + r, avail - r)
        c.recv.len -= r - w
    if result:
        g.frame_len = g.head_len + w
    else:
        g.chunk_pos = w
    return result


cdef size_t _find_head_end(const unsigned char *buf, size_t start, size_t end) noexcept nogil:
    """Offset just past the first CRLFCRLF in buf[start:end], or 0."""
    cdef size_t i = start
    while i + 3 < end:
        if buf[i] == 13 and buf[i + 1] == 10 and buf[i + 2] == 13 and buf[i + 3] == 10:
            return i + 4
        i += 1
    return 0


cdef void _scan_connection(const unsigned char *p, size_t n, bint *has,
                           bint *close) noexcept nogil:
    """Look for a Connection field (and its close token) in CRLF-separated field lines."""
    cdef size_t i = 0, s, c
    cdef int flags = 0
    cdef size_t e
    while i < n:
        s = i
        while i < n and p[i] != 10:
            i += 1
        e = i - 1 if i > s and p[i - 1] == 13 else i
        c = s
        while c < e and p[c] != c':':
            c += 1
        if c < e and _ieq(p + s, c - s, b"connection"):
            has[0] = True
            _connection_tokens(p + c + 1, e - c - 1, &flags)
        i += 1
    close[0] = (flags & _GF_CLOSE) != 0


cdef void _fix_response(mg.mg_connection *c, HttpGuard *g, size_t mark) noexcept nogil:
    """Make the response written since `mark` (synchronously, by any API: reply, serve_dir,
    Mongoose's own error pages) say and do what the request's framing requires."""
    cdef size_t s = mark, he = 0, n
    cdef bint has = False, close = False
    cdef const char *field = NULL
    while True:
        he = _find_head_end(c.send.buf, s, c.send.len)
        if he == 0:
            return
        if not (he - s > 12 and memcmp(c.send.buf + s, b"HTTP/1.", 7) == 0
                and c.send.buf[s + 9] == c'1'):
            break
        if c.send.buf[s + 10] == c'0' and c.send.buf[s + 11] == c'1':
            return  # 101 Switching Protocols: no longer HTTP
        s = he  # an interim 1xx response; the final one follows
    _scan_connection(c.send.buf + s, he - 2 - s, &has, &close)
    if close:
        g.flags |= _GF_CLOSE
    elif not has:
        if g.flags & _GF_CLOSE:
            field = b"Connection: close\r\n"
        elif g.flags & _GF_KEEPALIVE:
            field = b"Connection: keep-alive\r\n"
        if field != NULL:
            n = strlen(field)
            if mg.mg_iobuf_add(&c.send, he - 2, field, n):
                he += n
    if (g.flags & _GF_HEAD) and not c.is_resp and c.send.len > he:
        c.send.len = he  # RFC 9110 §9.3.2: whatever body was written is not sent


cdef const char *_connection_field(Connection conn, bint user_set,
                                   bint user_close) noexcept:
    """The Connection field reply() adds to its response (NULL: none), after noting a
    user-set one."""
    if conn._guard.phase != _PH_RESP and conn._guard.phase != _PH_STREAM:
        return NULL
    if user_close:
        conn._guard.flags |= _GF_CLOSE
    if user_set:
        return NULL
    if conn._guard.flags & _GF_CLOSE:
        return b"Connection: close\r\n"
    if conn._guard.flags & _GF_KEEPALIVE:
        return b"Connection: keep-alive\r\n"
    return NULL


# Prebuilt refusals (with and without body, the latter for HEAD), so that refusing needs
# neither the GIL nor any formatting.
cdef enum:
    _N_REFUSALS = 7
cdef int _REFUSAL_CODES[_N_REFUSALS]
cdef const char *_REFUSAL_DATA[_N_REFUSALS][2]
cdef size_t _REFUSAL_LEN[_N_REFUSALS][2]
cdef list _REFUSAL_KEEP = []


cdef void _init_refusals() noexcept:
    cdef int i
    cdef bytes full, head
    for i, code in enumerate((400, 408, 413, 414, 431, 501, 505)):
        reason = {400: "Bad Request", 408: "Request Timeout", 413: "Content Too Large",
                  414: "URI Too Long", 431: "Request Header Fields Too Large",
                  501: "Not Implemented", 505: "HTTP Version Not Supported"}[code]
        body = f"{reason}\n".encode("ascii")
        head = (f"HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode("ascii")
        full = head + body
        _REFUSAL_KEEP.extend((full, head))
        _REFUSAL_CODES[i] = code
        _REFUSAL_DATA[i][0] = full
        _REFUSAL_LEN[i][0] = len(full)
        _REFUSAL_DATA[i][1] = head
        _REFUSAL_LEN[i][1] = len(head)


_init_refusals()


cdef void _log_event(mg.mg_connection *c, int status, const char *why) noexcept nogil:
    """Debug entry on the `cymongoose` logger for a refusal (status > 0) or a close."""
    _take_gil_back(<GilSlot *>c.mgr.userdata)
    _log_event_gil(c, status, why)


cdef void _log_event_gil(mg.mg_connection *c, int status, const char *why) noexcept with gil:
    try:
        if _log.isEnabledFor(10):
            ip, port, _ = _addr_tuple(&c.rem)
            if status:
                _log.debug("refused a request from %s:%d (connection %d): %d, %s",
                           ip, port, c.id, status, why.decode("ascii"))
            else:
                _log.debug("closed connection %d from %s:%d: %s", c.id, ip, port,
                           why.decode("ascii"))
    except BaseException:
        pass


cdef inline void _reset_front(HttpGuard *g) noexcept nogil:
    g.head_len = 0
    g.frame_len = 0
    g.content_length = 0
    g.chunk_pos = 0
    g.decoded = 0
    g.body_kind = _BODY_NONE


cdef void _refuse(mg.mg_connection *c, HttpGuard *g, int status, const char *why,
                  bint head, uint64_t now) noexcept nogil:
    cdef int i = 0
    while i < _N_REFUSALS - 1 and _REFUSAL_CODES[i] != status:
        i += 1
    _log_event(c, status, why)
    mg.mg_send(c, _REFUSAL_DATA[i][head], _REFUSAL_LEN[i][head])
    c.recv.len = 0  # never parsed: not one byte of a refused request reaches a handler
    c.is_resp = 0
    _reset_front(g)
    g.flags = 0
    g.linger_until_ms = now + _LINGER_MAX_MS
    g.phase = _PH_LINGER
    g.deadline_ms = now + _LINGER_IDLE_MS


cdef void _response_done(mg.mg_connection *c, HttpGuard *g, uint64_t now) noexcept nogil:
    cdef int flags = g.flags
    cdef uint64_t ka = g.limits.keepalive_timeout_ms
    g.requests_seen += 1
    if g.body_ready:
        _cut(c, 0, g.body_ready)  # the unread rest of a streamed body
        g.body_ready = 0
    _reset_front(g)
    g.flags = 0
    g.seen_len = 0
    g.phase = _PH_WAIT
    g.deadline_ms = now + ka if ka else 0
    if flags & _GF_CLOSE:
        c.is_draining = 1  # flush the response, then close (Connection: close, HTTP/1.0)


cdef void _run_parser(mg.mg_connection *c, HttpGuard *g, size_t window) noexcept nogil:
    """Run Mongoose's http_cb on c->recv cut to its first `window` bytes, then put the rest
    back behind whatever http_cb left."""
    cdef size_t total = c.recv.len
    cdef unsigned char *buf = c.recv.buf
    cdef long zero = 0
    if window < total:
        c.recv.len = window
    g.flags |= _GF_IN_PARSER
    _mg_http_cb(c, mg.MG_EV_READ, <void *>&zero)
    g.flags &= ~_GF_IN_PARSER
    if window < total:
        # http_cb only deletes from the front (mg_iobuf_del moves and zeroes bytes below
        # `window`), so the cut-off tail is intact at buf + window.
        if c.recv.buf == buf and c.recv.len <= window:
            memmove(buf + c.recv.len, buf + window, total - window)
            c.recv.len += total - window
        else:
            c.is_closing = 1


cdef bint _adopt_protocol(mg.mg_connection *c, HttpGuard *g) noexcept nogil:
    """After a handler ran: keep the guard in front if it still should be. False when the
    connection has left HTTP (WebSocket, upload handler, user took the buffer)."""
    cdef mg.mg_event_handler_t pfn = c.pfn
    if pfn == <mg.mg_event_handler_t>_http_guard:
        return True
    if pfn == _mg_http_cb:
        c.pfn = <mg.mg_event_handler_t>_http_guard
        c.pfn_data = <void *>g
        return True
    if pfn == NULL or c.is_websocket or c.is_draining or c.is_closing or not c.is_resp:
        return False
    # serve_dir/serve_file installed Mongoose's file sender (c->pfn_data: its file), which
    # puts http_cb back when done (restore_http_cb). Run it from the guard so the guard
    # stays first.
    g.inner = pfn
    g.inner_data = c.pfn_data
    c.pfn = <mg.mg_event_handler_t>_http_guard
    c.pfn_data = <void *>g
    return True


cdef void _run_inner(mg.mg_connection *c, HttpGuard *g, int ev, void *ev_data) noexcept nogil:
    if g.inner == _mg_file_sender and (ev == mg.MG_EV_WRITE or ev == mg.MG_EV_POLL):
        _sendfile_body(c, <mg.mg_fd *>g.inner_data)  # http.pxi: zero-copy file bodies
    c.pfn_data = g.inner_data
    g.inner(c, ev, ev_data)
    if c.pfn != <mg.mg_event_handler_t>_http_guard:
        g.inner = NULL  # the file is sent; restore_http_cb put http_cb back
        g.inner_data = NULL
        c.pfn = <mg.mg_event_handler_t>_http_guard
    else:
        g.inner_data = c.pfn_data
    c.pfn_data = <void *>g


cdef void _deliver_front(mg.mg_connection *c, HttpGuard *g) noexcept nogil:
    cdef size_t mark = c.send.len
    g.phase = _PH_RESP
    g.deadline_ms = 0
    g.flags &= ~_GF_DELIVERED
    _run_parser(c, g, g.frame_len)
    if not _adopt_protocol(c, g):
        return
    if not (g.flags & _GF_DELIVERED):
        # http_cb refused what the guard accepted: a disagreement to look into, never a
        # reason to guess. It has already marked the connection for closing.
        c.is_draining = 1
        return
    _reset_front(g)
    if c.send.len > mark:
        _fix_response(c, g, mark)


cdef size_t _pipeline_cap(const HttpLimits *lim) noexcept nogil:
    return lim.max_header_size + 2 * lim.max_body_size + 65536


cdef void _grow_recv(mg.mg_connection *c, HttpGuard *g) noexcept nogil:
    # Mongoose grows a full receive buffer by MG_IO_SIZE, copying it each time: quadratic in
    # the body size (a 15 MiB upload took seconds). Double it instead, up to the request's
    # known size; never beyond what has arrived times two, so a large Content-Length that
    # is never sent costs no memory.
    cdef size_t want
    if c.recv.size - c.recv.len >= 16384 or c.recv.size < 65536:
        return
    want = c.recv.size * 2
    if g.body_kind == _BODY_LENGTH and want > g.frame_len:
        want = g.frame_len
    if want > c.recv.size:
        mg.mg_iobuf_resize(&c.recv, want)


cdef void _advance(mg.mg_connection *c, HttpGuard *g, uint64_t now) noexcept nogil:
    """Move the connection's request state as far as its buffered input allows."""
    cdef const HttpLimits *lim = g.limits
    cdef HeadInfo h
    cdef int r
    cdef bint fresh
    cdef size_t need
    cdef const char *cont = b"HTTP/1.1 100 Continue\r\n\r\n"
    while not c.is_closing:
        if g.phase == _PH_STREAM:
            if _stream_advance(c, g, now) <= 0:
                return
            g.phase = _PH_RESP
            continue
        if g.phase == _PH_LINGER:
            if c.recv.len:
                c.recv.len = 0
                g.deadline_ms = now + _LINGER_IDLE_MS
            return
        if g.phase == _PH_RESP:
            if c.is_resp:
                # Pipelined input waits for the response; it may not grow without bound.
                if c.recv.len > _pipeline_cap(lim):
                    _log_event(c, 0, b"pipelined input beyond one maximal request")
                    c.is_closing = 1
                return
            _response_done(c, g, now)
            continue
        if c.is_draining or c.is_resp:
            return
        # Empty lines before a request line (RFC 9112 §2.2 lets a server skip them) are
        # refused like any malformed start: h11, the reference strict parser, rejects them.
        if c.recv.len == 0:
            return
        if g.phase == _PH_WAIT:
            # First byte of a request. The first request's clock runs since accept.
            g.phase = _PH_HEAD
            if g.requests_seen:
                g.deadline_ms = now + lim.header_timeout_ms if lim.header_timeout_ms else 0
        if g.head_len == 0:
            r = _parse_head(c.recv.buf, c.recv.len, lim, &h)
            if r == 0:
                return
            if r < 0:
                _refuse(c, g, h.status, h.why, (h.flags & _GF_HEAD) != 0, now)
                return
            g.head_len = h.head_len
            g.content_length = h.content_length
            g.body_kind = h.body_kind
            g.flags = h.flags
            g.chunk_pos = 0
            g.decoded = 0
            g.frame_len = 0 if h.body_kind == _BODY_CHUNKED else h.head_len + h.content_length
            if lim.stream_body:
                _stream_begin(c, g, now)
                continue
        if g.frame_len == 0:
            r = _scan_chunks(c, g, lim, &h)
            if r < 0:
                _refuse(c, g, h.status, h.why, (g.flags & _GF_HEAD) != 0, now)
                return
            # Cutting out extensions and trailers shrinks the buffer: keep the progress
            # marks within it.
            if g.progress_mark > c.recv.len:
                g.progress_mark = c.recv.len
            if g.seen_len > c.recv.len:
                g.seen_len = c.recv.len
        if g.frame_len and c.recv.len >= g.frame_len:
            _deliver_front(c, g)
            if c.pfn != <mg.mg_event_handler_t>_http_guard or g.inner != NULL:
                return
            continue
        fresh = False
        if g.phase != _PH_BODY:
            g.phase = _PH_BODY
            fresh = True
            g.progress_mark = c.recv.len
            g.deadline_ms = now + lim.body_timeout_ms if lim.body_timeout_ms else 0
            if (g.flags & (_GF_EXPECT | _GF_CONTINUED)) == _GF_EXPECT:
                g.flags |= _GF_CONTINUED
                mg.mg_send(c, cont, strlen(cont))
        elif c.recv.len != g.seen_len:
            fresh = True
            # Progress is _MIN_PROGRESS bytes (or the rest of the body) per window, so a
            # body trickled a few bytes at a time (slowloris for bodies) still times out.
            need = _MIN_PROGRESS
            if g.body_kind == _BODY_LENGTH and g.frame_len - g.progress_mark < need:
                need = g.frame_len - g.progress_mark
            if c.recv.len - g.progress_mark >= need:
                g.progress_mark = c.recv.len
                g.deadline_ms = now + lim.body_timeout_ms if lim.body_timeout_ms else 0
        if fresh:
            _grow_recv(c, g)
            g.seen_len = c.recv.len
            if g.body_kind == _BODY_LENGTH:
                # Mongoose reports MG_EV_HTTP_HDRS while a body with a length arrives;
                # handlers that stream uploads rely on it. (A chunked body is parsed once,
                # whole: re-scanning it on every read would be quadratic.)
                _run_parser(c, g, c.recv.len)
                _adopt_protocol(c, g)
        return


cdef void _check_clock(mg.mg_connection *c, HttpGuard *g, uint64_t now) noexcept nogil:
    cdef const HttpLimits *lim = g.limits
    if c.is_closing:
        return
    if c.is_tls_hs:
        if (lim.tls_handshake_timeout_ms
                and now - g.started_ms >= lim.tls_handshake_timeout_ms):
            _log_event(c, 0, b"TLS handshake timeout")
            c.is_closing = 1
        return
    if g.phase == _PH_LINGER:
        if c.send.len == 0:
            if not (g.flags & _GF_SHUT) and not c.is_tls:
                # The refusal is out: a FIN tells the client so at once, while we keep
                # reading so that its late bytes cannot turn our close into a reset.
                shutdown(<int><size_t>c.fd, SHUT_WR)
                g.flags |= _GF_SHUT
            if now >= g.deadline_ms:
                c.is_closing = 1
        if now >= g.linger_until_ms:
            c.is_closing = 1
        return
    if g.deadline_ms == 0 or now < g.deadline_ms:
        return
    if g.phase == _PH_WAIT:
        if c.send.len:
            # The keep-alive idle time starts once the response is written out.
            g.deadline_ms = now + lim.keepalive_timeout_ms
            return
        _log_event(c, 0, b"keep-alive idle timeout" if g.requests_seen
                   else b"no request before header_timeout_ms")
        c.is_closing = 1
    elif g.phase == _PH_HEAD:
        _refuse(c, g, 408, b"request head not received within header_timeout_ms", False, now)
    elif g.phase == _PH_BODY:
        _refuse(c, g, 408, b"request body progress under 1 KiB per body_timeout_ms",
                (g.flags & _GF_HEAD) != 0, now)
    elif g.phase == _PH_STREAM:
        # The app already has the request: no refusal can be framed, so close.
        _log_event(c, 0, b"streamed body progress under 1 KiB per body_timeout_ms")
        c.is_closing = 1


cdef void _check_send_progress(mg.mg_connection *c, HttpGuard *g, uint64_t now) noexcept nogil:
    # nginx's send_timeout: output queued for the client must make progress (MG_EV_WRITE
    # resets send_since_ms) within send_timeout_ms, or the client is not reading: close it,
    # which frees what was queued for it.
    if c.send.len == 0 or g.limits.send_timeout_ms == 0 or c.is_closing:
        g.send_since_ms = 0
    elif g.send_since_ms == 0:
        g.send_since_ms = now
    elif now - g.send_since_ms >= g.limits.send_timeout_ms:
        _log_event(c, 0, b"response not read by the client within send_timeout_ms")
        c.is_closing = 1


cdef void _finish_after_eof(mg.mg_connection *c, HttpGuard *g) noexcept nogil:
    # The client half-closed: no request can arrive any more. Close once the responses owed
    # (a deferred one, a file being sent, pipelined requests still queued) are written.
    if (c.is_closing or c.is_draining or c.is_resp or g.inner != NULL or g.file_fd >= 0
            or g.phase == _PH_RESP or g.phase == _PH_STREAM):
        return
    c.is_draining = 1


cdef int _on_peer_eof(mg.mg_connection *c) noexcept nogil:
    # build_fixes.py asks this when recv() returns 0 (Mongoose would close at once). An
    # accepted, guarded HTTP connection stays open with its reads paused (EOF stays
    # readable forever: reading on would spin); anything else closes as before.
    cdef HttpGuard *g
    if c.pfn != <mg.mg_event_handler_t>_http_guard or c.pfn_data == NULL or c.is_listening:
        return 0
    g = <HttpGuard *>c.pfn_data
    if g.phase == _PH_STREAM and not (g.flags & _GF_BODY_DONE):
        return 0  # a streamed body cut short: close, so the app's read fails at once
    g.peer_eof = True
    c.is_full = 1
    _apply_is_full(c)
    return 1


mg.cym_peer_eof_hook = _on_peer_eof


cdef HttpGuard *_attach(mg.mg_connection *c) noexcept nogil:
    # First guarded event of a connection: find its Connection (bound at MG_EV_OPEN by
    # _on_event, which runs after this guard, so from MG_EV_ACCEPT on).
    if c.fn != _on_event or c.fn_data == NULL:
        return NULL
    _take_gil_back(<GilSlot *>c.mgr.userdata)
    return _attach_gil(c)


cdef HttpGuard *_attach_gil(mg.mg_connection *c) noexcept with gil:
    cdef Connection conn = <Connection>c.fn_data
    cdef HttpGuard *g
    if conn._c != c:
        return NULL
    g = &conn._guard
    memset(g, 0, sizeof(HttpGuard))
    g.limits = &conn._limits
    g.file_fd = -1
    g.started_ms = mg.mg_millis()
    g.phase = _PH_WAIT
    g.deadline_ms = (g.started_ms + conn._limits.header_timeout_ms
                     if conn._limits.header_timeout_ms else 0)
    c.pfn_data = <void *>g
    return g


cdef void _http_guard(mg.mg_connection *c, int ev, void *ev_data) noexcept nogil:
    """Mongoose protocol handler of accepted HTTP connections; see the top of this file."""
    cdef HttpGuard *g = <HttpGuard *>c.pfn_data
    cdef uint64_t now
    if c.is_listening:
        return
    if g == NULL:
        if ev == mg.MG_EV_OPEN or ev == mg.MG_EV_CLOSE:
            return
        g = _attach(c)
        if g == NULL:
            return
    if g.flags & _GF_IN_PARSER:
        if ev == mg.MG_EV_HTTP_MSG:
            g.flags |= _GF_DELIVERED
        return
    if ev == mg.MG_EV_WRITE:
        g.send_since_ms = 0  # progress: the send clock restarts at the next poll
    elif ev == mg.MG_EV_POLL:
        _check_send_progress(c, g, (<uint64_t *>ev_data)[0])
    if g.file_fd >= 0:
        if ev == mg.MG_EV_CLOSE:
            _file_done(g)
        elif ev == mg.MG_EV_WRITE or ev == mg.MG_EV_POLL:
            _pump_file(c, g)
    if g.inner != NULL:
        if ev == mg.MG_EV_READ and c.recv.len > _pipeline_cap(g.limits):
            _log_event(c, 0, b"pipelined input beyond one maximal request")
            c.is_closing = 1
        _run_inner(c, g, ev, ev_data)
        if g.inner != NULL:
            return
    if ev == mg.MG_EV_CLOSE:
        return
    if ev == mg.MG_EV_READ and g.phase == _PH_STREAM:
        g.wire_total += <size_t>(<long *>ev_data)[0]
    if ev == mg.MG_EV_READ or ev == mg.MG_EV_POLL:
        # MG_EV_POLL carries the iteration's mg_millis(); saves a clock read per connection.
        now = (<uint64_t *>ev_data)[0] if ev == mg.MG_EV_POLL else mg.mg_millis()
        _advance(c, g, now)
        if ev == mg.MG_EV_POLL:
            _check_clock(c, g, now)
            if g.peer_eof:
                _finish_after_eof(c, g)
    elif ev == mg.MG_EV_WRITE and g.phase == _PH_LINGER:
        _check_clock(c, g, mg.mg_millis())


cdef void _install_http_guard(mg.mg_connection *c) noexcept:
    _put_in_front(c, _mg_http_cb, <mg.mg_event_handler_t>_http_guard)


cdef int _update_limits(HttpLimits *lim, dict changes) except -1:
    """Validate `changes` (name -> int) and apply them to *lim, all or nothing."""
    cdef HttpLimits out = lim[0]
    for name, value in changes.items():
        if name not in _LIMIT_NAMES:
            raise TypeError(
                f"unknown HTTP limit {name!r}; the limits are {', '.join(_LIMIT_NAMES)}")
        if type(value) is bool or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, not {type(value).__name__}")
        if name.endswith("_ms"):
            if not 0 <= value <= _MAX_TIMEOUT_MS:
                raise ValueError(
                    f"{name} must be between 0 (no timeout) and {_MAX_TIMEOUT_MS} ms, "
                    f"not {value}")
        elif name == "max_header_count":
            if not 1 <= value <= mg.MG_MAX_HTTP_HEADERS:
                raise ValueError(
                    f"max_header_count must be between 1 and {mg.MG_MAX_HTTP_HEADERS} "
                    f"(the parser's capacity), not {value}")
        elif name == "max_header_size":
            if not 64 <= value <= _MAX_HEAD:
                raise ValueError(
                    f"max_header_size must be between 64 and {_MAX_HEAD} bytes, not {value}")
        elif name == "max_uri_size":
            if not 1 <= value <= _MAX_HEAD:
                raise ValueError(
                    f"max_uri_size must be between 1 and {_MAX_HEAD} bytes, not {value}")
        elif not 0 <= value <= _MAX_BODY:
            raise ValueError(
                f"max_body_size must be between 0 and {_MAX_BODY} bytes, not {value}")
    for name, value in changes.items():
        if name == "max_header_count":
            out.max_header_count = value
        elif name == "max_header_size":
            out.max_header_size = value
        elif name == "max_uri_size":
            out.max_uri_size = value
        elif name == "max_body_size":
            out.max_body_size = value
        elif name == "header_timeout_ms":
            out.header_timeout_ms = value
        elif name == "body_timeout_ms":
            out.body_timeout_ms = value
        elif name == "keepalive_timeout_ms":
            out.keepalive_timeout_ms = value
        elif name == "send_timeout_ms":
            out.send_timeout_ms = value
        else:
            out.tls_handshake_timeout_ms = value
    lim[0] = out
    return 0


cdef dict _limits_dict(const HttpLimits *lim):
    return {
        "max_header_count": lim.max_header_count,
        "max_header_size": lim.max_header_size,
        "max_uri_size": lim.max_uri_size,
        "max_body_size": lim.max_body_size,
        "header_timeout_ms": lim.header_timeout_ms,
        "body_timeout_ms": lim.body_timeout_ms,
        "keepalive_timeout_ms": lim.keepalive_timeout_ms,
        "tls_handshake_timeout_ms": lim.tls_handshake_timeout_ms,
        "send_timeout_ms": lim.send_timeout_ms,
    }
