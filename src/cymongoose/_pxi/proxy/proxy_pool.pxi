# The reverse proxy's upstream connections (_UpConn): opened by mg_connect() with
# _px_upstream_event as their handler (no Python object, no GIL), kept per upstream on an
# idle stack, handed to the next request or to one waiting in the upstream's queue, retired
# when they or their address get old. What happens to an exchange whose upstream connection
# closed (a retry, the next upstream, a 502) is decided here too (_px_upstream_lost).

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
        if not uc.c.is_tls:
            # A backend closing an idle connection (its idle timeout, or right after a
            # response it did not mark "close") sends its FIN; it may be in our socket
            # buffer, unread because the loop has not turned yet. Seen now, it costs one
            # system call; seen after the request went out, it is a 502 or a retry. (A TLS
            # connection may hold a session ticket: data that is no sign of a close.)
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
    _px_deadline(ex, now + ex.conf.connect_timeout_ms)
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
                # "socket error: Connection refused" (build_fixes.py SOCKET_ERRNO): the
                # reason alone reads better in "cannot connect to the upstream (...)".
                if (strlen(<const char *>ev_data) > 14
                        and memcmp(ev_data, b"socket error: ", 14) == 0):
                    ev_data = <void *>(<const char *>ev_data + 14)
                strncpy(uc.err, <const char *>ev_data, sizeof(uc.err) - 1)
        return
    if ev == mg.MG_EV_CLOSE:
        _px_upstream_closed(uc)
        return
    if ev == mg.MG_EV_POLL:
        now = (<uint64_t *>ev_data)[0]
        if ex == NULL and uc.idle and now - uc.idle_since_ms >= uc.conf.idle_timeout_ms:
            u.is_closing = 1  # before the backend's own idle timeout closes it under us
        elif (ex != NULL and ex.client == NULL and ex.deadline_ms
              and now >= ex.deadline_ms):
            u.is_closing = 1  # an orphan whose upstream stalled: MG_EV_CLOSE frees it
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
        if ex.client == NULL:
            _px_free(ex)  # an orphan (_px_client_gone): nobody waits for it
        elif not finalizing:
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
    """uc closed while serving ex (which has its client)."""
    cdef bint nothing_sent
    if ex.state == _X_CONNECTING or (ex.state == _X_REQUEST and not ex.reused
                                     and uc.c.is_tls and uc.c.is_tls_hs):
        # A failed TLS handshake is a failed connect: the request waited for it and never
        # left, and a second handshake with the same upstream would fail the same way
        # (a refused certificate), so the route's next upstream is tried, not this one.
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
