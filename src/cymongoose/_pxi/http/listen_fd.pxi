# Manager-side listening on a socket opened outside Mongoose: a Unix socket, an inherited
# descriptor (systemd, a supervisor's shared socket) or an SO_REUSEPORT one. Mongoose 7.23
# opens only its own TCP/UDP listeners; mg_wrapfd() adopts any descriptor, and this module
# makes the adopted one a listener the way mg_listen()/mg_http_listen() would.

def listen_fd(Manager manager not None, sock, handler=None, *, http=False, tls=False,
              stream_body=False, http2=None, **limits):
    manager._ensure_open()
    _check_handler(handler, "handler")
    if type(stream_body) is not bool or type(http) is not bool or type(tls) is not bool:
        raise TypeError("http, tls and stream_body must be True or False")
    if (stream_body or limits or tls) and not http:
        raise ValueError("stream_body, tls and HTTP limits apply to HTTP listeners only "
                         "(http=True)")
    cdef int fd = sock if isinstance(sock, int) else sock.fileno()
    import_socket()
    probe = socket_socket(fileno=os_dup(fd))  # checks fd; closed below, not fd
    try:
        if probe.type != socket_SOCK_STREAM:
            raise ValueError("listen_fd() takes a stream socket (TCP or Unix)")
        if not probe.getsockopt(socket_SOL_SOCKET, socket_SO_ACCEPTCONN):
            raise ValueError("listen_fd() takes a socket that is already listening "
                             "(call listen() on it first)")
        family = probe.family
    finally:
        probe.close()
    cdef HttpLimits lim = manager._limits
    lim.stream_body = stream_body
    if http2 is not None:
        lim.http2 = _http2_flag(http2)
    if limits:
        _update_limits(&lim, limits)
    # Mongoose owns and closes its copy; the caller keeps (and closes) its own. Shared
    # socket: the O_NONBLOCK set here is seen by every process holding it, which they all
    # need (a worker must never block in accept() when another took the connection).
    cdef int own = os_dup(fd)
    os_set_blocking(own, False)
    cdef Connection conn = Connection.__new__(Connection)
    conn._handler = handler
    conn._manager = <void *>manager
    conn._limits = lim
    conn._recv_capped = not http
    Py_INCREF(conn)  # the reference c->fn_data owns until MG_EV_CLOSE
    cdef mg.mg_connection *c = mg.mg_wrapfd(&manager._mgr, own, _on_event, <void *>conn)
    if c == NULL:
        Py_DECREF(conn)
        os_close(own)
        raise MemoryError("cannot allocate a Mongoose connection")
    if not conn._bound:
        conn._c = c
        conn._bound = True
    c.is_listening = 1
    c.is_tls = tls
    if family in (socket_AF_INET, socket_AF_INET6):
        host, port = _lfd_sockname(own)
        _set_loc(c, host, port, family == socket_AF_INET6)
    if http:
        c.pfn = _mg_http_cb
        _install_http_guard(c)
    _raise_pending(manager)
    return conn


cdef tuple _lfd_sockname(int fd):
    s = socket_socket(fileno=os_dup(fd))
    try:
        return s.getsockname()[:2]
    finally:
        s.close()


cdef int _set_loc(mg.mg_connection *c, str host, int port, bint ip6) except -1:
    # c->loc as mg_listen() fills it, so local_addr reads the bound address and port.
    cdef bytes packed = socket_inet_pton(
        socket_AF_INET6 if ip6 else socket_AF_INET, host)
    memset(&c.loc, 0, sizeof(c.loc))
    memcpy(<void *>&c.loc.addr, <const char *>packed, len(packed))
    c.loc.port = ((port & 0xFF) << 8) | ((port >> 8) & 0xFF)  # host to network order
    c.loc.is_ip6 = ip6
    return 0
