# The one protocol switch the reverse proxy passes on: a WebSocket handshake (RFC 6455 §4).
# The client's head is checked when the exchange begins (_px_begin): a valid handshake is
# passed on with its key and version written by the proxy, and its 101 becomes a tunnel
# (proxy_relay.pxi) only if it carries the Sec-WebSocket-Accept that this key asks for. Any
# other Upgrade (h2c above all, with its HTTP2-Settings) is removed and the request goes as
# plain HTTP/1.1: a tunnel speaking HTTP/2 to the upstream would carry requests the proxy
# never routed (another path than the route's, without X-Forwarded-*), the smuggling that
# h2c through a proxy is known for.

cdef enum:
    _WS_ACCEPT_LEN = 28  # base64 of a 20-byte SHA-1


cdef bint _px_has_token(const unsigned char *v, size_t n, const char *token) noexcept nogil:
    """Whether the comma-separated list v[:n] holds `token` (lower case), case-insensitive."""
    cdef size_t k = 0, s, e
    while k < n:
        while k < n and (v[k] == 32 or v[k] == 9 or v[k] == c','):
            k += 1
        s = k
        while k < n and v[k] != c',':
            k += 1
        e = k
        while e > s and (v[e - 1] == 32 or v[e - 1] == 9):
            e -= 1
        if e > s and _ieq(v + s, e - s, token):
            return True
    return False


cdef bint _px_ws_key_ok(const unsigned char *v, size_t n) noexcept nogil:
    # RFC 6455 §4.1: 16 bytes, base64: 22 digits and "==".
    cdef size_t i
    if n != 24 or v[22] != c'=' or v[23] != c'=':
        return False
    for i in range(22):
        if not ((0x41 <= v[i] <= 0x5a) or (0x61 <= v[i] <= 0x7a) or (0x30 <= v[i] <= 0x39)
                or v[i] == c'+' or v[i] == c'/'):
            return False
    return True


cdef void _px_ws_accept(const unsigned char *key, size_t n, char *out) noexcept nogil:
    """The Sec-WebSocket-Accept for `key` (RFC 6455 §4.2.2) into out (at least 29 bytes)."""
    cdef mg.mg_sha1_ctx sha
    cdef unsigned char digest[20]
    cdef const char *guid = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
    mg.mg_sha1_init(&sha)
    mg.mg_sha1_update(&sha, key, n)
    mg.mg_sha1_update(&sha, <const unsigned char *>guid, strlen(guid))
    mg.mg_sha1_final(digest, &sha)
    mg.mg_base64_encode(digest, 20, out, _WS_ACCEPT_LEN + 1)


cdef int _px_ws_request(mg.mg_http_message *hm, HttpGuard *g, char *accept,
                        const char **why) noexcept nogil:
    """Whether the request is a WebSocket handshake. 1: a valid one, passed on (accept: what
    the upstream's 101 must carry, NUL-terminated). 0: it asks for no switch, or for another
    protocol, or in HTTP/1.0 (whose Upgrade RFC 9110 §7.8 has ignored): the Upgrade is
    dropped and the request proxied as plain HTTP. -1: it asks for a WebSocket (Connection:
    upgrade, Upgrade: websocket) with a malformed handshake (`why`): refused with a 400, as
    RFC 6455 §4.2.1 has a server do; an upstream that took it anyway would switch without a
    key to prove it speaks WebSocket."""
    cdef PxTokens tokens
    cdef bint websocket = False
    cdef mg.mg_str *key = NULL
    cdef mg.mg_str *version = NULL
    cdef int i, kind, n_key = 0, n_version = 0
    memset(&tokens, 0, sizeof(PxTokens))
    for i in range(mg.MG_MAX_HTTP_HEADERS):
        if hm.headers[i].name.len == 0:
            break
        kind = _px_kind(<const unsigned char *>hm.headers[i].name.buf, hm.headers[i].name.len)
        if kind == _FK_CONNECTION:
            _px_tokens(&tokens, <const unsigned char *>hm.headers[i].value.buf,
                       hm.headers[i].value.len)
        elif kind == _FK_UPGRADE:
            if _px_has_token(<const unsigned char *>hm.headers[i].value.buf,
                             hm.headers[i].value.len, b"websocket"):
                websocket = True
        elif kind == _FK_WS_KEY:
            key = &hm.headers[i].value
            n_key += 1
        elif kind == _FK_WS_VERSION:
            version = &hm.headers[i].value
            n_version += 1
    if not (tokens.upgrade and websocket) or (g.flags & _GF_HTTP10):
        return 0
    if hm.method.len != 3 or memcmp(hm.method.buf, b"GET", 3) != 0:
        why[0] = b"a WebSocket handshake that is not a GET"
    elif g.body_kind != _BODY_NONE and not (g.body_kind == _BODY_LENGTH and
                                            g.content_length == 0):
        why[0] = b"a WebSocket handshake with a body"
    elif n_key != 1 or not _px_ws_key_ok(<const unsigned char *>key.buf, key.len):
        why[0] = b"a WebSocket handshake without one valid Sec-WebSocket-Key"
    elif n_version != 1 or version.len != 2 or memcmp(version.buf, b"13", 2) != 0:
        why[0] = b"a WebSocket handshake whose Sec-WebSocket-Version is not 13"
    else:
        _px_ws_accept(<const unsigned char *>key.buf, key.len, accept)
        return 1
    return -1


cdef const char *_px_ws_switched(const unsigned char *p, const PxResp *r,
                                 const char *accept) noexcept nogil:
    """Whether the upstream's 101 at p[:r.head_len] (valid: _px_parse_response) completes
    the handshake: NULL when it switches to websocket with the Accept that our key asks
    for, else why not. Anything less and it is not a WebSocket server answering this
    request: its connection is closed and the client gets a 502."""
    cdef size_t i = 0, s, k, v, e
    cdef const unsigned char *end = p + r.head_len - 2
    cdef int n_accept = 0
    cdef bint matched = False, websocket = False
    while p[i] != 10:
        i += 1
    i += 1
    while p + i < end:
        s = i
        while p[i] != c':':
            i += 1
        k = i
        v = k + 1
        while p[v] == 32 or p[v] == 9:
            v += 1
        e = v
        while p[e] != 13:
            e += 1
        i = e + 2
        while e > v and (p[e - 1] == 32 or p[e - 1] == 9):
            e -= 1
        if _px_kind(p + s, k - s) == _FK_UPGRADE:
            websocket = websocket or _px_has_token(p + v, e - v, b"websocket")
        elif k - s == 20 and _ieq(p + s, k - s, b"sec-websocket-accept"):
            n_accept += 1
            matched = e - v == _WS_ACCEPT_LEN and memcmp(p + v, accept, _WS_ACCEPT_LEN) == 0
    if not websocket:
        return b"the upstream switched protocols, but not to websocket"
    if n_accept != 1 or not matched:
        return b"the upstream's 101 has no Sec-WebSocket-Accept matching the client's key"
    return NULL
