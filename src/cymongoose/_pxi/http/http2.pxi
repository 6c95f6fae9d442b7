# HTTP/2 (issue 36), driven by libnghttp2 in C (includes/cym_h2.h). This fragment holds what
# exists so far: whether the build has the library, and the prior-knowledge check the HTTP
# guard will make on a plain connection's first bytes. notes/i36-http2-plan.md has the rest.

# "1.52.0": the libnghttp2 this module runs with; None when built with CYMONGOOSE_HTTP2=OFF.
HTTP2_LIBRARY = (<bytes>mg.cym_h2_library_version()).decode("ascii") if mg.CYM_H2_BUILT else None


def _h2_preface_state(data):
    """Tests only: what bytes at the start of a plain connection say: 0 (not HTTP/2's
    preface: HTTP/1.1 decides), 1 (a prefix of it so far: wait) or 2 (the whole preface)."""
    cdef const unsigned char[:] view = data
    if view.shape[0] == 0:
        return mg.CYM_H2_PARTIAL
    return mg.cym_h2_preface_state(&view[0], view.shape[0])


cdef enum:
    # RFC 9113 section 6.5.2 recommends no fewer than 100; nginx, uvicorn and hypercorn
    # default to 100 or 128.
    _H2_MAX_STREAMS = 100


cdef void _h2_switch(mg.mg_connection *c, HttpGuard *g) noexcept nogil:
    """The client opened with HTTP/2's preface: the connection turns to HTTP/2, its limits
    those of the listener (a stream's head is bounded as an HTTP/1.1 head, its body by the
    window the handlers open by reading), and the bytes read so far go to the session."""
    cdef mg.cym_h2_limits lim
    cdef const HttpLimits *hl = g.limits
    cdef long n = <long>c.recv.len
    memset(&lim, 0, sizeof(lim))
    lim.stream_pfn = <mg.mg_event_handler_t>_http_guard
    lim.registry = &(<GilSlot *>c.mgr.userdata).h2_sessions
    lim.max_streams = _H2_MAX_STREAMS
    # RFC 9113 counts 32 bytes per field on top of name and value.
    lim.max_header_list = <uint32_t>(hl.max_header_size + 32 * hl.max_header_count)
    lim.stream_window = _STREAM_HIGH
    lim.max_buffered = hl.max_body_size + hl.max_header_size
    lim.idle_timeout_ms = hl.keepalive_timeout_ms
    lim.send_timeout_ms = hl.send_timeout_ms
    g.deadline_ms = 0
    if mg.cym_h2_start(c, &lim) != 0:
        _log_event(c, 0, b"no memory for an HTTP/2 session")
        c.is_closing = 1
        return
    _metrics_h2_switch(c, g)  # only once the session exists: a failed switch is no HTTP/2
    c.pfn(c, mg.MG_EV_READ, <void *>&n)


cdef inline bint _h2_wants_poll(mg.mg_mgr *mgr) noexcept nogil:
    """An HTTP/2 stream has work no descriptor announces (its handler wrote from outside
    the connection's events): the next poll must not wait."""
    cdef void *sessions = (<GilSlot *>mgr.userdata).h2_sessions
    return sessions != NULL and mg.cym_h2_wants_poll(sessions) != 0


# What the servers call a request's protocol (PEP 3333's SERVER_PROTOCOL, ASGI's
# http_version), by _http_version(): the guard lets only these three through.
cdef tuple _PROTOCOLS = ("HTTP/1.0", "HTTP/1.1", "HTTP/2.0")
cdef tuple _ASGI_VERSIONS = ("1.0", "1.1", "2")


cdef inline int _http_version(const mg.mg_http_message *hm) noexcept nogil:
    """0: HTTP/1.0, 1: HTTP/1.1, 2: HTTP/2 (a stream's request line, http2.pxi)."""
    if hm.proto.len != 8:
        return 0
    if hm.proto.buf[5] == c'2':
        return 2
    return 1 if hm.proto.buf[7] == c'1' else 0


cdef bint _http2_flag(object http2) except -1:
    """listen(http2=...): whether clients of this listener may speak HTTP/2."""
    if type(http2) is not bool:
        raise TypeError(f"http2 must be True or False, not {http2!r}")
    return http2


cdef void _add_h2_streams(list out, mg.mg_mgr *mgr):
    """Manager.connections: the stream connections a handler has seen."""
    cdef void *sessions = (<GilSlot *>mgr.userdata).h2_sessions
    cdef size_t n, i
    cdef mg.mg_connection **found
    if sessions == NULL:
        return
    n = mg.cym_h2_streams(sessions, NULL, 0)
    if n == 0:
        return
    found = <mg.mg_connection **>calloc(n, sizeof(mg.mg_connection *))
    if found == NULL:
        raise MemoryError()
    try:
        n = mg.cym_h2_streams(sessions, found, n)
        for i in range(n):
            _add_bound(out, found[i])
    finally:
        free(found)


cdef inline mg.mg_connection *_tls_carrier(Connection conn) noexcept nogil:
    """The connection whose TLS a request came over: an HTTP/2 stream's is its parent's."""
    if conn._guard.h2_parent != NULL:
        return conn._guard.h2_parent
    return conn._c


cdef inline bint _over_tls(mg.mg_connection *c) noexcept nogil:
    if c.is_tls:
        return True
    if c.fn != _on_event or c.fn_data == NULL or not mg.cym_h2_is_stream(c):
        return False
    return ((<Connection>c.fn_data)._guard.h2_parent != NULL
            and (<Connection>c.fn_data)._guard.h2_parent.is_tls)


cdef int _h2_allowed_tls(mg.mg_connection *c) noexcept nogil:
    """ALPN (cym_tls.h): whether this accepted TLS connection may choose h2: an HTTP
    connection of a listener with http2 on, in a module built with libnghttp2."""
    if not mg.CYM_H2_BUILT or c.fn != _on_event or c.fn_data == NULL:
        return 0
    if c.pfn != <mg.mg_event_handler_t>_http_guard:
        return 0
    return 1 if (<Connection>c.fn_data)._limits.http2 else 0


mg.cym_tls_h2_allowed = _h2_allowed_tls


cdef object _h2_parent_of(Connection conn):
    """Connection.http2_parent: the connection an HTTP/2 stream travels on (None for any
    other connection)."""
    cdef mg.mg_connection *p
    if conn._c == NULL or conn._guard.h2_parent == NULL:
        return None
    p = conn._guard.h2_parent
    if p.fn == _on_event and p.fn_data != NULL and (<Connection>p.fn_data)._c == p:
        return <Connection>p.fn_data
    return None
