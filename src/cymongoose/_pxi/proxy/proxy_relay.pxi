# The reverse proxy's response path: the upstream's response head checked and rewritten for
# the client (proxy_heads.pxi), then its body moved from the upstream's receive buffer to the
# client's send buffer as far as the client takes it (back-pressure: the upstream is not
# read meanwhile), re-chunked where the client needs it; and, after a 101, the tunnel that
# relays bytes as they are both ways.

cdef void _px_upstream_read(_Exchange *ex, uint64_t now) noexcept nogil:
    cdef mg.mg_connection *u = ex.uc.c
    cdef mg.mg_connection *c = ex.client
    cdef HttpGuard *g = ex.g
    cdef PxResp r
    cdef int rc
    cdef const char *why
    if ex.state == _X_TUNNEL:
        _px_tunnel_down(ex, False)
        return
    if ex.state != _X_RESPONSE:
        while True:
            rc = _px_parse_response(u.recv.buf, u.recv.len, ex.conf.max_head, ex.head_req, &r)
            if rc == 0:
                return
            if rc < 0:
                _px_failed(ex.conf, ex.up, now)
                u.is_closing = 1
                _px_detach_upstream(ex)
                if c == NULL:
                    _px_free(ex)
                else:
                    _px_fail(ex, 502, r.why, now)
                return
            if c == NULL and (r.status == 101 or (r.framing == _RF_LENGTH and
                                                  r.content_length > _PX_ORPHAN_MAX)
                              or r.framing == _RF_CLOSE):
                u.is_closing = 1  # an orphan's response too large (or endless) to read
                _px_detach_upstream(ex)
                _px_free(ex)
                return
            if r.status == 101:
                # A tunnel only for the WebSocket handshake we passed on, and only once the
                # upstream proved it with the Accept for its key (proxy_upgrade.pxi).
                if ex.upgrade:
                    why = _px_ws_switched(u.recv.buf, &r, ex.ws_accept)
                else:
                    why = b"the upstream switched protocols unasked"
                if why == NULL:
                    _px_start_tunnel(ex, &r, now)
                    return
                u.is_closing = 1
                _px_detach_upstream(ex)
                _px_fail(ex, 502, why, now)
                return
            if r.status < 200:
                mg.mg_iobuf_del(&u.recv, 0, r.head_len)  # 100 Continue and the like
                continue
            break
        _px_succeeded(ex.up)
        free(ex.head.p)  # no retry from here on
        memset(&ex.head, 0, sizeof(PxBuf))
        ex.framing = r.framing
        ex.resp_left = r.content_length
        ex.ck_state = _CK_SIZE
        ex.up_close = (r.tokens.close or (r.http10 and not r.tokens.keep_alive)
                       or r.framing == _RF_CLOSE)
        if c != NULL:
            if r.framing == _RF_CHUNKED or r.framing == _RF_CLOSE:
                if g.flags & _GF_HTTP10:
                    # An HTTP/1.0 client knows no chunks: the close ends its body.
                    g.flags = (g.flags | _GF_CLOSE) & ~_GF_KEEPALIVE
                else:
                    ex.chunk_out = True
            g.resp_status = r.status
            _px_response_head(c, g, u.recv.buf, &r, ex.conf, ex.chunk_out, False)
        mg.mg_iobuf_del(&u.recv, 0, r.head_len)
        ex.state = _X_RESPONSE
        _px_deadline(ex, now + ex.conf.read_timeout_ms)
    _px_relay(ex, now, False, False)


cdef void _px_chunk_out(mg.mg_connection *c, _Exchange *ex, const void *data,
                        size_t n) noexcept nogil:
    cdef char line[24]
    cdef int k
    if n == 0:
        return
    if c == NULL:
        ex.resp_body += n  # an orphan's: thrown away
        return
    if ex.chunk_out:
        k = _chunk_size_line(line, n)
        mg.mg_send(c, &line[k], <size_t>(23 - k))
    mg.mg_send(c, data, n)
    if ex.chunk_out:
        mg.mg_send(c, b"\r\n", 2)
    ex.resp_body += n


cdef void _px_relay(_Exchange *ex, uint64_t now, bint upstream_eof,
                    bint flush_all) noexcept nogil:
    """Move the response body from the upstream's receive buffer to the client as far as
    the client's send buffer allows; finish the exchange when the body is complete."""
    cdef mg.mg_connection *c = ex.client
    cdef mg.mg_connection *u = ex.uc.c if ex.uc != NULL else NULL
    cdef size_t n, e, j, size, digits
    cdef unsigned char *b
    cdef bint done = ex.framing == _RF_NONE
    cdef int broken = 0
    if u != NULL:
        while not done and u.recv.len and (flush_all or c == NULL or c.send.len < _STREAM_HIGH):
            b = u.recv.buf
            if ex.framing == _RF_LENGTH:
                n = u.recv.len if u.recv.len < ex.resp_left else ex.resp_left
                if c != NULL:
                    mg.mg_send(c, b, n)
                ex.resp_body += n
                mg.mg_iobuf_del(&u.recv, 0, n)
                ex.resp_left -= n
                done = ex.resp_left == 0
            elif ex.framing == _RF_CLOSE:
                n = u.recv.len
                _px_chunk_out(c, ex, b, n)
                mg.mg_iobuf_del(&u.recv, 0, n)
            elif ex.ck_state == _CK_DATA:
                n = u.recv.len if u.recv.len < ex.ck_left else ex.ck_left
                _px_chunk_out(c, ex, b, n)
                mg.mg_iobuf_del(&u.recv, 0, n)
                ex.ck_left -= n
                if ex.ck_left == 0:
                    ex.ck_state = _CK_CRLF
            elif ex.ck_state == _CK_CRLF:
                if u.recv.len < 2:
                    break
                if b[0] != 13 or b[1] != 10:
                    broken = 1
                    break
                mg.mg_iobuf_del(&u.recv, 0, 2)
                ex.ck_state = _CK_SIZE
            else:  # a chunk-size line, or a trailer line
                e = 0
                while e < u.recv.len and b[e] != 10:
                    e += 1
                if e == u.recv.len:
                    if u.recv.len > _CHUNK_LINE_MAX:
                        broken = 1
                    break
                if e == 0 or b[e - 1] != 13:
                    broken = 1
                    break
                if ex.ck_state == _CK_TRAILER:
                    # Trailer fields are dropped (RFC 9112 §7.1.2 allows it); an empty
                    # line ends the body.
                    ex.ck_line += e + 1
                    if ex.ck_line > ex.conf.max_head:
                        broken = 1
                        break
                    mg.mg_iobuf_del(&u.recv, 0, e + 1)
                    if e == 1:
                        done = True
                    continue
                j = 0
                size = 0
                digits = 0
                while j < e - 1 and (_CC[b[j]] & _C_HEX):
                    if digits or b[j] != c'0':
                        digits += 1
                    size = size * 16 + _hexval(b[j])
                    j += 1
                if j == 0 or digits > 15 or not _chunk_ext_ok(b + j, e - 1 - j):
                    broken = 1
                    break
                mg.mg_iobuf_del(&u.recv, 0, e + 1)
                if size == 0:
                    ex.ck_state = _CK_TRAILER
                    ex.ck_line = 0
                else:
                    ex.ck_state = _CK_DATA
                    ex.ck_left = size
        if broken:
            _px_why(ex, b"the upstream's chunked body is malformed", NULL)
            _px_log(ex, 0, ex.fail_why)
            u.is_closing = 1
            _px_detach_upstream(ex)
            if c == NULL:
                _px_free(ex)
            else:
                _px_abort_client(ex)
            return
    if upstream_eof and ex.framing == _RF_CLOSE:
        done = True
    if c == NULL and not done and ex.resp_body > _PX_ORPHAN_MAX:
        broken = 1  # an orphan that sends more than it may: not worth its connection
    if c == NULL and (done or broken):
        if broken or (u != NULL and u.recv.len):
            _px_detach_upstream(ex)
        else:
            _px_release(ex, now)
        _px_free(ex)
        return
    if done:
        if u != NULL and u.recv.len:
            ex.up_close = True  # bytes after the end of the response: not to be trusted
        _px_finish(ex, now)
        return
    if c == NULL:
        if u != NULL and u.is_full:
            u.is_full = 0
            _apply_is_full(u)
        _px_deadline(ex, now + ex.conf.read_timeout_ms)
        return
    if u != NULL:
        # Back-pressure: while the client has not taken what waits, the upstream is not read
        # (its TCP window closes) and its read clock stops.
        if u.recv.len and c.send.len >= _STREAM_HIGH:
            if not u.is_full:
                u.is_full = 1
                _apply_is_full(u)
            _px_deadline(ex, 0)
        else:
            if u.is_full:
                u.is_full = 0
                _apply_is_full(u)
            _px_deadline(ex, now + ex.conf.read_timeout_ms)


cdef void _px_start_tunnel(_Exchange *ex, PxResp *r, uint64_t now) noexcept nogil:
    cdef mg.mg_connection *c = ex.client
    cdef mg.mg_connection *u = ex.uc.c
    cdef HttpGuard *g = ex.g
    free(ex.head.p)
    memset(&ex.head, 0, sizeof(PxBuf))
    _px_succeeded(ex.up)
    g.resp_status = 101
    _px_response_head(c, g, u.recv.buf, r, ex.conf, False, True)
    mg.mg_iobuf_del(&u.recv, 0, r.head_len)
    ex.state = _X_TUNNEL
    _px_deadline(ex, 0)
    ex.up_close = True
    _metrics_websocket(c, g)
    g.phase = _PH_TUNNEL
    g.deadline_ms = 0
    g.body_ready = 0
    if g.flags & _GF_PAUSED:
        _set_reading(c, g, True)
    _px_access_log(ex)
    _px_tunnel_down(ex, False)
    _px_tunnel_up(c, g)


cdef void _px_tunnel_down(_Exchange *ex, bint flush_all) noexcept nogil:
    # upstream -> client
    cdef mg.mg_connection *c = ex.client
    cdef mg.mg_connection *u = ex.uc.c if ex.uc != NULL else NULL
    if u == NULL or c == NULL:
        return
    if u.recv.len and (flush_all or c.send.len < _STREAM_HIGH):
        mg.mg_send(c, u.recv.buf, u.recv.len)
        u.recv.len = 0
    if (u.recv.len != 0) != (u.is_full != 0):
        u.is_full = 1 if u.recv.len else 0
        _apply_is_full(u)


cdef void _px_tunnel_up(mg.mg_connection *c, HttpGuard *g) noexcept nogil:
    # client -> upstream: the guard's _advance() calls this in _PH_TUNNEL
    cdef _Exchange *ex = <_Exchange *>g.proxy
    cdef mg.mg_connection *u
    if ex == NULL or ex.uc == NULL:
        return
    u = ex.uc.c
    if c.recv.len and u.send.len < _STREAM_HIGH:
        mg.mg_send(u, c.recv.buf, c.recv.len)
        c.recv.len = 0
    _set_reading(c, g, c.recv.len == 0)
