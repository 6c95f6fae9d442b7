# The HTTP guard: a per-connection state machine in front of Mongoose's HTTP parser that
# enforces the limits (http_limits.pxi) and timeouts, and frames requests strictly (the
# parser is http_request_parser.pxi).
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

cdef enum:
    # Body progress: bytes each body_timeout_ms window must bring (or the rest of the body).
    _MIN_PROGRESS = 1024

cdef enum:
    _PH_NONE = 0  # not guarded (client connections, or not attached yet)
    _PH_WAIT = 1  # waiting for the first byte of a request (new or keep-alive connection)
    _PH_HEAD = 2  # part of a request head buffered
    _PH_BODY = 3  # head accepted, body still arriving
    _PH_RESP = 4  # request handed to the handler, response not complete yet
    _PH_LINGER = 5  # refused: input discarded until the client goes or the linger ends
    _PH_STREAM = 6  # head handed to the handler, body streaming (http_stream.pxi)

cdef enum:
    # Lingering after a refusal, not after a response (the other _GF_* flags are in
    # http_request_parser.pxi and http_stream.pxi): see _mark_refused.
    _GF_REFUSED = 32768

# Mongoose's http_cb (static in mongoose.c, exported by build_fixes.py).
cdef mg.mg_event_handler_t _mg_http_cb = mg.cym_http_cb


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


cdef int _status_of(const unsigned char *p, size_t n) noexcept nogil:
    """The status code of the response head p[:n] (0 when it is not one)."""
    if n < 13 or memcmp(p, b"HTTP/1.", 7) != 0:
        return 0
    if not (48 <= p[9] <= 57 and 48 <= p[10] <= 57 and 48 <= p[11] <= 57):
        return 0
    return (p[9] - 48) * 100 + (p[10] - 48) * 10 + p[11] - 48


cdef void _fix_response(mg.mg_connection *c, HttpGuard *g, size_t mark) noexcept nogil:
    """Make the response written since `mark` (synchronously, by any API: reply, serve_dir,
    Mongoose's own error pages) say and do what the request's framing requires."""
    cdef size_t s = mark, he = 0, n
    cdef bint has = False, close = False
    cdef const char *field = NULL
    if g.core_head_at == mark + 1:
        # reply() wrote it, from `mark` on, as this request requires (_http_respond): no
        # second pass over the head (about 1,300 instructions a request).
        g.core_head_at = 0
        return
    g.core_head_at = 0
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
    g.resp_status = _status_of(c.send.buf + s, he - s)
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
    _N_REFUSALS = 8
    _REFUSED_LINE_MAX = 2048  # request-line bytes handed to Manager.refusal_handler
cdef int _REFUSAL_CODES[_N_REFUSALS]
cdef const char *_REFUSAL_DATA[_N_REFUSALS][2]
cdef size_t _REFUSAL_LEN[_N_REFUSALS][2]
cdef list _REFUSAL_KEEP = []


cdef void _init_refusals() noexcept:
    cdef int i
    cdef bytes full, head
    for i, code in enumerate((400, 408, 413, 414, 431, 501, 503, 505)):
        reason = {400: "Bad Request", 408: "Request Timeout", 413: "Content Too Large",
                  414: "URI Too Long", 431: "Request Header Fields Too Large",
                  501: "Not Implemented", 503: "Service Unavailable",
                  505: "HTTP Version Not Supported"}[code]
        body = f"{reason}\n".encode("ascii")
        # 503 is limit_concurrency's: the client may try again in a second.
        retry = "Retry-After: 1\r\n" if code == 503 else ""
        head = (f"HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
                f"Content-Length: {len(body)}\r\n{retry}Connection: close\r\n\r\n"
                ).encode("ascii")
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


# A 413 for the body limit is the refusal an honest client meets in normal use (an upload
# over the 16 MiB default, where uvicorn and gunicorn have no limit), so the operator hears
# of it at WARNING, with the option to raise; at most once per _BODY_WARN_S, saying how
# many went untold since, so a flood of uploads cannot flood the log.
cdef double _BODY_WARN_S = 10.0
cdef double _body_warned_at = -1e18  # the two guarded by _body_warn_lock: the loops of
cdef long _body_untold = 0  # every thread share one rate
cdef cython.pymutex _body_warn_lock


cdef void _warn_body_limit(mg.mg_connection *c, const char *why) noexcept with gil:
    global _body_warned_at, _body_untold
    cdef HttpGuard *g
    try:
        if not _log.isEnabledFor(30):
            return
        now = time_monotonic()
        with _body_warn_lock:
            if now - _body_warned_at < _BODY_WARN_S:
                _body_untold += 1
                return
            _body_warned_at = now
            untold, _body_untold = _body_untold, 0
        limit = ""
        if c.pfn == <mg.mg_event_handler_t>_http_guard and c.pfn_data != NULL:
            g = <HttpGuard *>c.pfn_data
            limit = f" of {_limit_text_core(g.limits.max_body_size)}"
        ip, port, _ = _addr_tuple(&c.rem)
        _log.warning(
            "answered 413 to %s:%d: %s%s; raise the limit with --max-body-size "
            "(CYMONGOOSE_MAX_BODY_SIZE, or the max_body_size keyword)%s", ip, port,
            why.decode("ascii"), limit,
            f"; {untold} more 413s since the last such warning" if untold else "")
    except BaseException:
        pass


cdef str _limit_text_core(size_t n):
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return f"{n >> 10} KiB"
    return f"{n} bytes"


cdef void _report_refusal(mg.mg_connection *c, int status, const char *why,
                          size_t body_len) noexcept with gil:
    """Manager.refusal_handler(conn, status, reason, request_line, body_size) for a request
    the guard answered itself (the access log's source for them). The request line is what
    the client sent up to its first line end (at most _REFUSED_LINE_MAX bytes), as latin-1;
    exceptions follow the handlers' rules (_route_exception)."""
    cdef GilSlot *slot = <GilSlot *>c.mgr.userdata
    cdef Manager manager
    cdef size_t n = 0, limit = c.recv.len
    if slot.finalizing or slot.manager == NULL:
        return
    manager = <Manager>slot.manager
    if manager._refusal_handler is None:
        return
    if limit > _REFUSED_LINE_MAX:
        limit = _REFUSED_LINE_MAX
    while n < limit and c.recv.buf[n] != 10:
        n += 1
    if n and c.recv.buf[n - 1] == 13:
        n -= 1
    try:
        line = (<char *>c.recv.buf)[:n].decode("latin-1") if n else ""
        manager._refusal_handler(_bind(c), status, why.decode("ascii"), line, body_len)
    except BaseException as exc:
        _route_exception(manager, exc)


cdef inline void _reset_front(HttpGuard *g) noexcept nogil:
    g.head_len = 0
    g.frame_len = 0
    g.content_length = 0
    g.chunk_pos = 0
    g.decoded = 0
    g.body_kind = _BODY_NONE


cdef size_t _send_refusal(mg.mg_connection *c, int status, const char *why,
                          bint head) noexcept nogil:
    """Log and queue the canned refusal for `status`; its body's size (0 for HEAD)."""
    cdef int i = 0
    while i < _N_REFUSALS - 1 and _REFUSAL_CODES[i] != status:
        i += 1
    cdef char date[_DATE_LINE_SIZE]
    cdef size_t split = _REFUSAL_LEN[i][1] - 2  # before the head's final CRLF
    _log_event(c, status, why)
    if status == 413:
        _warn_body_limit(c, why)  # _log_event took the GIL back: no switch
    # The canned head, the Date line (http_date.pxi), then the final CRLF and the body.
    mg.mg_send(c, _REFUSAL_DATA[i][head], split)
    mg.mg_send(c, date, _date_line(date))
    mg.mg_send(c, _REFUSAL_DATA[i][head] + split, _REFUSAL_LEN[i][head] - split)
    return 0 if head else _REFUSAL_LEN[i][0] - _REFUSAL_LEN[i][1]


cdef void _refuse(mg.mg_connection *c, HttpGuard *g, int status, const char *why,
                  bint head, uint64_t now) noexcept nogil:
    cdef size_t body_len = _send_refusal(c, status, why, head)
    _metrics_answered(c, g, status, True)
    # _log_event took the GIL back for this iteration: telling Python costs no switch.
    _report_refusal(c, status, why, body_len)
    c.recv.len = 0  # never parsed: not one byte of a refused request reaches a handler
    c.is_resp = 0
    _reset_front(g)
    _start_linger(c, g, now, True)
    _mark_refused(g)


cdef void _refuse_overload(mg.mg_connection *c, HttpGuard *g, uint64_t now) noexcept nogil:
    # limit_concurrency: the app has as many requests as it may; this one gets a 503 before
    # any Python code runs. Through the refusal path, so the connection closes (after the
    # linger): keeping it alive would mean discarding a body that may still be arriving
    # (streamed listeners refuse at the head) and dropping pipelined requests behind it,
    # while closing sheds the connection too and the client comes back after Retry-After.
    _refuse(c, g, 503, b"limit_concurrency reached", (g.flags & _GF_HEAD) != 0, now)


cdef void _start_linger(mg.mg_connection *c, HttpGuard *g, uint64_t now,
                        bint even_tls) noexcept nogil:
    """The server ends the connection once what is queued is sent: a refusal, or a
    response that ends it (Connection: close, HTTP/1.0, a body cut short). Closing with the
    client's bytes unread makes the kernel send a reset, which can destroy the end of the
    answer before the client reads it (RFC 9112 §9.6; a client still uploading, or sending
    the CRLF old clients add after a body). So, as nginx's lingering close: flush, half-close
    (the FIN tells the client the answer is whole), then read and discard until the client
    closes, has been quiet for linger_timeout_ms, has sent more than a request may hold, or
    linger_time_ms is over (_check_clock, _advance); after a refusal, linger_timeout_ms at
    most once it is out (_mark_refused). A TLS connection cannot half-close: it
    closes once flushed, as before, unless `even_tls` (a refusal, a body still arriving):
    then it still reads a while, without the FIN."""
    cdef const HttpLimits *lim = g.limits
    if (lim.linger_time_ms == 0 or lim.linger_timeout_ms == 0
            or (c.is_tls and not even_tls) or lim.h2_stream):
        # An HTTP/2 stream has no socket to linger on: it ends once its answer is out.
        c.is_draining = 1
        return
    if g.flags & _GF_PAUSED:
        _set_reading(c, g, True)
    g.body_ready = 0
    g.flags = 0
    g.seen_len = 0  # while lingering: the bytes discarded
    g.phase = _PH_LINGER
    g.linger_until_ms = now + lim.linger_time_ms
    g.deadline_ms = now + lim.linger_timeout_ms


cdef void _mark_refused(HttpGuard *g) noexcept nogil:
    # A response is lingered after for up to linger_time_ms (30 s, nginx's lingering_time), so
    # that a late pipelined request or the rest of an upload cannot reset it away. A refusal
    # owes the client less: it was refused for what it sent (or did not send in time), and a
    # client trickling a byte now and then held its slot for the whole 30 s (issue 33). So once
    # the refusal is written out, the linger ends within linger_timeout_ms (5 s) whatever the
    # client sends (_check_clock); an upload refused with a 413 still gets that long to stop.
    if g.phase == _PH_LINGER:
        g.flags |= _GF_REFUSED


cdef void _response_done(mg.mg_connection *c, HttpGuard *g, uint64_t now) noexcept nogil:
    cdef int flags = g.flags
    cdef uint64_t ka = g.limits.keepalive_timeout_ms
    _metrics_request_end(c, g, g.resp_status)
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
        _start_linger(c, g, now, False)  # Connection: close, HTTP/1.0 without keep-alive


cdef void _run_parser(mg.mg_connection *c, HttpGuard *g, size_t window) noexcept nogil:
    """Run Mongoose's http_cb on c->recv cut to its first `window` bytes, then put the rest
    back behind whatever http_cb left."""
    cdef size_t total = c.recv.len
    cdef unsigned char *buf = c.recv.buf
    cdef size_t size = c.recv.size
    cdef long zero = 0
    if window < total:
        c.recv.len = window
    g.flags |= _GF_IN_PARSER
    _mg_http_cb(c, mg.MG_EV_READ, <void *>&zero)
    g.flags &= ~_GF_IN_PARSER
    if window < total:
        # http_cb only deletes from the front (mg_iobuf_del moves and zeroes bytes below
        # `window`), so the cut-off tail is intact at buf + window. The buffer moves
        # without changing size only when a view outlived the handler (recv_views.pxi
        # pinned it): the replacement is a copy of the whole allocation, tail included.
        if (c.recv.buf == buf or c.recv.size == size) and c.recv.len <= window:
            memmove(c.recv.buf + c.recv.len, c.recv.buf + window, total - window)
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
        _sendfile_body(c, g, <mg.mg_fd *>g.inner_data)  # http.pxi: zero-copy file bodies
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
    g.core_head_at = 0
    g.flags &= ~_GF_DELIVERED
    _metrics_request_start(c, g)
    _run_parser(c, g, g.frame_len)
    if (c.is_draining and not c.is_closing and not c.is_websocket
            and (g.flags & (_GF_CLOSE | _GF_DELIVERED)) == (_GF_CLOSE | _GF_DELIVERED)):
        # http_cb's own close after answering "Connection: close": closing at once could
        # reset the answer away; _response_done() closes with a linger instead.
        c.is_draining = 0
    if not _adopt_protocol(c, g):
        # Left HTTP: a WebSocket counted its 101 in _ws_upgrade; anything else ends here.
        _metrics_request_end(c, g, g.resp_status)
        return
    if not (g.flags & _GF_DELIVERED):
        # http_cb refused what the guard accepted: a disagreement to look into, never a
        # reason to guess. It has already marked the connection for closing.
        _metrics_request_drop(c, g)
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
            r = _stream_advance(c, g, now)
            if g.proxy != NULL and r >= 0:
                _px_pump_request(<_Exchange *>g.proxy)  # proxy_exchange.pxi
            if r <= 0:
                return
            g.phase = _PH_RESP
            continue
        if g.phase == _PH_TUNNEL:
            _px_tunnel_up(c, g)
            return
        if g.phase == _PH_LINGER:
            if c.recv.len:
                g.seen_len += c.recv.len
                c.recv.len = 0
                g.deadline_ms = now + lim.linger_timeout_ms
                if g.seen_len > lim.max_header_size + lim.max_body_size:
                    # More than a whole request could hold: not a late byte, a flood.
                    _log_event(c, 0, b"more input while lingering than a request may hold")
                    c.is_closing = 1
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
            if (g.requests_seen == 0 and lim.http2 and mg.CYM_H2_BUILT
                    and (not c.is_tls or mg.cym_tls_alpn_h2(c))):
                # A client with prior knowledge of HTTP/2, or one that chose h2 by ALPN,
                # opens with its preface (http2.pxi).
                r = mg.cym_h2_preface_state(c.recv.buf, c.recv.len)
                if r == mg.CYM_H2_PARTIAL:
                    return
                if r == mg.CYM_H2_IS_PREFACE or c.is_tls:
                    # After ALPN h2 anything else is a connection error too (RFC 9113
                    # section 3.4): nghttp2 answers it with GOAWAY.
                    _h2_switch(c, g)
                    return
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
            # Before the merge below moves the head's bytes.
            _note_coding(c, g, <const char *>h.accept_encoding, h.accept_encoding_len)
            if h.flags & _GF_MERGE:
                h.head_len = _merge_connection_lines(c, h.head_len)
                h.flags &= ~_GF_MERGE
                if h.head_len == 0:
                    _log_event(c, 0, b"out of memory joining Connection lines")
                    c.is_closing = 1
                    return
            g.head_len = h.head_len
            g.content_length = h.content_length
            g.body_kind = h.body_kind
            g.flags = h.flags
            g.chunk_pos = 0
            g.decoded = 0
            g.frame_len = 0 if h.body_kind == _BODY_CHUNKED else h.head_len + h.content_length
            if _is_health_probe(c, g):
                _answer_health(c, g, now)  # before the limit: probes are always answered
                continue
            if mg.cym_load_int(&(<GilSlot *>c.mgr.userdata).health_state) == _HEALTH_DRAINING:
                # A stopping server (its --drain-delay included) ends each connection after
                # its answer, so a client moves on while the server still serves rather than
                # sending on a keep-alive connection that the drain is about to close.
                g.flags = (g.flags | _GF_CLOSE) & ~_GF_KEEPALIVE
            if _static_claim(c, g, now):  # a static mount (http_static_mounts.pxi)
                continue
            if _px_claim(c, g, now):  # a reverse-proxy route (proxy_exchange.pxi)
                continue
            if lim.stream_body:
                if _over_limit(c):
                    _refuse_overload(c, g, now)
                    return
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
            if _over_limit(c):
                _refuse_overload(c, g, now)
                return
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


cdef bint _connection_line(const unsigned char *p, size_t n, size_t *vs,
                           size_t *ve) noexcept nogil:
    """Whether p[:n] (a field line, CRLF excluded) is a Connection field; its value, without
    the optional whitespace around it, is p[vs:ve]."""
    if n < 11 or p[10] != c':' or not _ieq(p, 10, b"connection"):
        return False
    vs[0] = 11
    while vs[0] < n and (p[vs[0]] == 32 or p[vs[0]] == 9):
        vs[0] += 1
    ve[0] = n
    while ve[0] > vs[0] and (p[ve[0] - 1] == 32 or p[ve[0] - 1] == 9):
        ve[0] -= 1
    return True


cdef size_t _merge_connection_lines(mg.mg_connection *c, size_t head_len) noexcept nogil:
    """Make the request's Connection lines one, "Connection: a, b" where the first was, in
    place (the parser validated the head: CRLF line ends, no folding). The head only
    shrinks, by at least 10 bytes per line dropped; the bytes after it move up. Returns the
    new head length (0: no memory)."""
    cdef unsigned char *b = c.recv.buf
    cdef unsigned char *out = <unsigned char *>calloc(head_len, 1)
    cdef size_t i = 0, e, j, k, w, vs = 0, ve = 0
    cdef bint merged = False
    if out == NULL:
        return 0
    while b[i] != 10:  # the request line, as it is
        i += 1
    i += 1
    memcpy(out, b, i)
    w = i
    while i < head_len:
        e = i
        while b[e] != 13:
            e += 1
        if e == i:  # the empty line that ends the head
            memcpy(out + w, b"\r\n", 2)
            w += 2
            break
        if not _connection_line(b + i, e - i, &vs, &ve):
            memcpy(out + w, b + i, e + 2 - i)
            w += e + 2 - i
        elif not merged:  # the first one gets every value, in order; the others go
            merged = True
            memcpy(out + w, b"Connection: ", 12)
            w += 12
            memcpy(out + w, b + i + vs, ve - vs)
            w += ve - vs
            j = e + 2
            while True:
                k = j
                while b[k] != 13:
                    k += 1
                if k == j:
                    break
                if _connection_line(b + j, k - j, &vs, &ve) and ve > vs:
                    memcpy(out + w, b", ", 2)
                    memcpy(out + w + 2, b + j + vs, ve - vs)
                    w += 2 + ve - vs
                j = k + 2
            memcpy(out + w, b"\r\n", 2)
            w += 2
        i = e + 2
    memcpy(b, out, w)
    memmove(b + w, b + head_len, c.recv.len - head_len)
    c.recv.len -= head_len - w
    free(out)
    return w


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
            if g.flags & _GF_REFUSED:
                # The refusal is out: from now on, linger_timeout_ms at most (_mark_refused).
                g.flags &= ~_GF_REFUSED
                if g.linger_until_ms > now + lim.linger_timeout_ms:
                    g.linger_until_ms = now + lim.linger_timeout_ms
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


cdef void _maybe_quiet(mg.mg_connection *c, HttpGuard *g, uint64_t now) noexcept nogil:
    # An idle keep-alive connection whose handler does not take MG_EV_POLL needs nothing
    # until its timeout or its next byte: the loop parks it off its list until then
    # (PARKING in build_fixes.py), so 15,000 idle clients cost no work per iteration. Its
    # I/O, its deadline, or any Connection method (cym_unpark) bring it back.
    if (c.recv.len or c.send.len or c.is_tls or c.is_closing or c.is_draining or c.is_resp
            or g.inner != NULL or g.file_fd >= 0 or c.fn != _on_event or c.fn_data == NULL
            or not (<Connection>c.fn_data)._skip_poll):
        return
    g.quiet.until = g.deadline_ms if g.deadline_ms else now + 1000
    g.quiet.park = 1


cdef void _maybe_skip_owed(mg.mg_connection *c, HttpGuard *g, uint64_t now) noexcept nogil:
    # A request handed to its handler whose response is still owed (an ASGI app awaiting its
    # database, a WSGI app on its thread), nothing buffered either way: MG_EV_POLL has nothing
    # to do for it (no phase clock runs in _PH_RESP, and the send clock restarts at 0 with
    # nothing queued) until the response is written (send.len), the client sends or goes
    # (readable), it is closed or drained, all of which end the loop's skip (QUIET_SKIP), or
    # a Connection method touches it (_unpark). Skipped, not parked: the handler writes to it.
    # Without it every poll called the guard of every connection whose app was still
    # working: with 64 clients waiting on a database, 64 calls per poll for nothing.
    if (not c.is_resp or c.recv.len or c.send.len or c.is_tls or c.is_closing
            or c.is_draining or g.inner != NULL or g.file_fd >= 0 or g.proxy != NULL
            or c.fn != _on_event or c.fn_data == NULL
            or not (<Connection>c.fn_data)._skip_poll):
        return
    g.quiet.until = now + 1000
    g.quiet.park = 0


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
    cdef long zero = 0
    if c.pfn != <mg.mg_event_handler_t>_http_guard or c.pfn_data == NULL or c.is_listening:
        return 0
    g = <HttpGuard *>c.pfn_data
    if (g.phase == _PH_STREAM and not (g.flags & _GF_BODY_DONE)) or g.phase == _PH_TUNNEL:
        return 0  # a streamed body cut short: close, so the app's read fails at once
    if _px_waits_unsent(g):
        # Proxied and still waiting for an upstream connection: a client that leaves now
        # must not cost a connection and a request upstream (load tests leave thousands
        # queued when they stop, which opened as many connections).
        return 0
    g.peer_eof = True
    # The loop may have marked it quiet (idle keep-alive) before this read in the same
    # iteration: with its reads paused it would then wait, skipped, for its keep-alive
    # deadline before _finish_after_eof closes it (found by the soak: a WSGI server held
    # every gone client's descriptor for keepalive_timeout_ms).
    g.quiet.until = 0
    c.is_full = 1
    _apply_is_full(c)
    # Tell the handler (MG_EV_READ with 0 bytes, as Mongoose does when a response ends):
    # an app waiting for the client to go away (ASGI's http.disconnect) looks now.
    if c.fn != NULL:
        c.fn(c, mg.MG_EV_READ, <void *>&zero)
    return 1


mg.cym_peer_eof_hook = _on_peer_eof
mg.cym_quiet_pfn = <mg.mg_event_handler_t>_http_guard


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
    if mg.cym_h2_is_stream(c):
        # An HTTP/2 stream (http2.pxi): its request line says HTTP/2.0; its connection
        # is counted once, as the TCP connection it travels on.
        conn._limits.h2_stream = True
        g.meter = _MT_STREAM
        g.h2_parent = mg.cym_h2_parent((<GilSlot *>c.mgr.userdata).h2_sessions, c)
    else:
        _metrics_conn_open(c, g)
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
    g.quiet.until = 0  # recomputed below after a poll; any other event ends the quiet
    if ev == mg.MG_EV_WRITE:
        g.send_since_ms = 0  # progress: the send clock restarts at the next poll
    elif ev == mg.MG_EV_POLL:
        _check_send_progress(c, g, (<uint64_t *>ev_data)[0])
    if ev == mg.MG_EV_CLOSE and g.encoder != NULL:
        _encoder_close(c, g)  # the response's body was cut short: its encoder goes too
    if g.file_fd >= 0:
        if ev == mg.MG_EV_CLOSE:
            _file_done(g)
        elif ev == mg.MG_EV_WRITE or ev == mg.MG_EV_POLL:
            _pump_file(c, g)
            if (ev == mg.MG_EV_WRITE and g.file_fd < 0 and g.static_quiet
                    and not c.is_resp and g.phase == _PH_RESP):
                # A static file's last byte is out: pipelined requests behind it go on
                # now, not at the next poll.
                _advance(c, g, mg.mg_millis())
    if g.inner != NULL:
        if ev == mg.MG_EV_READ and c.recv.len > _pipeline_cap(g.limits):
            _log_event(c, 0, b"pipelined input beyond one maximal request")
            c.is_closing = 1
        _run_inner(c, g, ev, ev_data)
        if g.inner != NULL:
            return
    if ev == mg.MG_EV_CLOSE:
        if g.proxy != NULL:
            _px_client_gone(c, g)
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
            elif g.phase == _PH_WAIT:
                _maybe_quiet(c, g, now)
            elif g.phase == _PH_RESP:
                _maybe_skip_owed(c, g, now)
            if g.proxy != NULL:
                _px_check_clock(c, g, now)
                if g.proxy != NULL:
                    _px_quiet(c, g, now)
    elif ev == mg.MG_EV_WRITE and g.phase == _PH_LINGER:
        _check_clock(c, g, mg.mg_millis())
    elif ev == mg.MG_EV_WRITE and g.proxy != NULL:
        _px_client_writable(c, g)


cdef void _install_http_guard(mg.mg_connection *c) noexcept:
    _put_in_front(c, _mg_http_cb, <mg.mg_event_handler_t>_http_guard)
