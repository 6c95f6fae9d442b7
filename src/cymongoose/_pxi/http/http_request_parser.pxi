# The HTTP/1.1 request parser of the guard: a request head and a chunked body checked
# against RFC 9110/9112 with rules stricter than Mongoose's (docs/server-behaviour.md),
# without the GIL; chunk extensions and trailer fields are cut out for Mongoose's decoder.

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
    _GF_MERGE = 16384  # Connection came on several lines: the guard makes them one

cdef enum:
    _SEEN_CL = 1
    _SEEN_TE = 2
    _SEEN_HOST = 4
    _SEEN_CONNECTION = 8
    _SEEN_AUTH = 16
    _SEEN_COOKIE = 32
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

cdef struct HeadInfo:
    size_t head_len
    size_t content_length
    int body_kind
    int flags
    int status
    const char *why
    # Accept-Encoding's value, in the buffer parsed (valid until it changes); NULL when
    # absent or repeated (read as identity: http_compress.pxi).
    const unsigned char *accept_encoding
    size_t accept_encoding_len
    bint accept_encoding_seen


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


cdef bint _path_has_encoded_nul(const unsigned char *p, size_t n) noexcept nogil:
    """Whether the path of target p[:n] (everything before '?') holds "%00". Decoded, it
    ends the file name for C: "/img/.env%00.png" passed an app's ".png" check and
    serve_dir sent ".env". nginx answers 400 to it in a path; the query is the app's to
    decode, and nginx passes it on, so it is left alone here too."""
    cdef size_t i = 0
    while i + 2 < n and p[i] != c'?':
        if p[i] == c'%' and p[i + 1] == c'0' and p[i + 2] == c'0':
            return True
        i += 1
    return False


cdef const char *_target_error(const unsigned char *p, size_t n, bint connect) noexcept nogil:
    """NULL when p[:n] is a request target this method may have (RFC 9112 §3.2): origin-form,
    asterisk-form, absolute-form (scheme "://"), and authority-form for CONNECT only.
    Mongoose splits the query at '?', so a target that starts with it would leave the parser
    an empty URI: refused here, with a status, instead. A raw NUL never gets here (not a
    VCHAR); an encoded one in the path is refused (_path_has_encoded_nul)."""
    cdef size_t k = 1
    if connect:
        if _authority_ok(p, n, True):
            return NULL
        return b"CONNECT target not host:port"
    if _path_has_encoded_nul(p, n):
        return b"NUL (%00) in the request path"
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


cdef bint _trailer_field_ok(const unsigned char *p, size_t n) noexcept nogil:
    """p[:n] (without CRLF) is a trailer field line (RFC 9112 §7.1.2): token ":" then
    field-value characters. Trailers are checked and then discarded, but one that frames a
    message (Transfer-Encoding, Content-Length) is refused: no sender may put it there (RFC
    9110 §6.5.1), and a proxy behind us that merged it would frame the body anew. Found by
    fuzzing against h11, which refuses such trailers too."""
    cdef size_t i = 0
    while i < n and _CC[p[i]] & _C_TCHAR:
        i += 1
    if i == 0 or i == n or p[i] != c':':
        return False
    if _ieq(p, i, b"transfer-encoding") or _ieq(p, i, b"content-length"):
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
        # RFC 9110 §5.3: a list field on several lines is one list, in order. Mongoose drops
        # a request that repeats Connection, so the guard joins the lines first (_GF_MERGE).
        if seen[0] & _SEEN_CONNECTION:
            h.flags |= _GF_MERGE
        seen[0] |= _SEEN_CONNECTION
        _connection_tokens(v, vlen, &h.flags)
    elif nlen == 15 and _ieq(name, nlen, b"accept-encoding"):
        if h.accept_encoding_seen:
            h.accept_encoding = NULL
        else:
            h.accept_encoding = v
        h.accept_encoding_len = vlen
        h.accept_encoding_seen = True
    elif nlen == 6 and _ieq(name, nlen, b"expect"):
        # A list too (RFC 9110 §10.1.1): a repeat is allowed, and any 100-continue counts.
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
    if p[i + 5] != c'1':
        # HTTP/2.0 only on an HTTP/2 stream, whose head the engine wrote (http2.pxi).
        if not (lim.h2_stream and p[i + 5] == c'2' and p[i + 7] == c'0'):
            return _bad(h, 505, b"HTTP major version other than 1")
    elif p[i + 7] > c'1':
        # RFC 9110 §2.5: a request with a higher minor version of HTTP/1 is served as the
        # highest this server speaks, 1.1. The head says so too, for Mongoose and the app;
        # p is the connection's receive buffer (const only for the parser's own reading).
        (<unsigned char *>p)[i + 7] = c'1'
    if p[i + 7] == c'0' and p[i + 5] == c'1':
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
    cdef size_t j, e, t, k, size, digits, data, s
    cdef size_t wire_cap = 2 * lim.max_body_size + 65536
    cdef int result = 0
    while True:
        j = r
        size = 0
        digits = 0
        # The grammar (RFC 9112 §7.1) allows any number of leading zeros: only significant
        # digits count against the limit, and the normal form drops the zeros (s: the first
        # digit kept), which Mongoose's decoder then never sees.
        s = r
        while j < avail and (_CC[q[j]] & _C_HEX):
            if digits or q[j] != c'0':
                digits += 1
                if digits > 8:
                    return _bad(h, 400, b"chunk size too long")
            elif j + 1 < avail and (_CC[q[j + 1]] & _C_HEX):
                s = j + 1
            size = size * 16 + _hexval(q[j])
            j += 1
        if j >= avail:
            break
        if j == r:
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
                if not _trailer_field_ok(q + t, k - t):
                    return _bad(h, 400, b"malformed trailer field")
                t = k + 2
            if result == 0:
                break
            # The last chunk in its normal form: the size digit, CRLF, CRLF.
            memmove(q + w, q + s, j - s)
            w += j - s
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
        if w == r and e == j and s == r:
            w = data + size + 2  # already in normal form: nothing to move
        else:
            memmove(q + w, q + s, j - s)
            w += j - s
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
