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
    bint upgrade
    bint chunk_up  # the request body is sent chunked
    bint chunk_out  # the response body is sent chunked to the client
    bint up_close  # the upstream connection ends with this response
    int framing
    size_t resp_left
    int ck_state
    size_t ck_left
    size_t ck_line  # bytes of the current chunk-size or trailer line seen
    size_t resp_body  # body bytes sent to the client (access log)


cdef bint _px_idempotent(const char *m, size_t n) noexcept nogil:
    # RFC 9110 §9.2.2
    cdef const char *all = b" GET HEAD PUT DELETE OPTIONS TRACE "
    cdef size_t i = 0, total = strlen(all)
    while i + n + 1 < total:
        if all[i] == 32 and memcmp(all + i + 1, m, n) == 0 and all[i + 1 + n] == 32:
            return True
        i += 1
    return False


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
    _split_head(<char *>c.recv.buf, g.head_len, &hm)
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
    cdef const char *cont = b"HTTP/1.1 100 Continue\r\n\r\n"
    if ex == NULL:
        _refuse(c, g, 503, b"out of memory for a proxied request", (g.flags & _GF_HEAD) != 0,
                now)
        return
    _split_head(<char *>c.recv.buf, head_len, &hm)
    ex.client = c
    ex.g = g
    ex.conf = conf
    ex.grp = grp
    ex.only = only
    ex.fail_status = 502
    ex.head_req = (g.flags & _GF_HEAD) != 0
    ex.idempotent = _px_idempotent(hm.method.buf, hm.method.len)
    ex.chunk_up = g.body_kind == _BODY_CHUNKED
    ex.upgrade = _px_is_upgrade(&hm)
    n = 0
    while n < head_len and n < sizeof(ex.line) - 1 and c.recv.buf[n] != 13:
        ex.line[n] = <char>c.recv.buf[n]
        n += 1
    # The guard's streamed-body set-up, as _stream_begin() does it for an app.
    g.flags |= _GF_STREAM
    g.phase = _PH_STREAM
    g.body_ready = 0
    g.chunk_state = _CK_SIZE
    g.decoded = 0
    g.body_refused = 0
    g.body_base = head_len
    g.wire_total = 0
    g.progress_mark = 0
    if g.body_kind == _BODY_LENGTH:
        g.body_left = g.content_length
    elif g.body_kind == _BODY_NONE:
        g.flags |= _GF_BODY_DONE
    g.deadline_ms = (now + g.limits.body_timeout_ms
                     if g.limits.body_timeout_ms and g.body_kind != _BODY_NONE else 0)
    if g.flags & _GF_EXPECT:
        g.flags |= _GF_CONTINUED
        mg.mg_send(c, cont, strlen(cont))
    c.is_resp = 1
    g.head_len = 0
    ex.head.p = NULL
    if not _px_build_head(ex, &hm):
        free(ex.head.p)
        free(ex)
        _refuse(c, g, 503, b"out of memory for a proxied request", (g.flags & _GF_HEAD) != 0,
                now)
        return
    if _stream_decode(c, g) < 0:
        free(ex.head.p)
        free(ex)
        return
    g.flags |= _GF_HEAD_OUT
    g.proxy = <void *>ex
    _metrics_request_start(c, g)
    _cut(c, 0, head_len)
    g.body_base = 0
    _px_acquire(ex, now)


cdef bint _px_is_upgrade(mg.mg_http_message *hm) noexcept nogil:
    cdef PxTokens t
    cdef bint has_upgrade = False
    cdef int i
    memset(&t, 0, sizeof(PxTokens))
    for i in range(mg.MG_MAX_HTTP_HEADERS):
        if hm.headers[i].name.len == 0:
            break
        if _px_kind(<const unsigned char *>hm.headers[i].name.buf,
                    hm.headers[i].name.len) == _FK_CONNECTION:
            _px_tokens(&t, <const unsigned char *>hm.headers[i].value.buf,
                       hm.headers[i].value.len)
        elif _ieq(<const unsigned char *>hm.headers[i].name.buf, hm.headers[i].name.len,
                  b"upgrade"):
            has_upgrade = True
    return t.upgrade and has_upgrade


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
            u = ex.only if not ((ex.tried >> ex.only.index) & 1) else NULL
            all_down = u != NULL and not _px_usable(ex.conf, u, now)
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
        ex.deadline_ms = now + ex.conf.connect_timeout_ms
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


cdef _UpConn *_px_take_idle(ProxyUpstream *u, uint64_t now) noexcept nogil:
    cdef _UpConn *uc
    cdef char probe
    cdef ssize_t r
    while u.idle != NULL:
        uc = <_UpConn *>u.idle
        u.idle = uc.next_idle
        u.n_idle -= 1
        uc.idle = False
        uc.next_idle = NULL
        if uc.c.is_closing or uc.c.is_draining:
            continue
        if now - uc.idle_since_ms >= _PX_PEEK_AFTER_MS and not uc.c.is_tls:
            # A backend closing an idle connection sends its FIN; it may be in our socket
            # buffer, unread because the loop has not turned yet. Seen now, it costs
            # nothing; seen after the request went out, it is a 502 or a retry.
            r = recv(<int><size_t>uc.c.fd, &probe, 1, MSG_PEEK | MSG_DONTWAIT)
            if r >= 0 or (errno != EAGAIN and errno != EINTR):
                uc.c.is_closing = 1
                continue
        return uc
    return NULL


cdef void _px_retire_address(ProxyUpstream *u) noexcept nogil:
    """The upstream's name resolved to a new address: its idle connections close now, its
    busy ones after their response (_px_release)."""
    cdef _UpConn *uc = <_UpConn *>u.idle
    u.address_gen += 1
    while uc != NULL:
        uc.c.is_closing = 1  # MG_EV_CLOSE takes it off the idle stack
        uc = uc.next_idle


cdef void _px_bind(_Exchange *ex, _UpConn *uc) noexcept nogil:
    ex.uc = uc
    uc.ex = <void *>ex
    uc.up.n_busy += 1


cdef bint _px_open(_Exchange *ex, ProxyUpstream *u, uint64_t now) noexcept nogil:
    cdef _UpConn *uc = <_UpConn *>calloc(1, sizeof(_UpConn))
    cdef mg.mg_connection *c
    if uc == NULL:
        ex.fail_status = 502
        strcpy(ex.fail_why, b"out of memory for an upstream connection")
        return False
    uc.up = u
    uc.conf = ex.conf
    uc.address_gen = u.address_gen
    u.n_open += 1
    u.opened += 1
    _px_bind(ex, uc)
    ex.state = _X_CONNECTING
    ex.deadline_ms = now + ex.conf.connect_timeout_ms
    c = mg.mg_connect(ex.client.mgr, u.connect_url, <mg.mg_event_handler_t>_px_upstream_event,
                      <void *>uc)
    if c == NULL:
        u.n_open -= 1
        u.n_busy -= 1
        ex.uc = NULL
        free(uc)
        ex.fail_status = 502
        strcpy(ex.fail_why, b"cannot open a connection to the upstream")
        return False
    uc.c = c
    return True


cdef void _px_send_head(_Exchange *ex, uint64_t now) noexcept nogil:
    cdef mg.mg_connection *u = ex.uc.c
    ex.state = _X_REQUEST
    ex.deadline_ms = now + ex.conf.read_timeout_ms
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
    cdef PxBuf sizeline
    if (c == NULL or ex.uc == NULL or ex.req_done or
            (ex.state != _X_REQUEST and ex.state != _X_RESPONSE)):
        return
    u = ex.uc.c
    while g.body_ready and u.send.len < _STREAM_HIGH and not u.is_closing:
        n = g.body_ready
        if ex.chunk_up:
            memset(&sizeline, 0, sizeof(PxBuf))
            sizeline.p = line
            sizeline.size = sizeof(line)
            _pb_num(&sizeline, n, True)
            _pb_add(&sizeline, b"\r\n", 2)
            mg.mg_send(u, line, sizeline.len)
            ex.queued += sizeline.len
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


cdef void _px_upstream_event(mg.mg_connection *u, int ev, void *ev_data) noexcept nogil:
    cdef _UpConn *uc = <_UpConn *>u.fn_data
    cdef _Exchange *ex
    cdef uint64_t now
    if uc == NULL:
        return
    if ev == mg.MG_EV_OPEN:
        uc.c = u
        return
    if ev == mg.MG_EV_RESOLVE:
        # Before connect(): a TLS session set up now starts its handshake as soon as the
        # TCP one is done (Mongoose's connect_conn), and our request waits for it.
        if uc.up.tls_ctx != NULL and u.tls == NULL:
            if mg.cym_tls_attach(u, uc.up.tls_ctx, uc.up.tls_name, strlen(uc.up.tls_name),
                                 1 if uc.up.tls_verifies else 0, 1 if uc.up.tls_skip else 0,
                                 1) != 0:
                strcpy(uc.err, b"out of memory for a TLS session")
                u.is_closing = 1
        return
    ex = <_Exchange *>uc.ex
    if ev == mg.MG_EV_ERROR:
        if uc.err[0] == 0 and not (u.is_tls and
                                   mg.cym_tls_verify_error(u, uc.err, sizeof(uc.err))):
            if ev_data != NULL:
                strncpy(uc.err, <const char *>ev_data, sizeof(uc.err) - 1)
        return
    if ev == mg.MG_EV_CLOSE:
        _px_upstream_closed(uc)
        return
    if ev == mg.MG_EV_POLL:
        now = (<uint64_t *>ev_data)[0]
        if ex == NULL and uc.idle and now - uc.idle_since_ms >= uc.conf.idle_timeout_ms:
            u.is_closing = 1  # before the backend's own idle timeout closes it under us
        return
    if ex == NULL:
        if ev == mg.MG_EV_READ and u.recv.len:
            # Bytes from an idle connection answer nothing: the connection is broken.
            u.is_closing = 1
        return
    now = mg.mg_millis()
    if ev == mg.MG_EV_CONNECT:
        uc.connected = True
        _px_send_head(ex, now)
    elif ev == mg.MG_EV_WRITE:
        if ex.state == _X_TUNNEL:
            if ex.client != NULL:
                _px_tunnel_up(ex.client, ex.g)
        else:
            _px_pump_request(ex)
    elif ev == mg.MG_EV_READ:
        _px_upstream_read(ex, now)


cdef void _px_upstream_closed(_UpConn *uc) noexcept nogil:
    cdef ProxyUpstream *u = uc.up
    cdef _Exchange *ex = <_Exchange *>uc.ex
    cdef _Exchange *waiter
    cdef _UpConn *prev
    cdef uint64_t now = mg.mg_millis()
    cdef bint finalizing = (<GilSlot *>uc.c.mgr.userdata).finalizing
    cdef size_t pool_size = uc.conf.pool_size
    if ex != NULL and not finalizing and ex.client != NULL and uc.c.recv.len:
        # What arrived before the close still goes to the client (it may complete a body
        # the close ends); the client's buffer limit does not hold this last time.
        if ex.state == _X_RESPONSE:
            _px_relay(ex, now, uc.err[0] == 0, True)
        elif ex.state == _X_TUNNEL:
            _px_tunnel_down(ex, True)
        ex = <_Exchange *>uc.ex
    elif ex != NULL and not finalizing and ex.client != NULL and ex.state == _X_RESPONSE:
        _px_relay(ex, now, uc.err[0] == 0, True)
        ex = <_Exchange *>uc.ex
    u.n_open -= 1
    if uc.idle:
        if u.idle == <void *>uc:
            u.idle = uc.next_idle
        else:
            prev = <_UpConn *>u.idle
            while prev != NULL and prev.next_idle != uc:
                prev = prev.next_idle
            if prev != NULL:
                prev.next_idle = uc.next_idle
        u.n_idle -= 1
    uc.c.fn_data = NULL
    if ex != NULL:
        u.n_busy -= 1
        ex.uc = NULL
        uc.ex = NULL
        if not finalizing:
            _px_upstream_lost(ex, uc, now)
    free(uc)
    # A slot of the pool is free: the first request waiting for this upstream takes it.
    if not finalizing and u.wait_head != NULL and u.n_open < pool_size:
        waiter = _px_dequeue(u)
        if waiter != NULL and not _px_open(waiter, u, now):
            _px_acquire(waiter, now)


cdef _Exchange *_px_dequeue(ProxyUpstream *u) noexcept nogil:
    cdef _Exchange *ex = <_Exchange *>u.wait_head
    if ex == NULL:
        return NULL
    u.wait_head = ex.next_waiting
    if u.wait_head == NULL:
        u.wait_tail = NULL
    u.n_waiting -= 1
    ex.next_waiting = NULL
    return ex


cdef void _px_unqueue(_Exchange *ex) noexcept nogil:
    cdef ProxyUpstream *u = ex.up
    cdef _Exchange *prev = NULL
    cdef _Exchange *it = <_Exchange *>u.wait_head
    while it != NULL and it != ex:
        prev = it
        it = it.next_waiting
    if it == NULL:
        return
    if prev == NULL:
        u.wait_head = ex.next_waiting
    else:
        prev.next_waiting = ex.next_waiting
    if u.wait_tail == <void *>ex:
        u.wait_tail = prev
    u.n_waiting -= 1
    ex.next_waiting = NULL


cdef void _px_upstream_lost(_Exchange *ex, _UpConn *uc, uint64_t now) noexcept nogil:
    """uc closed while serving ex."""
    cdef bint nothing_sent
    if ex.client == NULL:
        return
    if ex.state == _X_CONNECTING:
        _px_failed(ex.conf, ex.up, now)
        ex.fail_status = 502
        _px_why(ex, b"cannot connect to the upstream", uc.err)
        _px_acquire(ex, now)
        return
    if ex.state == _X_REQUEST:
        # Nothing left our send buffer (the connection was dead before we wrote), or the
        # method may be repeated and no body went out: one more try, on a new connection.
        nothing_sent = uc.c.send.len == ex.queued
        if not ex.retried and (nothing_sent or (ex.idempotent and not ex.body_sent)):
            ex.retried = True
            ex.req_done = False
            ex.queued = 0
            _px_why(ex, b"the upstream closed the connection before a response", uc.err)
            if not ex.reused:
                _px_failed(ex.conf, ex.up, now)
            if ex.reused or ex.only != NULL or ex.grp.n == 1:
                # Most likely a pooled connection the backend had closed: a fresh one to
                # the same upstream.
                ex.reused = False
                if ex.up.n_open < ex.conf.pool_size and _px_open(ex, ex.up, now):
                    return
                ex.tried &= ~((<uint64_t>1) << ex.up.index)
            _px_acquire(ex, now)
            return
        if not ex.reused:
            _px_failed(ex.conf, ex.up, now)
        _px_why(ex, b"the upstream closed the connection before a response", uc.err)
        _px_fail(ex, 502, ex.fail_why, now)
        return
    if ex.state == _X_RESPONSE:
        # (_px_upstream_closed relayed the rest; a body the close ends is finished there)
        _px_why(ex, b"the upstream closed the connection in the middle of the response",
                uc.err)
        _px_log(ex, 0, ex.fail_why)
        _px_abort_client(ex)
        return
    if ex.state == _X_TUNNEL:
        _px_abort_client(ex)


cdef void _px_why(_Exchange *ex, const char *what, const char *detail) noexcept nogil:
    cdef size_t n
    strncpy(ex.fail_why, what, sizeof(ex.fail_why) - 1)
    if detail != NULL and detail[0]:
        n = strlen(ex.fail_why)
        if n + 4 < sizeof(ex.fail_why):
            strncat(ex.fail_why, b" (", sizeof(ex.fail_why) - n - 1)
            strncat(ex.fail_why, detail, sizeof(ex.fail_why) - strlen(ex.fail_why) - 2)
            strncat(ex.fail_why, b")", sizeof(ex.fail_why) - strlen(ex.fail_why) - 1)


cdef void _px_upstream_read(_Exchange *ex, uint64_t now) noexcept nogil:
    cdef mg.mg_connection *u = ex.uc.c
    cdef mg.mg_connection *c = ex.client
    cdef HttpGuard *g = ex.g
    cdef PxResp r
    cdef int rc
    if c == NULL:
        u.is_closing = 1
        return
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
                _px_fail(ex, 502, r.why, now)
                return
            if r.status == 101 and ex.upgrade:
                _px_start_tunnel(ex, &r, now)
                return
            if r.status < 200:
                if r.status == 101:
                    u.is_closing = 1
                    _px_detach_upstream(ex)
                    _px_fail(ex, 502, b"the upstream switched protocols unasked", now)
                    return
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
        ex.deadline_ms = now + ex.conf.read_timeout_ms
    _px_relay(ex, now, False, False)


cdef void _px_chunk_out(mg.mg_connection *c, _Exchange *ex, const void *data,
                        size_t n) noexcept nogil:
    cdef char line[24]
    cdef PxBuf b
    if n == 0:
        return
    if ex.chunk_out:
        memset(&b, 0, sizeof(PxBuf))
        b.p = line
        b.size = sizeof(line)
        _pb_num(&b, n, True)
        _pb_add(&b, b"\r\n", 2)
        mg.mg_send(c, line, b.len)
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
        while not done and u.recv.len and (flush_all or c.send.len < _STREAM_HIGH):
            b = u.recv.buf
            if ex.framing == _RF_LENGTH:
                n = u.recv.len if u.recv.len < ex.resp_left else ex.resp_left
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
            _px_abort_client(ex)
            return
    if upstream_eof and ex.framing == _RF_CLOSE:
        done = True
    if done:
        if u != NULL and u.recv.len:
            ex.up_close = True  # bytes after the end of the response: not to be trusted
        _px_finish(ex, now)
        return
    if u != NULL:
        # Back-pressure: while the client has not taken what waits, the upstream is not read
        # (its TCP window closes) and its read clock stops.
        if u.recv.len and c.send.len >= _STREAM_HIGH:
            if not u.is_full:
                u.is_full = 1
                _apply_is_full(u)
            ex.deadline_ms = 0
        else:
            if u.is_full:
                u.is_full = 0
                _apply_is_full(u)
            ex.deadline_ms = now + ex.conf.read_timeout_ms


cdef void _px_detach_upstream(_Exchange *ex) noexcept nogil:
    """Let go of the upstream connection, which is closing (it is not pooled)."""
    cdef _UpConn *uc = ex.uc
    if uc == NULL:
        return
    uc.c.is_closing = 1
    uc.ex = NULL
    uc.up.n_busy -= 1
    ex.uc = NULL


cdef void _px_release(_Exchange *ex, uint64_t now) noexcept nogil:
    """The response is complete: the upstream connection goes back to the pool (or to the
    first request waiting for one) when it can carry another request, else it closes."""
    cdef _UpConn *uc = ex.uc
    cdef ProxyUpstream *u
    cdef _Exchange *waiter
    if uc == NULL:
        return
    u = uc.up
    if (not ex.req_done or ex.up_close or uc.c.is_closing or uc.c.recv.len
            or uc.address_gen != u.address_gen):
        _px_detach_upstream(ex)
        return
    uc.ex = NULL
    u.n_busy -= 1
    ex.uc = NULL
    uc.served += 1
    if uc.c.is_full:
        uc.c.is_full = 0  # an idle connection is read: its close is how we learn of it
        _apply_is_full(uc.c)
    waiter = _px_dequeue(u)
    if waiter != NULL:
        waiter.reused = True
        _px_bind(waiter, uc)
        _px_send_head(waiter, now)
        return
    uc.idle = True
    uc.idle_since_ms = now
    uc.next_idle = <_UpConn *>u.idle
    u.idle = uc
    u.n_idle += 1


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
    cdef PxBuf b
    _px_log(ex, status, why)
    if ex.uc != NULL:
        ex.uc.c.is_closing = 1
        _px_detach_upstream(ex)
    memset(&b, 0, sizeof(PxBuf))
    strcpy(body, reason)
    strcat(body, b"\n")
    _pb_str(&b, b"HTTP/1.1 ")
    _pb_num(&b, <size_t>status, False)
    _pb_str(&b, b" ")
    _pb_str(&b, reason)
    _pb_str(&b, b"\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ")
    _pb_num(&b, strlen(body), False)
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
        line = ex.line.decode("latin-1")
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
    if slot.finalizing or slot.manager == NULL or not slot.refusal_hook:
        return
    _take_gil_back(slot)
    _px_access_log_gil(ex)


cdef void _px_access_log_gil(_Exchange *ex) noexcept with gil:
    # The access log learns of proxied requests as of the guard's own answers: through
    # Manager.refusal_handler, with the request line the client sent.
    cdef GilSlot *slot = <GilSlot *>ex.client.mgr.userdata
    cdef Manager manager = <Manager>slot.manager
    if manager._refusal_handler is None:
        return
    try:
        manager._refusal_handler(_bind(ex.client), ex.g.resp_status, "proxied",
                                 ex.line.decode("latin-1"), ex.resp_body)
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
    """The client closed mid-exchange: the upstream connection cannot be reused (its
    response is not read to the end), unless that response was already complete."""
    cdef _Exchange *ex = <_Exchange *>g.proxy
    g.proxy = NULL
    ex.client = NULL
    _px_free(ex)


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
    ex.deadline_ms = 0
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
