# Streamed request bodies (listen(..., stream_body=True)): the guard hands each request's head
# to the handler as MG_EV_HTTP_HDRS as soon as it is valid, then decodes the body in place as
# it arrives; the handler takes it with Connection.body_read(). While more than
# _STREAM_HIGH bytes wait unread, the connection stops reading its socket (back-pressure):
# the client's TCP window closes instead of our memory growing.
#
# Layout of c->recv while a body streams: [body_ready decoded bytes][wire bytes not decoded]
# (after the head, which stays in front while MG_EV_HTTP_HDRS runs: body_base bytes).
# Chunk framing is cut out of the buffer as it is decoded, so the decoded bytes are always
# contiguous at the front, and bytes after the body's end (a pipelined request) stay behind.

cdef enum:
    _STREAM_HIGH = 256 * 1024  # pause reads at this many buffered bytes
    _STREAM_LOW = 64 * 1024  # resume once body_read() brought it below this

cdef enum:
    _CK_SIZE = 0  # expecting a chunk-size line
    _CK_DATA = 1  # inside chunk data (body_left bytes to go)
    _CK_CRLF = 2  # the CRLF after chunk data
    _CK_TRAILER = 3  # trailer fields after the last chunk, up to an empty line

cdef enum:
    _GF_STREAM = 512  # the front request's body is streamed (head already delivered)
    _GF_BODY_DONE = 1024  # the streamed body has fully arrived
    _GF_PAUSED = 2048  # reads paused (c->is_full) for back-pressure
    _GF_HEAD_OUT = 4096  # MG_EV_HTTP_HDRS delivered: the handler has this request
    _GF_RESP_BEGUN = 8192  # this request's response head is written (http_begin)


cdef void _set_reading(mg.mg_connection *c, HttpGuard *g, bint on) noexcept nogil:
    if on == (not c.is_full) or (on and g.peer_eof):  # after EOF there is nothing to read
        return
    c.is_full = 0 if on else 1
    if on:
        g.flags &= ~_GF_PAUSED
    else:
        g.flags |= _GF_PAUSED
    _apply_is_full(c)


cdef void _apply_is_full(mg.mg_connection *c) noexcept nogil:
    # Mongoose's epoll interest is rewritten by the build fix to respect is_full; here we
    # apply the change at once, as Mongoose would only on its next write-state change.
    if c.mgr.epoll_fd < 0 or <size_t>c.fd == <size_t>-1:  # an HTTP/2 stream has no socket
        return
    mg.cym_epoll_set(c, (c.prof.len & mg.EPOLLOUT) != 0)


cdef inline void _cut(mg.mg_connection *c, size_t ofs, size_t n) noexcept nogil:
    mg.mg_iobuf_del(&c.recv, ofs, n)


cdef int _dechunk(mg.mg_connection *c, HttpGuard *g) noexcept nogil:
    """Decode the chunked wire bytes after body_ready. 1: body complete, 0: need more,
    -1: malformed or over the limit (the connection is closed)."""
    cdef size_t w, j, e, size, digits
    cdef unsigned char *b
    cdef const HttpLimits *lim = g.limits
    while True:
        w = g.body_base + g.body_ready
        b = c.recv.buf
        if g.chunk_state == _CK_DATA:
            size = c.recv.len - w
            if size == 0:
                return 0
            if size > g.body_left:
                size = g.body_left
            g.body_ready += size
            g.body_left -= size
            if g.body_left == 0:
                g.chunk_state = _CK_CRLF
            continue
        if g.chunk_state == _CK_CRLF:
            if c.recv.len - w < 2:
                return 0
            if b[w] != 13 or b[w + 1] != 10:
                return _stream_fail(c, g, b"chunk data not followed by CRLF")
            _cut(c, w, 2)
            g.chunk_state = _CK_SIZE
            continue
        # A line: chunk-size [extensions] CRLF, or a trailer field line.
        e = w
        while e < c.recv.len and b[e] != 10:
            e += 1
        if e == c.recv.len:
            if c.recv.len - w > (_CHUNK_LINE_MAX if g.chunk_state == _CK_SIZE
                                 else lim.max_header_size):
                return _stream_fail(c, g, b"chunk-size line or trailer too long")
            return 0
        if e == w or b[e - 1] != 13:
            return _stream_fail(c, g, b"bare LF in chunked body")
        if g.chunk_state == _CK_SIZE and e - w > _CHUNK_LINE_MAX:
            return _stream_fail(c, g, b"chunk-size line or trailer too long")
        if g.chunk_state == _CK_TRAILER:
            # RFC 9112 §7.1.2: trailer fields may be discarded; they are checked as field
            # lines (the same rule as http_request_parser.pxi's _scan_chunks) and dropped.
            if e - 1 == w:
                _cut(c, w, 2)
                g.flags |= _GF_BODY_DONE
                return 1
            if not _trailer_field_ok(b + w, e - 1 - w):
                return _stream_fail(c, g, b"malformed trailer field")
            g.head_len += e + 1 - w  # trailer bytes count against max_header_size
            if g.head_len > lim.max_header_size:
                return _stream_fail(c, g, b"trailer fields larger than max_header_size")
            _cut(c, w, e + 1 - w)
            continue
        j = w
        size = 0
        digits = 0
        while j < e - 1 and (_CC[b[j]] & _C_HEX):
            if digits or b[j] != c'0':  # leading zeros are allowed (RFC 9112 §7.1)
                digits += 1
                if digits > 15:
                    return _stream_fail(c, g, b"chunk size too long")
            size = size * 16 + _hexval(b[j])
            j += 1
        if j == w:
            return _stream_fail(c, g, b"invalid chunk size")
        # RFC 9112 §7.1.1: unknown chunk extensions must be ignored, once they match the
        # grammar (the same rule as http_request_parser.pxi's _scan_chunks).
        if not _chunk_ext_ok(b + j, e - 1 - j):
            return _stream_fail(c, g, b"invalid chunk size line or extension")
        if g.decoded + size > lim.max_body_size:
            return _stream_too_large(c, g)
        g.decoded += size
        _cut(c, w, e + 1 - w)
        if size == 0:
            g.chunk_state = _CK_TRAILER
            g.head_len = 0
        else:
            g.chunk_state = _CK_DATA
            g.body_left = size


cdef int _stream_fail(mg.mg_connection *c, HttpGuard *g, const char *why) noexcept nogil:
    if not (g.flags & _GF_HEAD_OUT):
        # Broken framing among the bytes that came with the head: no handler has seen this
        # request, so it is refused like a malformed head (400, then linger and close).
        _refuse(c, g, 400, why, (g.flags & _GF_HEAD) != 0, mg.mg_millis())
        return -1
    # The handler has the head and may be answering: no refusal can be framed any more.
    _log_event(c, 0, why)
    c.is_closing = 1
    return -1


cdef int _stream_too_large(mg.mg_connection *c, HttpGuard *g) noexcept nogil:
    """A chunked body went over max_body_size (a Content-Length body never gets this far:
    the guard refuses it with the head). 413 while it can still be framed: with the head
    (no handler has the request), or before any of the handler's response went out; the
    buffered body is dropped and the connection lingers, then closes. Once the response
    has started, only closing is left. body_read() tells the handler which it was."""
    cdef const char *why = b"chunked body larger than max_body_size"
    cdef uint64_t now = mg.mg_millis()
    if g.proxy != NULL:
        # A proxied request: the upstream has part of it and will never get the rest; its
        # connection closes, and the client is answered here as for an app.
        _px_client_gone(c, g)
    if not (g.flags & _GF_HEAD_OUT):
        _refuse(c, g, 413, why, (g.flags & _GF_HEAD) != 0, now)
        return -1
    if not c.is_resp:
        # The response is complete: the rest of the body is nobody's. Linger, so the kernel
        # does not reset the connection under the response, then close.
        c.recv.len = 0
        _linger_unread_body(c, g)
        return -1
    if not (g.flags & _GF_RESP_BEGUN):
        g.body_refused = 413
        g.resp_status = 413
        _send_refusal(c, 413, why, (g.flags & _GF_HEAD) != 0)
        c.recv.len = 0  # the body read so far: nobody takes it any more
        c.is_resp = 0
        _linger_unread_body(c, g)
        _mark_refused(g)  # lingers as after any refusal (http_guard.pxi)
        return -1
    g.body_refused = 1
    _log_event(c, 0, why)
    c.is_closing = 1
    return -1


cdef void _stream_setup(mg.mg_connection *c, HttpGuard *g, uint64_t now) noexcept nogil:
    """The guard's state for streaming the body of the valid request head at the front of
    c->recv (g.head_len bytes), for an app (_stream_begin) or the reverse proxy (_px_begin):
    nothing decoded yet, the body's deadline started, 100 Continue sent when asked for."""
    cdef const char *cont = b"HTTP/1.1 100 Continue\r\n\r\n"
    g.flags |= _GF_STREAM
    g.phase = _PH_STREAM
    g.body_ready = 0
    g.chunk_state = _CK_SIZE
    g.decoded = 0
    g.body_refused = 0
    g.body_base = g.head_len
    g.wire_total = 0
    g.progress_mark = 0
    if g.body_kind == _BODY_LENGTH:
        g.body_left = g.content_length
    elif g.body_kind == _BODY_NONE:
        g.flags |= _GF_BODY_DONE
    g.deadline_ms = (now + g.limits.body_timeout_ms
                     if g.limits.body_timeout_ms and g.body_kind != _BODY_NONE else 0)
    if g.flags & _GF_EXPECT:
        # The app reads the body as it likes; telling the client to send it at once keeps
        # the progress clock honest and matches what the buffered path does.
        g.flags |= _GF_CONTINUED
        mg.mg_send(c, cont, strlen(cont))
    c.is_resp = 1
    g.head_len = 0  # from here on: trailer bytes seen (chunked)


cdef void _stream_begin(mg.mg_connection *c, HttpGuard *g, uint64_t now) noexcept nogil:
    """The front request's head is valid: hand it to the handler as MG_EV_HTTP_HDRS, drop
    it from the buffer and start streaming its body."""
    cdef mg.mg_http_message hm
    cdef size_t head_len = g.head_len
    cdef size_t mark
    _split_head(<char *>c.recv.buf, head_len, &hm, NULL)  # http_split.pxi
    _stream_setup(c, g, now)
    # Decode what already arrived, so body_pending/body_complete are right during the
    # event: later data is announced by MG_EV_READ.
    if _stream_decode(c, g) < 0:
        return
    mark = c.send.len
    g.flags |= _GF_HEAD_OUT
    _metrics_request_start(c, g)
    if c.fn != NULL:
        c.fn(c, mg.MG_EV_HTTP_HDRS, <void *>&hm)
    if c.is_closing:
        return
    _cut(c, 0, head_len)
    g.body_base = 0
    if c.send.len > mark and not c.is_resp:
        _fix_response(c, g, mark)


cdef int _stream_decode(mg.mg_connection *c, HttpGuard *g) noexcept nogil:
    """Decode the body bytes buffered so far; -1 when the framing is broken (closed)."""
    cdef size_t n
    if not (g.flags & _GF_BODY_DONE):
        if g.body_kind == _BODY_LENGTH:
            n = c.recv.len - g.body_base - g.body_ready
            if n > g.body_left:
                n = g.body_left
            g.body_ready += n
            g.body_left -= n
            if g.body_left == 0:
                g.flags |= _GF_BODY_DONE
        elif _dechunk(c, g) < 0:
            return -1
    if not c.is_resp and g.body_ready:
        # The response is complete: nobody will read the rest of this body. Discard it as
        # it arrives so the connection can go on to the next request.
        _cut(c, g.body_base, g.body_ready)
        g.body_ready = 0
        # Reads paused while the app was behind would otherwise stay paused for good:
        # nobody calls body_read() any more, so the rest of the body would never arrive.
        _resume_if_drained(c, g)
    return 0


cdef void _resume_if_drained(mg.mg_connection *c, HttpGuard *g) noexcept nogil:
    # Back-pressure released: read again, and restart the body progress clock that pausing
    # stopped (the lag was ours, the client gets a fresh window).
    if (g.flags & _GF_PAUSED) and c.recv.len < _STREAM_LOW:
        _set_reading(c, g, True)
        if g.limits.body_timeout_ms:
            g.progress_mark = g.wire_total
            g.deadline_ms = mg.mg_millis() + g.limits.body_timeout_ms


cdef int _stream_advance(mg.mg_connection *c, HttpGuard *g, uint64_t now) noexcept nogil:
    """Decode what arrived of a streamed body; 1 when the body is complete, 0 when more is
    due, -1 when the connection is being closed."""
    cdef size_t need
    if _stream_decode(c, g) < 0:
        return -1
    if g.flags & _GF_BODY_DONE:
        g.deadline_ms = 0
        if g.flags & _GF_PAUSED:
            _set_reading(c, g, True)
        return 1
    if c.recv.len >= _STREAM_HIGH:
        # The app is behind: stop reading; its lag is not the client's fault, so the
        # progress clock stops too until body_read() resumes.
        _set_reading(c, g, False)
        g.deadline_ms = 0
        return 0
    if g.limits.body_timeout_ms and g.deadline_ms:
        need = _MIN_PROGRESS
        if g.body_kind == _BODY_LENGTH and g.body_left < need:
            need = g.body_left
        if g.wire_total - g.progress_mark >= need:
            g.progress_mark = g.wire_total
            g.deadline_ms = now + g.limits.body_timeout_ms
    return 0


cdef object _body_read(Connection conn, Py_ssize_t max_bytes):
    conn._ensure_open()
    cdef mg.mg_connection *c = conn._c
    cdef HttpGuard *g = &conn._guard
    cdef size_t n = g.body_ready
    cdef bytes out
    if g.body_refused:
        raise RequestBodyTooLarge(g.limits.max_body_size, g.body_refused == 413)
    if not (g.flags & _GF_STREAM):
        return b""
    if _stream_decode(c, g) < 0:
        if g.body_refused:
            raise RequestBodyTooLarge(g.limits.max_body_size, g.body_refused == 413)
        raise ConnectionResetError("the request body's chunked framing is broken")
    n = g.body_ready
    if 0 <= max_bytes < <Py_ssize_t>n:
        n = <size_t>max_bytes
    out = PyBytes_FromStringAndSize(<const char *>c.recv.buf + g.body_base, <Py_ssize_t>n)
    if n:
        _cut(c, g.body_base, n)
        g.body_ready -= n
    cdef bint was_paused = c.is_full
    _resume_if_drained(c, g)
    if was_paused and not c.is_full:
        _rewatch_soon(c)  # loop_sockets.pxi: without epoll, the outer loop must hear of it
    return out
