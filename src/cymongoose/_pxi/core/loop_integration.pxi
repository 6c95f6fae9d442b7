# Driving a Manager from another event loop (asyncio, uvloop) on that loop's own thread:
# Mongoose's epoll descriptor to watch for readability, and how soon poll() has work that no
# descriptor announces (a closing connection, buffered TLS records, the next timer).
#
# The contract with the outer loop: call poll(0) when fileno() is readable, after writing to a
# connection outside a poll (a write reaches the socket, and Mongoose registers interest in
# writability, only during a poll), and again after next_poll_ms() milliseconds.
# Mongoose's epoll set is level-triggered and a paused connection leaves EPOLLIN out
# (vendor/mongoose/build_fixes.py), so watching the descriptor never spins.


cdef int _loop_fileno(Manager manager) except -2:
    if manager._closed:
        return -1
    return manager._mgr.epoll_fd


cdef int _loop_next_poll_ms(Manager manager, int limit_ms) except -2:
    if limit_ms < 0:
        raise ValueError(f"limit_ms must be >= 0, not {limit_ms}")
    if manager._closed:
        return limit_ms
    cdef mg.mg_connection *c = manager._mgr.conns
    while c != NULL:
        # What mg_mgr_poll() would act on at once, with no descriptor becoming ready:
        # closes (and drained connections with nothing left to send), TLS records already
        # read, and the wakeup queue.
        if (c.is_closing or c.rtls.len > 0 or
                (c.is_draining and c.send.len == 0)):
            return 0
        c = c.next
    if manager._wakeup_queue or _h2_wants_poll(&manager._mgr):
        return 0
    # The outer loop is about to wait: the moment poll() would give heap back. The GIL is
    # let go only then: a release after every poll would hand it to busy threads.
    if _heap_release_due(&manager._gil):
        with nogil:
            _release_heap(&manager._gil)
    return _wait_budget(&manager._mgr, limit_ms)


cdef int _pause_reading(Connection conn, bint paused) except -1:
    """Flow control for a consumer that lags (an ASGI app not receiving WebSocket messages):
    stop reading the socket, so the peer's TCP window closes instead of our queue growing."""
    conn._ensure_open()
    cdef mg.mg_connection *c = conn._c
    if c.pfn == <mg.mg_event_handler_t>_http_guard:
        raise RuntimeError(
            "pause_reading() is for WebSocket and raw connections: an HTTP connection's "
            "reads are paused by the server itself while a streamed body waits")
    if c.is_listening:
        raise RuntimeError("pause_reading() applies to connections, not listeners")
    if paused == (c.is_full != 0):
        return 0
    c.is_full = 1 if paused else 0
    if c.mgr.epoll_fd < 0 or <size_t>c.fd == <size_t>-1:
        if not paused:
            _rewatch_soon(c)  # loop_sockets.pxi
        return 0
    # Mongoose rewrites the epoll interest only when its write state changes (and then
    # respects is_full, vendor/mongoose/build_fixes.py): apply the change now, keeping
    # EPOLLOUT as registered.
    mg.cym_epoll_set(c, (c.prof.len & mg.EPOLLOUT) != 0)
    return 0
