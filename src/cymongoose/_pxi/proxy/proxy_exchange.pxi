# The reverse proxy's data path: one _Exchange per proxied request, between the client's
# connection (the guard's, http_guard.pxi) and a pooled upstream connection (_UpConn, run by
# _px_upstream_event). Everything here is C without the GIL: bytes move between the two
# connections' buffers, and Python is called only for a routing hook (once per request), the
# access log and error logs.
#
# Back-pressure both ways: the request body streams through the guard's streamed-body
# decoder (http_stream.pxi), which stops reading the client while _STREAM_HIGH bytes wait;
# we move them only while the upstream's send buffer is under _STREAM_HIGH. The response is
# moved only while the client's send buffer is under _STREAM_HIGH, and the upstream is not
# read while its bytes wait. So a proxied pair holds about 2 x 256 KiB per direction at most.

cdef enum:
    _X_QUEUED = 1  # waiting for a connection of its upstream (the pool is at its size)
    _X_CONNECTING = 2
    _X_REQUEST = 3  # the request is going out; no response head yet
    _X_RESPONSE = 4  # the response head went to the client; its body follows
    _X_TUNNEL = 5  # 101 Switching Protocols: bytes relayed as they are, both ways


cdef enum:
    # A response whose client left is read to its end (and the connection pooled) when at
    # most this much of it is left; a larger one closes the connection instead.
    _PX_ORPHAN_MAX = 256 * 1024

cdef enum:
    _PH_TUNNEL = 7  # a guard phase (http_guard.pxi): the connection is a proxied tunnel


cdef struct _UpConn:
    mg.mg_connection *c
    ProxyUpstream *up
    const ProxyConf *conf
    void *ex  # _Exchange * being served (NULL: idle in the pool, or closing)
    _UpConn *next_idle
    uint64_t idle_since_ms
    size_t served  # requests completed on this connection
    bint connected
    bint idle  # on its upstream's idle stack
    unsigned address_gen  # its upstream's address_gen when it was opened
    char err[160]  # Mongoose's error text, if any (MG_EV_ERROR)


cdef struct _Exchange:
    mg.mg_connection *client  # NULL once the client is gone
    HttpGuard *g
    const ProxyConf *conf
    ProxyGroup *grp  # NULL when the routing hook chose `only`
    ProxyUpstream *only
    ProxyUpstream *up  # the upstream in use
    _UpConn *uc
    _Exchange *next_waiting
    PxBuf head  # the upstream request head, kept until a response head came (a retry)
    char line[256]  # the client's request line, for logs (cut)
    size_t queued  # request bytes handed to uc's send buffer
    int state
    uint64_t deadline_ms
    uint64_t tried  # a bit per upstream index
    int fail_status  # what the client gets if no upstream is left: 502 or 504
    char fail_why[256]
    bint idempotent
    bint retried
    bint reused  # uc was taken from the pool
    bint body_sent  # request body bytes went upstream: never replayed
    bint req_done  # the whole request is queued on uc
    bint head_req
    bint upgrade  # a WebSocket handshake, passed on (proxy_upgrade.pxi)
    char ws_accept[32]  # the Sec-WebSocket-Accept its 101 must carry
    bint chunk_up  # the request body is sent chunked
    bint chunk_out  # the response body is sent chunked to the client
    bint up_close  # the upstream connection ends with this response
    int framing
    size_t resp_left
    int ck_state
    size_t ck_left
    size_t ck_line  # bytes of the current chunk-size or trailer line seen
    size_t resp_body  # body bytes sent to the client (access log)
    # The client's Referer and User-Agent for Manager.proxy_log_handler (copied only when
    # it is set: the client's head is gone from its buffer by the time the response ends).
    char *referer
    char *user_agent


cdef bint _px_idempotent(const char *m, size_t n) noexcept nogil:
    # RFC 9110 §9.2.2
    cdef const char *all = b" GET HEAD PUT DELETE OPTIONS TRACE "
    cdef size_t i = 0, total = strlen(all)
    while i + n + 1 < total:
        if all[i] == 32 and memcmp(all + i + 1, m, n) == 0 and all[i + 1 + n] == 32:
            return True
        i += 1
    return False


cdef inline void _px_deadline(_Exchange *ex, uint64_t when) noexcept nogil:
    # The client's connection may be skipped by the loop until the old deadline (_px_quiet):
    # a new one ends that, and the next poll settles the quiet again.
    ex.deadline_ms = when
    if ex.client != NULL:
        ex.g.quiet.until = 0  # never parked (park 0): skipped only


cdef void _px_quiet(mg.mg_connection *c, HttpGuard *g, uint64_t now) noexcept nogil:
    """After the client's poll: while the exchange only waits (for a connection, for the
    upstream's head, or in a quiet tunnel), the loop may skip the client's connection until
    the exchange's deadline; any byte either way, or a new deadline, ends the skip. Without
    it, 10,000 clients queued for a pool of 64 cost 10,000 calls per loop turn."""
    cdef _Exchange *ex = <_Exchange *>g.proxy
    if c.send.len or c.recv.len or c.is_tls:
        return
    if ex.state == _X_QUEUED or ex.state == _X_CONNECTING or (
            ex.state == _X_REQUEST and ex.req_done):
        g.quiet.until = ex.deadline_ms
        g.quiet.park = 0  # skipped, not parked: the upstream's side writes to it
    elif ex.state == _X_TUNNEL:
        g.quiet.until = now + 1000
        g.quiet.park = 0


cdef bint _px_waits_unsent(HttpGuard *g) noexcept nogil:
    """Whether the client's request is proxied and nothing of it has gone upstream yet
    (queued for a connection, or connecting): a client that ends its side then is gone, not
    half-closed, and the exchange is dropped rather than sent (see _on_peer_eof)."""
    cdef _Exchange *ex = <_Exchange *>g.proxy
    return ex != NULL and (ex.state == _X_QUEUED or ex.state == _X_CONNECTING)


cdef inline ProxyConf *_px_conf_of(mg.mg_connection *c) noexcept nogil:
    return <ProxyConf *>(<GilSlot *>c.mgr.userdata).proxy


cdef bint _px_claim(mg.mg_connection *c, HttpGuard *g, uint64_t now) noexcept nogil:
    """The guard has a valid request head at the front of c->recv: proxy it if a mount (or
    the routing hook) takes it. False leaves it to the app."""
    cdef ProxyConf *conf = _px_conf_of(c)
    cdef const unsigned char *p = c.recv.buf
    cdef size_t i = 0, s
    cdef ProxyGroup *grp
    cdef ProxyUpstream *only = NULL
    cdef int picked
    if conf == NULL:
        return False
    while p[i] != 32:
        i += 1
    s = i + 1
    i = s
    while p[i] != 32:
        i += 1
    grp = _px_match(conf, p + s, i - s)
    if conf.route != NULL:
        _take_gil_back(<GilSlot *>c.mgr.userdata)
        picked = _px_route(c, g, conf)
        if picked == -1:
            return False
        if picked >= 0:
            only = &conf.ups[picked]
            grp = NULL
    elif grp == NULL:
        return False
    _px_begin(c, g, conf, grp, only, now)
    return True


cdef int _px_route(mg.mg_connection *c, HttpGuard *g, ProxyConf *conf) noexcept with gil:
    """The routing hook's choice: an upstream index, or -1 for the app (the hook said
    None, raised, which goes to the error handler, or named no upstream of this proxy,
    which is logged)."""
    cdef mg.mg_http_message hm
    cdef ProxyTable table = <ProxyTable>conf.owner
    cdef int i
    cdef GilSlot *slot = <GilSlot *>c.mgr.userdata
    if slot.finalizing:
        return -1
    _split_head(<char *>c.recv.buf, g.head_len, &hm, NULL)
    try:
        headers = []
        for i in range(mg.MG_MAX_HTTP_HEADERS):
            if hm.headers[i].name.len == 0:
                break
            headers.append((_bytes_mg(hm.headers[i].name).decode("latin-1"),
                            _bytes_mg(hm.headers[i].value).decode("latin-1")))
        method = _bytes_mg(hm.method).decode("latin-1")
        path = _bytes_mg(hm.uri).decode("latin-1")
        answer = table._route(method, path, headers)
        if answer is None:
            return -1
        index = table._by_label.get(answer)
        if index is None:
            _log.error("proxy: the routing hook returned %r, which is not an upstream of "
                       "this proxy: the request goes to the app", answer)
            return -1
        return index
    except BaseException as exc:
        if slot.manager != NULL:
            _route_exception(<Manager>slot.manager, exc)
        return -1


cdef void _px_begin(mg.mg_connection *c, HttpGuard *g, ProxyConf *conf, ProxyGroup *grp,
                    ProxyUpstream *only, uint64_t now) noexcept nogil:
    """Take the request at the front of c->recv: its body will stream (the guard's streamed
    decoder), its head goes to an upstream."""
    cdef mg.mg_http_message hm
    cdef size_t head_len = g.head_len
    cdef size_t n
    cdef _Exchange *ex = <_Exchange *>calloc(1, sizeof(_Exchange))
    cdef const char *why = NULL
    cdef int websocket
    if ex == NULL:
        _refuse(c, g, 503, b"out of memory for a proxied request", (g.flags & _GF_HEAD) != 0,
                now)
        return
    _split_head(<char *>c.recv.buf, head_len, &hm, NULL)
    websocket = _px_ws_request(&hm, g, ex.ws_accept, &why)
    if websocket < 0:
        free(ex)
        _refuse(c, g, 400, why, (g.flags & _GF_HEAD) != 0, now)
        return
    ex.upgrade = websocket == 1
    ex.client = c
    ex.g = g
    ex.conf = conf
    ex.grp = grp
    ex.only = only
    ex.fail_status = 502
    ex.head_req = (g.flags & _GF_HEAD) != 0
    ex.idempotent = _px_idempotent(hm.method.buf, hm.method.len)
    ex.chunk_up = g.body_kind == _BODY_CHUNKED
    if (<GilSlot *>c.mgr.userdata).proxy_log_hook:
        ex.referer = _px_field_copy(&hm, b"Referer")
        ex.user_agent = _px_field_copy(&hm, b"User-Agent")
    n = 0
    while n < head_len and n < sizeof(ex.line) - 1 and c.recv.buf[n] != 13:
        ex.line[n] = <char>c.recv.buf[n]
        n += 1
    _stream_setup(c, g, now)  # the body streams through the guard, as for an app
    ex.head.p = NULL
    if not _px_build_head(ex, &hm):
        _px_free(ex)
        _refuse(c, g, 503, b"out of memory for a proxied request", (g.flags & _GF_HEAD) != 0,
                now)
        return
    if _stream_decode(c, g) < 0:
        _px_free(ex)
        return
    g.flags |= _GF_HEAD_OUT
    g.proxy = <void *>ex
    _metrics_request_start(c, g)
    _cut(c, 0, head_len)
    g.body_base = 0
    _px_acquire(ex, now)


cdef char *_px_field_copy(mg.mg_http_message *hm, const char *name) noexcept nogil:
    """A NUL-terminated copy of the client's first `name` field (NULL: absent, or no
    memory, which the log shows as absent)."""
    cdef mg.mg_str *v = mg.mg_http_get_header(hm, name)
    cdef char *out
    if v == NULL:
        return NULL
    out = <char *>calloc(v.len + 1, 1)
    if out != NULL:
        memcpy(out, v.buf, v.len)  # calloc'd: NUL-terminated
    return out


cdef bint _px_build_head(_Exchange *ex, mg.mg_http_message *hm) noexcept nogil:
    # Built against the first member; _px_acquire rebuilds it when a member with its own
    # path or authority is chosen (rare: members of one mount usually look alike).
    cdef ProxyUpstream *u = ex.only if ex.only != NULL else ex.grp.members[0]
    free(ex.head.p)
    memset(&ex.head, 0, sizeof(PxBuf))
    return _px_request_head(&ex.head, ex.client, ex.g, hm, ex.conf, ex.grp, u, ex.upgrade)


cdef void _px_acquire(_Exchange *ex, uint64_t now) noexcept nogil:
    """Find the exchange an upstream connection: a pooled one, a new one, or a place in its
    upstream's queue. With no upstream left, the client gets the failure."""
    cdef ProxyUpstream *u
    cdef _UpConn *uc
    cdef bint all_down = False
    while True:
        if ex.only != NULL:
            # The hook's choice is the request's only candidate: as for a route's only
            # upstream, a passive mark does not hold it out (_px_choose), the active check does.
            u = ex.only if not ((ex.tried >> ex.only.index) & 1) else NULL
            all_down = u != NULL and u.probe_down
            if all_down:
                u = NULL
        else:
            u = _px_choose(ex.conf, ex.grp, ex.tried, now, &all_down)
        if u == NULL:
            if all_down and ex.tried == 0:
                _px_fail(ex, 503, b"every upstream of this route is down", now)
            else:
                if ex.fail_why[0] == 0:
                    strcpy(ex.fail_why, b"no upstream left to try")
                _px_fail(ex, ex.fail_status, ex.fail_why, now)
            return
        ex.tried |= (<uint64_t>1) << u.index
        ex.up = u
        if _px_rebuild_needed(ex, u) and not _px_rebuild(ex, u):
            _px_fail(ex, 502, b"out of memory for the upstream request", now)
            return
        uc = _px_take_idle(u, now)
        if uc != NULL:
            ex.reused = True
            _px_bind(ex, uc)
            _px_send_head(ex, now)
            return
        ex.reused = False
        if u.n_open < ex.conf.pool_size:
            if _px_open(ex, u, now):
                return
            continue  # mg_connect failed at once: the next upstream
        # The pool is at its size: wait for a connection to come free.
        ex.state = _X_QUEUED
        _px_deadline(ex, now + ex.conf.connect_timeout_ms)
        ex.next_waiting = NULL
        if u.wait_tail != NULL:
            (<_Exchange *>u.wait_tail).next_waiting = ex
        else:
            u.wait_head = ex
        u.wait_tail = ex
        u.n_waiting += 1
        return


cdef bint _px_rebuild_needed(_Exchange *ex, ProxyUpstream *u) noexcept nogil:
    cdef ProxyUpstream *first = ex.only if ex.only != NULL else ex.grp.members[0]
    return u != first and (u.path_len != first.path_len or
                           strcmp(u.path, first.path) != 0 or
                           strcmp(u.authority, first.authority) != 0)


cdef bint _px_rebuild(_Exchange *ex, ProxyUpstream *u) noexcept nogil:
    # Only before any byte of the body moved (a retry never happens after one).
    cdef mg.mg_http_message hm
    cdef mg.mg_connection *c = ex.client
    cdef PxBuf b
    memset(&b, 0, sizeof(PxBuf))
    # The client's head is gone from c->recv; rebuilding from our own upstream head would
    # lose nothing but the prefix, so the path is swapped in the request line instead.
    cdef char *line_end = <char *>memchr(ex.head.p, 10, ex.head.len)
    cdef char *sp1 = <char *>memchr(ex.head.p, 32, ex.head.len)
    cdef ProxyUpstream *first = ex.only if ex.only != NULL else ex.grp.members[0]
    cdef size_t tail_at
    if line_end == NULL or sp1 == NULL:
        return False
    tail_at = <size_t>(sp1 + 1 - ex.head.p) + first.path_len
    _pb_add(&b, ex.head.p, <size_t>(sp1 + 1 - ex.head.p))
    _pb_add(&b, u.path, u.path_len)
    _pb_add(&b, ex.head.p + tail_at, ex.head.len - tail_at)
    if b.failed:
        free(b.p)
        return False
    free(ex.head.p)
    ex.head = b
    return True


cdef void _px_send_head(_Exchange *ex, uint64_t now) noexcept nogil:
    cdef mg.mg_connection *u = ex.uc.c
    ex.state = _X_REQUEST
    _px_deadline(ex, now + ex.conf.read_timeout_ms)
    ex.queued = ex.head.len
    ex.up.requests += 1
    mg.mg_send(u, ex.head.p, ex.head.len)
    _px_pump_request(ex)


cdef void _px_pump_request(_Exchange *ex) noexcept nogil:
    """Move the client's decoded body bytes to the upstream while it takes them."""
    cdef mg.mg_connection *c = ex.client
    cdef HttpGuard *g = ex.g
    cdef mg.mg_connection *u
    cdef size_t n
    cdef char line[24]
    cdef int k
    if (c == NULL or ex.uc == NULL or ex.req_done or
            (ex.state != _X_REQUEST and ex.state != _X_RESPONSE)):
        return
    u = ex.uc.c
    while g.body_ready and u.send.len < _STREAM_HIGH and not u.is_closing:
        n = g.body_ready
        if ex.chunk_up:
            k = _chunk_size_line(line, n)
            mg.mg_send(u, &line[k], <size_t>(23 - k))
            ex.queued += <size_t>(23 - k)
        mg.mg_send(u, c.recv.buf + g.body_base, n)
        ex.queued += n
        if ex.chunk_up:
            mg.mg_send(u, b"\r\n", 2)
            ex.queued += 2
        _cut(c, g.body_base, n)
        g.body_ready -= n
        ex.body_sent = True
    if (g.flags & _GF_BODY_DONE) and g.body_ready == 0:
        if ex.chunk_up:
            mg.mg_send(u, b"0\r\n\r\n", 5)
            ex.queued += 5
        ex.req_done = True
    _resume_if_drained(c, g)


cdef void _px_finish(_Exchange *ex, uint64_t now) noexcept nogil:
    cdef mg.mg_connection *c = ex.client
    cdef HttpGuard *g = ex.g
    if ex.chunk_out:
        mg.mg_send(c, b"0\r\n\r\n", 5)
    if ex.framing == _RF_CLOSE and not ex.chunk_out:
        g.flags |= _GF_CLOSE  # an HTTP/1.0 client: the close ends the body
    _px_release(ex, now)
    _px_client_done(ex, now)


cdef void _px_client_done(_Exchange *ex, uint64_t now) noexcept nogil:
    """The client's response is complete: hand the connection back to the guard, as
    http_end() does, and forget the exchange."""
    cdef mg.mg_connection *c = ex.client
    cdef HttpGuard *g = ex.g
    _px_access_log(ex)
    g.proxy = NULL
    _metrics_request_end(c, g, g.resp_status)
    if (g.flags & _GF_CLOSE) and not (g.flags & _GF_BODY_DONE):
        _linger_unread_body(c, g)
    elif g.flags & _GF_CLOSE:
        _start_linger(c, g, now, False)
    c.is_resp = 0
    _px_free(ex)


cdef void _px_free(_Exchange *ex) noexcept nogil:
    if ex.state == _X_QUEUED and ex.up != NULL:
        _px_unqueue(ex)
    if ex.uc != NULL:
        _px_detach_upstream(ex)
    free(ex.head.p)
    free(ex.referer)
    free(ex.user_agent)
    free(ex)


cdef void _px_abort_client(_Exchange *ex) noexcept nogil:
    """The response cannot be completed: what was queued goes out, then the close tells
    the client it is cut short."""
    cdef mg.mg_connection *c = ex.client
    ex.g.proxy = NULL
    _px_free(ex)
    c.is_draining = 1


cdef void _px_fail(_Exchange *ex, int status, const char *why, uint64_t now) noexcept nogil:
    """No response from any upstream: the client gets `status` (502, 503, 504), logged
    with the reason."""
    cdef mg.mg_connection *c = ex.client
    cdef HttpGuard *g = ex.g
    cdef const char *reason = (b"Bad Gateway" if status == 502 else b"Service Unavailable"
                               if status == 503 else b"Gateway Timeout")
    cdef char body[64]
    cdef char date[_DATE_LINE_SIZE]
    cdef PxBuf b
    _px_log(ex, status, why)
    if ex.uc != NULL:
        ex.uc.c.is_closing = 1
        _px_detach_upstream(ex)
    memset(&b, 0, sizeof(PxBuf))
    strcpy(body, reason)
    strcat(body, b"\n")
    _pb_str(&b, b"HTTP/1.1 ")
    _pb_num(&b, <size_t>status)
    _pb_str(&b, b" ")
    _pb_str(&b, reason)
    _pb_str(&b, b"\r\n")
    _date_line(date)  # http_date.pxi; an empty string when the clock cannot be read
    _pb_str(&b, date)
    _pb_str(&b, b"Content-Type: text/plain; charset=utf-8\r\nContent-Length: ")
    _pb_num(&b, strlen(body))
    if not (g.flags & _GF_BODY_DONE):
        g.flags |= _GF_CLOSE  # the rest of the body will not be read: the connection ends
    if g.flags & _GF_CLOSE:
        _pb_str(&b, b"\r\nConnection: close")
    elif g.flags & _GF_KEEPALIVE:
        _pb_str(&b, b"\r\nConnection: keep-alive")
    _pb_str(&b, b"\r\n\r\n")
    if not ex.head_req:
        _pb_str(&b, body)
        ex.resp_body = strlen(body)
    if not b.failed:
        mg.mg_send(c, b.p, b.len)
    free(b.p)
    g.resp_status = status
    _px_client_done(ex, now)


cdef void _px_log(_Exchange *ex, int status, const char *why) noexcept nogil:
    cdef GilSlot *slot
    if ex.client == NULL:
        return
    slot = <GilSlot *>ex.client.mgr.userdata
    if slot.finalizing:
        return
    _take_gil_back(slot)
    _px_log_gil(ex, status, why)


cdef void _px_log_gil(_Exchange *ex, int status, const char *why) noexcept with gil:
    try:
        ip, port, _ = _addr_tuple(&ex.client.rem)
        label = ex.up.label.decode("utf-8", "replace") if ex.up != NULL else "-"
        line = log_escape(ex.line.decode("latin-1"))  # the client's bytes (log_escape.pxi)
        if status:
            _log.warning("proxy: %d for \"%s\" from %s: %s (upstream %s)", status, line, ip,
                         why.decode("utf-8", "replace"), label)
        else:
            _log.warning("proxy: \"%s\" from %s cut short: %s (upstream %s)", line, ip,
                         why.decode("utf-8", "replace"), label)
    except BaseException:
        pass


cdef void _px_access_log(_Exchange *ex) noexcept nogil:
    cdef GilSlot *slot = <GilSlot *>ex.client.mgr.userdata
    cdef uint64_t took
    if (slot.finalizing or slot.manager == NULL
            or not (slot.proxy_log_hook or slot.refusal_hook)):
        return
    # From the request head (_px_begin's _metrics_request_start) to now, when the last byte
    # of the response went to the client's connection (or the proxy's own 5xx did).
    took = _now_ns() - ex.g.req_start_ns
    _take_gil_back(slot)
    _px_access_log_gil(ex, took)


cdef void _px_access_log_gil(_Exchange *ex, uint64_t took_ns) noexcept with gil:
    # The access log learns of proxied requests through Manager.proxy_log_handler, with the
    # request line the client sent, the duration and the client's Referer and User-Agent;
    # without one, through Manager.refusal_handler as of the guard's own answers (0.2.x).
    cdef GilSlot *slot = <GilSlot *>ex.client.mgr.userdata
    cdef Manager manager = <Manager>slot.manager
    try:
        line = ex.line.decode("latin-1")
        if manager._proxy_log_handler is not None:
            manager._proxy_log_handler(
                _bind(ex.client), ex.g.resp_status, line, ex.resp_body, took_ns * 1e-9,
                ex.referer.decode("latin-1") if ex.referer != NULL else None,
                ex.user_agent.decode("latin-1") if ex.user_agent != NULL else None)
        elif manager._refusal_handler is not None:
            manager._refusal_handler(_bind(ex.client), ex.g.resp_status, "proxied", line,
                                     ex.resp_body)
    except BaseException as exc:
        _route_exception(manager, exc)


cdef void _px_check_clock(mg.mg_connection *c, HttpGuard *g, uint64_t now) noexcept nogil:
    """The client's poll: the exchange's deadline (queue, connect, response head, body)."""
    cdef _Exchange *ex = <_Exchange *>g.proxy
    if ex.deadline_ms == 0 or now < ex.deadline_ms:
        return
    if ex.state == _X_QUEUED:
        _px_unqueue(ex)
        ex.state = 0
        _px_fail(ex, 503, b"no connection to the upstream came free within the connect "
                 b"timeout (the pool is at its size)", now)
    elif ex.state == _X_CONNECTING:
        _px_failed(ex.conf, ex.up, now)
        ex.uc.c.is_closing = 1
        _px_detach_upstream(ex)
        ex.fail_status = 504
        _px_why(ex, b"connecting to the upstream timed out", NULL)
        _px_acquire(ex, now)
    elif ex.state == _X_REQUEST:
        _px_failed(ex.conf, ex.up, now)
        _px_fail(ex, 504, b"no response head from the upstream within the read timeout",
                 now)
    elif ex.state == _X_RESPONSE:
        _px_log(ex, 0, b"no response body bytes from the upstream within the read timeout")
        _px_abort_client(ex)


cdef void _px_client_writable(mg.mg_connection *c, HttpGuard *g) noexcept nogil:
    # The client took some of its output: move more when under the low mark.
    cdef _Exchange *ex = <_Exchange *>g.proxy
    if c.send.len >= _STREAM_LOW:
        return
    if ex.state == _X_RESPONSE:
        _px_relay(ex, mg.mg_millis(), False, False)
    elif ex.state == _X_TUNNEL:
        _px_tunnel_down(ex, False)


cdef void _px_client_gone(mg.mg_connection *c, HttpGuard *g) noexcept nogil:
    """The client closed mid-exchange. Its upstream connection can carry another request
    only once this response is read to its end: when the request went out whole and what
    is left of the response is small, the exchange goes on without a client and throws the
    rest away (an orphan, _px_relay), then pools the connection. Otherwise the connection
    closes. Without this, every client a load test leaves behind costs a connection."""
    cdef _Exchange *ex = <_Exchange *>g.proxy
    g.proxy = NULL
    ex.client = NULL
    ex.g = NULL
    if (ex.uc != NULL and ex.req_done and not ex.up_close and not ex.head_req
            and (ex.state == _X_REQUEST or (ex.state == _X_RESPONSE and (
                ex.framing == _RF_CHUNKED or
                (ex.framing == _RF_LENGTH and ex.resp_left <= _PX_ORPHAN_MAX))))):
        ex.chunk_out = False
        ex.resp_body = 0  # from here on: bytes thrown away, at most _PX_ORPHAN_MAX
        if ex.state == _X_RESPONSE:
            _px_relay(ex, mg.mg_millis(), False, True)  # may finish (and free) it
        return
    _px_free(ex)
