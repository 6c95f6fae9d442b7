# DNS resolution (resolver switch, NXDOMAIN loop fix) and SNTP requests with error reporting.

# Mongoose's own SNTP protocol handler (static sntp_cb, exported by build_fixes.py);
# _sntp_pfn runs it and reports what it drops silently. It marks "MG_EV_SNTP_TIME was fired
# for this datagram" in the byte of c->data that mg.cym_sntp_flag() names.
cdef mg.mg_event_handler_t _sntp_proto_fn = mg.cym_sntp_cb

# Mongoose's resolver callback (static dns_cb, exported by build_fixes.py).
cdef mg.mg_event_handler_t _dns_proto_fn = mg.cym_dns_cb

DEF _DNS_RTYPE_AAAA = 28


cdef int _dns_question_type(const uint8_t *buf, size_t n) noexcept nogil:
    # QTYPE of the single question of a DNS message, or -1 (RFC 1035 §4.1.2).
    cdef size_t p = 12
    cdef size_t label
    if buf == NULL or n < 12 or buf[4] != 0 or buf[5] != 1:
        return -1
    while True:
        if p >= n:
            return -1
        label = buf[p]
        if label == 0:
            p += 1
            break
        if label & 0xC0:
            p += 2
            break
        p += 1 + label
    if p + 2 > n:
        return -1
    return (buf[p] << 8) | buf[p + 1]


cdef void _dns_pfn(mg.mg_connection *c, int ev, void *ev_data) noexcept nogil:
    # Mongoose 7.23 retries an unanswered A lookup as AAAA, and then retries an unanswered
    # AAAA lookup as AAAA again, forever (dns_cb tests only use_dns6, which is false by
    # default): an NXDOMAIN becomes an endless query loop instead of an error. For a
    # reply to an AAAA question, present use_dns6 as set so dns_cb takes its
    # "<name> DNS lookup failed" branch; the first A -> AAAA fallback is kept.
    cdef bint saved
    if ev == mg.MG_EV_READ and _dns_question_type(
            <const uint8_t *>c.recv.buf, c.recv.len) == _DNS_RTYPE_AAAA:
        saved = c.mgr.use_dns6
        c.mgr.use_dns6 = True
        _dns_proto_fn(c, ev, ev_data)
        c.mgr.use_dns6 = saved
    else:
        _dns_proto_fn(c, ev, ev_data)
    # The AAAA retry may just have opened the IPv6 resolver socket: cover it too.
    _dns_wrap(c.mgr)


cdef inline void _dns_wrap_one(mg.mg_connection *c) noexcept nogil:
    _put_in_front(c, _dns_proto_fn, _dns_pfn)


cdef void _dns_wrap(mg.mg_mgr *mgr) noexcept nogil:
    """Put _dns_pfn in front of the resolver sockets Mongoose opened lazily. Called before
    each mg_mgr_poll(): a reply can only be read inside a poll, after its socket exists."""
    _dns_wrap_one(mgr.dns4.c)
    _dns_wrap_one(mgr.dns6.c)


cdef void _dns_retired_pfn(mg.mg_connection *c, int ev, void *ev_data) noexcept nogil:
    # A resolver socket of a previous dns_server: it still reads answers to the lookups it
    # sent (dns_cb matches them by id across all pending lookups), then closes once no
    # lookup is pending. Closing it earlier would fire dns_cb's MG_EV_CLOSE branch, which
    # fails *every* pending lookup, including those sent to the new server.
    _dns_pfn(c, ev, ev_data)
    if ev == mg.MG_EV_POLL and c.mgr.active_dns_requests == NULL:
        c.is_closing = 1


cdef void _dns_retire(mg.mg_mgr *mgr) noexcept nogil:
    """Detach the open resolver sockets so the next lookup opens one to the new server."""
    _dns_wrap(mgr)  # learns dns_cb if these sockets were opened since the last poll
    if mgr.dns4.c != NULL:
        mgr.dns4.c.pfn = _dns_retired_pfn
        mgr.dns4.c = NULL
    if mgr.dns6.c != NULL:
        mgr.dns6.c.pfn = _dns_retired_pfn
        mgr.dns6.c = NULL


cdef inline bint _has_socket(mg.mg_connection *c) noexcept nogil:
    return <size_t>c.fd != <size_t>-1  # MG_INVALID_SOCKET on POSIX


cdef int _resolve(Connection conn, str url) except -1:
    conn._ensure_open()
    cdef bytes burl = _utf8_no_nul(url, "url")
    # On success mg_resolve() opens a socket for the connection (mg_connect_resolved). On a
    # connection that already has one, that would leak the old socket and reconnect under
    # the user's feet, so only a client still waiting for its address may resolve.
    if _has_socket(conn._c) or not conn._c.is_client:
        raise RuntimeError(
            "resolve() works only on a client connection that has no socket yet (its host "
            "name is being resolved, or resolve_cancel() stopped that)")
    # A lookup already in flight is replaced, not doubled.
    mg.mg_resolve_cancel(conn._c)
    mg.mg_resolve(conn._c, burl)
    _raise_pending(<Manager>conn._manager)
    return 0


cdef int _resolve_cancel(Connection conn) except -1:
    # The connection stays open, waiting for an address, until resolve() or close().
    conn._ensure_open()
    mg.mg_resolve_cancel(conn._c)
    return 0


cdef void _sntp_pfn(mg.mg_connection *c, int ev, void *ev_data) noexcept nogil:
    # Mongoose's sntp_cb closes the connection without any event when the reply is
    # unusable, or when none came within 3 s; report both as MG_EV_ERROR so a caller is
    # not left waiting. Mongoose calls c->pfn before c->fn, so the error reaches the user
    # handler in the same iteration.
    cdef bint was_closing = c.is_closing != 0
    if ev == mg.MG_EV_SNTP_TIME:
        mg.cym_sntp_flag(c)[0] = 1
        return  # sntp_cb has nothing to do for its own event
    if ev == mg.MG_EV_READ:
        mg.cym_sntp_flag(c)[0] = 0
    _sntp_proto_fn(c, ev, ev_data)
    if was_closing or not c.is_closing:
        return
    if ev == mg.MG_EV_READ and not mg.cym_sntp_flag(c)[0]:
        mg.mg_error(c, "SNTP: invalid or unusable server reply")
    elif ev == mg.MG_EV_POLL:
        mg.mg_error(c, "SNTP: no reply within 3 seconds")


cdef Connection _sntp_connect(Manager manager, str url, object handler):
    manager._ensure_open()
    _check_handler(handler, "handler")
    cdef bytes burl = _utf8_no_nul(url, "url")
    cdef Connection conn = Connection.__new__(Connection)
    conn._handler = handler
    conn._manager = <void *>manager
    conn._limits = manager._limits
    Py_INCREF(conn)  # the reference c->fn_data will own until MG_EV_CLOSE
    # sntp_cb sends the first request itself on MG_EV_CONNECT, and closes the connection
    # after the first reply (or 3 s without one).
    cdef mg.mg_connection *c = mg.mg_sntp_connect(&manager._mgr, burl, _on_event,
                                                  <void *>conn)
    if c == NULL:
        Py_DECREF(conn)
        raise RuntimeError(f"Failed to connect to {url!r}: use udp://host:port")
    if not conn._bound:
        conn._c = c
        conn._bound = True
    _put_in_front(c, _sntp_proto_fn, _sntp_pfn)
    _raise_pending(manager)
    return conn


cdef int _sntp_request(Connection conn) except -1:
    # While the host name is still resolving Mongoose only logs and sends nothing (0.2.5
    # behaviour, kept: the connection sends its own request once connected).
    conn._ensure_open()
    mg.mg_sntp_request(conn._c)
    return 0
