# The reverse proxy's message heads (RFC 9110 §7.6): the request head an upstream gets, made
# from the client's validated head, and the upstream's response head, checked strictly and
# rewritten for the client. Hop-by-hop fields and every end-to-end field named in Connection
# are removed both ways; the framing, Host and the forwarding fields are the proxy's own on
# each side, whatever Connection names. The only protocol switch passed on is a WebSocket
# handshake (proxy_upgrade.pxi).

cdef extern from "<arpa/inet.h>" nogil:
    const char *inet_ntop(int af, const void *src, char *dst, unsigned int size)
    enum:
        AF_INET
        AF_INET6

cdef enum:
    _PX_MAX_TOKENS = 16  # Connection options remembered per message (more: refused)

cdef enum:
    # Field kinds, by name (_px_kind)
    _FK_OTHER = 0
    _FK_HOP = 1  # hop-by-hop: never forwarded
    _FK_CONNECTION = 2
    _FK_UPGRADE = 3
    _FK_LENGTH = 4
    _FK_TE = 5
    _FK_FORWARDED = 6  # Forwarded, X-Forwarded-*, X-Real-IP: only from trusted peers
    _FK_XFF = 7
    _FK_XFPROTO = 8
    _FK_XFHOST = 9
    _FK_HOST = 10
    _FK_VIA = 11
    _FK_EXPECT = 12
    _FK_WS_KEY = 13  # Sec-WebSocket-Key: ours to write, for a handshake we pass on
    _FK_WS_VERSION = 14


cdef struct PxBuf:
    char *p
    size_t len
    size_t size
    bint failed


cdef void _pb_add(PxBuf *b, const void *data, size_t n) noexcept nogil:
    cdef size_t want
    cdef char *grown
    if b.failed or n == 0:
        return
    if b.len + n > b.size:
        want = b.size * 2 if b.size else 1024
        while want < b.len + n:
            want *= 2
        grown = <char *>realloc(b.p, want)
        if grown == NULL:
            b.failed = True
            return
        b.p = grown
        b.size = want
    memcpy(b.p + b.len, data, n)
    b.len += n


cdef inline void _pb_str(PxBuf *b, const char *s) noexcept nogil:
    _pb_add(b, s, strlen(s))


cdef void _pb_num(PxBuf *b, size_t value) noexcept nogil:
    cdef char digits[24]
    cdef int i = 24
    while True:
        i -= 1
        digits[i] = <char>(48 + value % 10)
        value //= 10
        if value == 0:
            break
    _pb_add(b, digits + i, 24 - i)


cdef int _px_kind(const unsigned char *name, size_t n) noexcept nogil:
    if n == 10 and _ieq(name, n, b"connection"):
        return _FK_CONNECTION
    if n == 7 and _ieq(name, n, b"upgrade"):
        return _FK_UPGRADE
    if n == 14 and _ieq(name, n, b"content-length"):
        return _FK_LENGTH
    if n == 17 and _ieq(name, n, b"transfer-encoding"):
        return _FK_TE
    if n == 4 and _ieq(name, n, b"host"):
        return _FK_HOST
    if n == 3 and _ieq(name, n, b"via"):
        return _FK_VIA
    if n == 6 and _ieq(name, n, b"expect"):
        return _FK_EXPECT
    if ((n == 10 and _ieq(name, n, b"keep-alive")) or (n == 2 and _ieq(name, n, b"te"))
            or (n == 7 and _ieq(name, n, b"trailer"))
            or (n == 16 and _ieq(name, n, b"proxy-connection"))
            # HTTP/2's upgrade settings (RFC 7540 §3.2.1): hop-by-hop, and an h2c upgrade
            # is never passed on (proxy_upgrade.pxi)
            or (n == 14 and _ieq(name, n, b"http2-settings"))
            or (n == 19 and _ieq(name, n, b"proxy-authorization"))
            or (n == 18 and _ieq(name, n, b"proxy-authenticate"))):
        return _FK_HOP
    if n == 15 and _ieq(name, n, b"x-forwarded-for"):
        return _FK_XFF
    if n == 17 and _ieq(name, n, b"x-forwarded-proto"):
        return _FK_XFPROTO
    if n == 16 and _ieq(name, n, b"x-forwarded-host"):
        return _FK_XFHOST
    if ((n == 9 and _ieq(name, n, b"forwarded")) or (n == 9 and _ieq(name, n, b"x-real-ip"))
            or (n > 12 and _ieq(name, 12, b"x-forwarded-"))):
        return _FK_FORWARDED
    if n == 17 and _ieq(name, n, b"sec-websocket-key"):
        return _FK_WS_KEY
    if n == 21 and _ieq(name, n, b"sec-websocket-version"):
        return _FK_WS_VERSION
    return _FK_OTHER


cdef bint _px_forwarding_alias(const unsigned char *name, size_t n) noexcept nogil:
    """Whether the name is a forwarding field's (X-Forwarded-*, X-Real-IP) spelt with `_`
    for `-` somewhere (X_Forwarded_For, X-Real_IP): CGI-style backends (PHP, a WSGI server
    that maps every name into the environ, gunicorn's `--header-map dangerous`) map both to
    HTTP_X_FORWARDED_FOR, so such a field would merge with (or stand in for) the one the
    proxy sets. No proxy sends one: they are dropped from every peer, trusted or not.
    nginx drops every name with an underscore (underscores_in_headers off); other such
    names are passed on here, because the proxy vouches only for the forwarding fields:
    any other name the client could send in its `-` spelling as well, and APIs with `_` in
    header names keep working."""
    cdef size_t i, k
    cdef const char *lit
    cdef unsigned char ch
    if memchr(name, c'_', n) == NULL:
        return False
    if n == 9:
        lit = b"x-real-ip"
        k = 9
    elif n > 12:
        lit = b"x-forwarded-"
        k = 12
    else:
        return False
    for i in range(k):
        ch = name[i]
        if ch == c'_':
            ch = c'-'
        elif 0x41 <= ch <= 0x5a:
            ch += 32
        if ch != <unsigned char>lit[i]:
            return False
    return True


cdef struct PxTokens:
    # The options of a message's Connection fields (RFC 9110 §7.6.1): fields they name are
    # hop-by-hop too. Spans into the head they came from.
    const unsigned char *at[_PX_MAX_TOKENS]
    size_t len[_PX_MAX_TOKENS]
    int n
    bint close
    bint keep_alive
    bint upgrade
    bint overflow


cdef void _px_tokens(PxTokens *t, const unsigned char *v, size_t n) noexcept nogil:
    cdef size_t k = 0, s
    while k < n:
        while k < n and (v[k] == 32 or v[k] == 9 or v[k] == c','):
            k += 1
        s = k
        while k < n and not (v[k] == 32 or v[k] == 9 or v[k] == c','):
            k += 1
        if k == s:
            continue
        if _ieq(v + s, k - s, b"close"):
            t.close = True
        elif _ieq(v + s, k - s, b"keep-alive"):
            t.keep_alive = True
        elif _ieq(v + s, k - s, b"upgrade"):
            t.upgrade = True
        elif t.n < _PX_MAX_TOKENS:
            t.at[t.n] = v + s
            t.len[t.n] = k - s
            t.n += 1
        else:
            t.overflow = True


cdef bint _px_named(const PxTokens *t, const unsigned char *name, size_t n) noexcept nogil:
    cdef int i
    cdef size_t k
    for i in range(t.n):
        if t.len[i] != n:
            continue
        k = 0
        while k < n and (name[k] | 32) == (t.at[i][k] | 32):
            k += 1
        if k == n:
            return True
    return False


cdef void _px_client_ip(mg.mg_connection *c, char *out) noexcept nogil:
    """The client's address as X-Forwarded-For writes it (no port); "unix" without one."""
    if c.rem.port == 0 and c.rem.addr.ip4 == 0 and not c.rem.is_ip6:
        strcpy(out, b"unix")
    elif c.rem.is_ip6:
        inet_ntop(AF_INET6, c.rem.addr.ip, out, 64)
    else:
        inet_ntop(AF_INET, c.rem.addr.ip, out, 64)


cdef bint _px_request_head(PxBuf *b, mg.mg_connection *c, HttpGuard *g,
                           mg.mg_http_message *hm, const ProxyConf *conf, ProxyGroup *grp,
                           ProxyUpstream *u, bint websocket) noexcept nogil:
    """Write the request head for upstream `u` into b. `websocket`: the request is a valid
    WebSocket handshake (_px_ws_request), passed on as one; any other Upgrade, and the
    WebSocket fields of a request that is not one, are dropped: the upstream gets plain
    HTTP/1.1. False when out of memory."""
    cdef PxTokens tokens
    cdef bint trusted = _px_trusted(conf, c)
    cdef int i, kind
    cdef const unsigned char *name
    cdef size_t nlen, strip, target_len
    cdef const char *target = hm.uri.buf
    cdef mg.mg_http_header *host = NULL
    cdef mg.mg_str *xff = NULL
    cdef mg.mg_str *xfproto = NULL
    cdef mg.mg_str *xfhost = NULL
    cdef mg.mg_http_header *via = NULL
    cdef mg.mg_str *ws_key = NULL
    cdef char ip[64]
    memset(&tokens, 0, sizeof(PxTokens))
    for i in range(mg.MG_MAX_HTTP_HEADERS):
        if hm.headers[i].name.len == 0:
            break
        if _px_kind(<const unsigned char *>hm.headers[i].name.buf,
                    hm.headers[i].name.len) == _FK_CONNECTION:
            _px_tokens(&tokens, <const unsigned char *>hm.headers[i].value.buf,
                       hm.headers[i].value.len)
    # The request line: the target whole (query included), the mount's prefix replaced by
    # the upstream URL's path when it has one.
    target_len = <size_t>(hm.proto.buf - 1 - hm.uri.buf)
    _pb_add(b, hm.method.buf, hm.method.len)
    _pb_add(b, b" ", 1)
    if u.path_len and grp != NULL:
        strip = grp.prefix_len
        if grp.prefix[strip - 1] == c'/':
            strip -= 1
        _pb_add(b, u.path, u.path_len)
        if strip < target_len and target[strip] != c'/' and target[strip] != c'?':
            _pb_add(b, b"/", 1)
        _pb_add(b, target + strip, target_len - strip)
    else:
        _pb_add(b, target, target_len)
    _pb_add(b, b" HTTP/1.1\r\n", 11)
    for i in range(mg.MG_MAX_HTTP_HEADERS):
        name = <const unsigned char *>hm.headers[i].name.buf
        nlen = hm.headers[i].name.len
        if nlen == 0:
            break
        kind = _px_kind(name, nlen)
        if kind == _FK_HOST:
            host = &hm.headers[i]
        elif kind == _FK_VIA:
            via = &hm.headers[i]
            continue  # rewritten below, with ours appended when asked for
        elif kind == _FK_WS_KEY:
            ws_key = &hm.headers[i].value
            continue  # written below, for a handshake passed on
        elif kind == _FK_XFF:
            if trusted:
                xff = &hm.headers[i].value
            continue
        elif kind == _FK_XFPROTO:
            if trusted:
                xfproto = &hm.headers[i].value
            continue
        elif kind == _FK_XFHOST:
            if trusted:
                xfhost = &hm.headers[i].value
            continue
        elif kind == _FK_FORWARDED:
            if not trusted:
                continue
        elif kind != _FK_OTHER:
            continue  # hop-by-hop, Upgrade, framing (ours below), Expect (answered here)
        elif _px_forwarding_alias(name, nlen) or _px_named(&tokens, name, nlen):
            # X_Forwarded_For and the like: never (see _px_forwarding_alias).
            # Connection removes only the client's own end-to-end fields: it never names
            # away Host, the framing or the forwarding fields (kinds above), which are the
            # proxy's to send. Apache's CVE-2022-31813 was X-Forwarded-For named away.
            # nginx passes a request whose Connection names Host (it ignores the names
            # altogether); a 400 would refuse what can be served without doubt, so the
            # nomination is ignored rather than refused.
            continue
        _pb_add(b, name, nlen)
        _pb_add(b, b": ", 2)
        _pb_add(b, hm.headers[i].value.buf, hm.headers[i].value.len)
        _pb_add(b, b"\r\n", 2)
    if host == NULL:
        _pb_str(b, b"Host: ")
        _pb_str(b, u.authority)
        _pb_add(b, b"\r\n", 2)
    if g.body_kind == _BODY_LENGTH:
        _pb_str(b, b"Content-Length: ")
        _pb_num(b, g.content_length)
        _pb_add(b, b"\r\n", 2)
    elif g.body_kind == _BODY_CHUNKED:
        _pb_str(b, b"Transfer-Encoding: chunked\r\n")
    if websocket and ws_key != NULL:
        # The key _px_ws_request checked (the only one) and the version it requires.
        _pb_str(b, b"Connection: upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: ")
        _pb_add(b, ws_key.buf, ws_key.len)
        _pb_str(b, b"\r\nSec-WebSocket-Version: 13\r\n")
    _px_client_ip(c, ip)
    _pb_str(b, b"X-Forwarded-For: ")
    if xff != NULL and xff.len:
        _pb_add(b, xff.buf, xff.len)
        _pb_add(b, b", ", 2)
    _pb_str(b, ip)
    _pb_str(b, b"\r\nX-Forwarded-Proto: ")
    if xfproto != NULL and xfproto.len:
        _pb_add(b, xfproto.buf, xfproto.len)
    else:
        _pb_str(b, b"https" if _over_tls(c) else b"http")
    if xfhost != NULL and xfhost.len:
        _pb_str(b, b"\r\nX-Forwarded-Host: ")
        _pb_add(b, xfhost.buf, xfhost.len)
    elif host != NULL:
        _pb_str(b, b"\r\nX-Forwarded-Host: ")
        _pb_add(b, host.value.buf, host.value.len)
    _pb_add(b, b"\r\n", 2)
    if via != NULL or conf.via:
        _pb_str(b, b"Via: ")
        if via != NULL:
            _pb_add(b, via.value.buf, via.value.len)
            if conf.via:
                _pb_add(b, b", ", 2)
        if conf.via:
            _pb_str(b, b"1.1 cymongoose" if not (g.flags & _GF_HTTP10) else b"1.0 cymongoose")
        _pb_add(b, b"\r\n", 2)
    _pb_add(b, b"\r\n", 2)
    return not b.failed


cdef struct PxResp:
    size_t head_len
    int status
    bint http10
    int framing  # _RF_NONE, _RF_LENGTH, _RF_CHUNKED, _RF_CLOSE (see http_response.pxi)
    size_t content_length
    PxTokens tokens
    const char *why


cdef inline int _px_bad(PxResp *r, const char *why) noexcept nogil:
    r.why = why
    return -1


cdef int _px_parse_response(const unsigned char *p, size_t n, size_t max_head, bint head_req,
                            PxResp *r) noexcept nogil:
    """Check the response head at p[:n] from an upstream. 1: complete and valid (r filled),
    0: more bytes needed, -1: malformed or too large (r.why)."""
    cdef size_t i, e, s, v, ve, k, end
    cdef int kind
    cdef bint seen_cl = False, seen_te = False, te_chunked = False
    cdef size_t value
    end = _find_head_end(p, 0, n)
    if end == 0:
        if n > max_head:
            return _px_bad(r, b"upstream response head larger than the limit")
        if n >= 5 and memcmp(p, b"HTTP/", 5) != 0:
            return _px_bad(r, b"upstream sent something that is not an HTTP response")
        for i in range(n):
            if p[i] == 10 and (i == 0 or p[i - 1] != 13):
                # A head with bare LFs never ends in CRLFCRLF: waiting would be forever.
                return _px_bad(r, b"upstream sent a bare LF")
        return 0
    if end > max_head:
        return _px_bad(r, b"upstream response head larger than the limit")
    memset(r, 0, sizeof(PxResp))
    r.head_len = end
    # HTTP-version SP 3DIGIT [SP reason-phrase] CRLF
    if (end < 14 or memcmp(p, b"HTTP/1.", 7) != 0 or (p[7] != c'0' and p[7] != c'1')
            or p[8] != 32):
        return _px_bad(r, b"upstream sent a malformed status line")
    if not (0x31 <= p[9] <= 0x35 and 0x30 <= p[10] <= 0x39 and 0x30 <= p[11] <= 0x39):
        return _px_bad(r, b"upstream sent a malformed status code")
    r.status = (p[9] - 48) * 100 + (p[10] - 48) * 10 + p[11] - 48
    r.http10 = p[7] == c'0'
    i = 12
    if p[i] == 32:
        i += 1
        while p[i] != 13 and p[i] != 10:
            if not (_CC[p[i]] & _C_FIELD):
                return _px_bad(r, b"upstream sent a malformed reason phrase")
            i += 1
    if p[i] != 13 or p[i + 1] != 10:
        return _px_bad(r, b"upstream sent a malformed status line")
    i += 2
    while i < end - 2:
        s = i
        while i < end and _CC[p[i]] & _C_TCHAR:
            i += 1
        if i == s or p[i] != c':':
            return _px_bad(r, b"upstream sent a malformed header field")
        k = i  # name is p[s:k]
        i += 1
        while p[i] == 32 or p[i] == 9:
            i += 1
        v = i
        while p[i] != 13 and p[i] != 10:
            if not (_CC[p[i]] & _C_FIELD):
                return _px_bad(r, b"upstream sent a control character in a header field")
            i += 1
        if p[i] != 13 or p[i + 1] != 10:
            return _px_bad(r, b"upstream sent a bare LF")
        if p[i + 2] == 32 or p[i + 2] == 9:
            return _px_bad(r, b"upstream sent an obsolete line folding")
        ve = i
        while ve > v and (p[ve - 1] == 32 or p[ve - 1] == 9):
            ve -= 1
        i += 2
        kind = _px_kind(p + s, k - s)
        if kind == _FK_LENGTH:
            if ve == v or ve - v > 18:
                return _px_bad(r, b"upstream sent an invalid Content-Length")
            value = 0
            for e in range(v, ve):
                if not 0x30 <= p[e] <= 0x39:
                    return _px_bad(r, b"upstream sent an invalid Content-Length")
                value = value * 10 + (p[e] - 48)
            if seen_cl and value != r.content_length:
                return _px_bad(r, b"upstream sent conflicting Content-Length fields")
            seen_cl = True
            r.content_length = value
        elif kind == _FK_TE:
            if seen_te:
                return _px_bad(r, b"upstream sent Transfer-Encoding twice")
            seen_te = True
            # chunked as the final coding frames the body; anything else runs to the close
            e = ve
            while e > v and p[e - 1] != c',' and p[e - 1] != 32 and p[e - 1] != 9:
                e -= 1
            te_chunked = _ieq(p + e, ve - e, b"chunked")
        elif kind == _FK_CONNECTION:
            _px_tokens(&r.tokens, p + v, ve - v)
    if r.tokens.overflow:
        return _px_bad(r, b"upstream named too many fields in Connection")
    if seen_cl and seen_te:
        # RFC 9112 §6.3: a message with both is a smuggling attempt or a broken server
        return _px_bad(r, b"upstream sent both Content-Length and Transfer-Encoding")
    if head_req or r.status < 200 or r.status == 204 or r.status == 304:
        r.framing = _RF_NONE
    elif seen_te:
        r.framing = _RF_CHUNKED if te_chunked else _RF_CLOSE
    elif seen_cl:
        r.framing = _RF_LENGTH
    else:
        r.framing = _RF_CLOSE
    return 1


cdef void _px_response_head(mg.mg_connection *c, HttpGuard *g, const unsigned char *p,
                            PxResp *r, const ProxyConf *conf, bint chunk_out,
                            bint tunnel) noexcept nogil:
    """Queue on the client the upstream's head p[:r.head_len], rewritten: HTTP/1.1, without
    hop-by-hop fields and those its Connection names, with our framing and Connection."""
    cdef size_t i = 0, s, k, e
    cdef int kind
    cdef const unsigned char *end = p + r.head_len - 2
    cdef const unsigned char *line
    cdef const unsigned char *via = NULL
    cdef size_t via_len = 0
    while p[i] != 10:
        i += 1
    mg.mg_send(c, b"HTTP/1.1 ", 9)
    mg.mg_send(c, p + 9, i - 9 - 1)  # code and reason as the upstream sent them
    mg.mg_send(c, b"\r\n", 2)
    i += 1
    while p + i < end:
        line = p + i
        s = i
        while p[i] != c':':
            i += 1
        k = i
        e = i
        while p[e] != 13:
            e += 1
        kind = _px_kind(p + s, k - s)
        i = e + 2
        if kind == _FK_VIA:
            via = line
            via_len = e - s
            continue
        if kind == _FK_LENGTH:
            # A length frames this body as it is; for HEAD and 304 it is the length of the
            # body not sent, passed on too.
            if r.framing != _RF_LENGTH and r.framing != _RF_NONE:
                continue
        elif kind == _FK_UPGRADE:
            if not tunnel:
                continue
        elif kind == _FK_HOP or kind == _FK_CONNECTION or kind == _FK_TE:
            continue
        elif kind == _FK_OTHER and _px_named(&r.tokens, p + s, k - s):
            # Not the framing: an upstream's "Connection: Content-Length" would leave the
            # client a body it cannot delimit.
            continue
        mg.mg_send(c, line, e + 2 - s)
    if via != NULL or conf.via:
        if via != NULL:
            mg.mg_send(c, via, via_len)
            if conf.via:
                mg.mg_send(c, b", 1.1 cymongoose", 16)
        else:
            mg.mg_send(c, b"Via: 1.1 cymongoose", 19)
        mg.mg_send(c, b"\r\n", 2)
    if tunnel:
        mg.mg_send(c, b"Connection: upgrade\r\n", 21)
    else:
        if chunk_out:
            mg.mg_send(c, b"Transfer-Encoding: chunked\r\n", 28)
        if g.flags & _GF_CLOSE:
            mg.mg_send(c, b"Connection: close\r\n", 19)
        elif g.flags & _GF_KEEPALIVE:
            mg.mg_send(c, b"Connection: keep-alive\r\n", 24)
    mg.mg_send(c, b"\r\n", 2)
