# Driving a Manager from another event loop when Mongoose has no epoll descriptor to hand
# over (its poll() backend: macOS and the BSDs, or CYMONGOOSE_POLL_BACKEND=ON on Linux). The
# outer loop then watches every socket itself (aio.LoopDriver), and after each poll step asks
# watch_changes() what to add, change or drop. kqueue cannot be nested in kqueue on macOS, so
# handing over one descriptor the way epoll allows is not an option there.
#
# Which sockets, and for what, follows Mongoose's poll() backend (mg_iotest() with
# MG_ENABLE_POLL, Mongoose 7.x): a socket is left out while it resolves or closes; it is read
# unless is_full (a paused reader, a listener out of descriptors); it is written while it
# connects, or has bytes queued outside a TLS handshake.
#
# Mongoose closes a socket inside the step, before this can tell the outer loop, and a new
# socket may take the number in the same step. So the watches are kept by descriptor number
# with the connection id they were made for: a number that now belongs to another connection,
# or to none, is listed as dropped, and every drop comes before any addition, so the outer
# loop forgets the old socket before it learns the new one under the same number.

DEF _WATCH_READ = 1
DEF _WATCH_WRITE = 2
WATCH_READ = _WATCH_READ
WATCH_WRITE = _WATCH_WRITE


cdef inline unsigned char _wanted_watch(mg.mg_connection *c) noexcept nogil:
    if c.is_closing or c.is_resolving:
        return 0
    cdef unsigned char events = 0
    if not c.is_full:
        events |= _WATCH_READ
    if c.is_connecting or (c.send.len > 0 and not c.is_tls_hs):
        events |= _WATCH_WRITE
    return events


cdef int _fit_loop_sockets(LoopSockets *ls, int fd) except -1:
    if fd < ls.len:
        return 0
    cdef int n = ls.len * 2 if ls.len > 0 else 64
    while n <= fd:
        n *= 2
    cdef LoopSocket *grown = <LoopSocket *>realloc(ls.by_fd, n * sizeof(LoopSocket))
    if grown == NULL:
        raise MemoryError()
    memset(&grown[ls.len], 0, (n - ls.len) * sizeof(LoopSocket))
    ls.by_fd = grown
    ls.len = n
    return 0


cdef object _loop_watch_changes(Manager manager):
    """The (fd, was, now) changes since the last call, drops first; None when there are none."""
    manager._ensure_open()
    cdef LoopSockets *ls = &manager._loop_sockets
    cdef list dropped = None
    cdef list changed = None
    cdef mg.mg_connection *c = manager._mgr.conns
    cdef LoopSocket *e
    cdef unsigned char want
    cdef int fd
    cdef int seen = 0
    cdef size_t parked = 0
    ls.mark += 1
    while c != NULL:
        if <size_t>c.fd != <size_t>-1:  # an HTTP/2 stream, or a connection still resolving
            fd = <int><size_t>c.fd
            want = _wanted_watch(c)
            if fd < ls.len or want != 0:
                _fit_loop_sockets(ls, fd)
                e = &ls.by_fd[fd]
                if e.conn_id != 0 and e.conn_id != c.id:
                    # The number's previous socket closed in the step that opened this one.
                    if dropped is None:
                        dropped = []
                    dropped.append((fd, e.events, 0))
                    e.conn_id = 0
                    ls.in_use -= 1
                if e.conn_id == 0:
                    if want != 0:
                        if changed is None:
                            changed = []
                        changed.append((fd, 0, want))
                        e.conn_id = c.id
                        e.events = want
                        ls.in_use += 1
                elif want != e.events:
                    if changed is None:
                        changed = []
                    changed.append((fd, e.events, want))
                    e.events = want
                    if want == 0:
                        e.conn_id = 0
                        ls.in_use -= 1
                if e.conn_id != 0:
                    e.mark = ls.mark
                    seen += 1
        c = c.next
        if c == NULL:
            # Then the idle connections the PARKING build fix took out of the list (only
            # its epoll iotest parks them; watched here the same, for reading).
            c = mg.cym_parked_at(&manager._mgr, parked)
            parked += 1
    if seen < ls.in_use:  # some watched sockets closed: find them (rare, and O(descriptors))
        for fd in range(ls.len):
            e = &ls.by_fd[fd]
            if e.conn_id != 0 and e.mark != ls.mark:
                if dropped is None:
                    dropped = []
                dropped.append((fd, e.events, 0))
                e.conn_id = 0
                ls.in_use -= 1
    if dropped is None:
        return changed
    if changed is not None:
        dropped.extend(changed)
    return dropped


cdef list _loop_unwatch_all(Manager manager):
    """Every watch as a drop, and none kept: the outer loop stops watching (also after
    close(), when the sockets are gone but the outer loop may still hold their numbers)."""
    cdef LoopSockets *ls = &manager._loop_sockets
    cdef list dropped = []
    cdef int fd
    for fd in range(ls.len):
        if ls.by_fd[fd].conn_id != 0:
            dropped.append((fd, ls.by_fd[fd].events, 0))
            ls.by_fd[fd].conn_id = 0
    ls.in_use = 0
    return dropped


cdef int _rewatch_soon(mg.mg_connection *c) except -1:
    """A socket's reads resumed outside a poll step (an app caught up with a streamed body,
    pause_reading(False)). With epoll the change went to Mongoose's set at once; watching each
    socket, the outer loop learns it only after a step, so one is asked for through the
    wakeup pipe, which that loop watches. Inside a step, the sync after it sees the change."""
    if c.mgr.epoll_fd >= 0 or <size_t>c.fd == <size_t>-1:
        return 0
    cdef Manager manager = <Manager>(<GilSlot *>c.mgr.userdata).manager
    if manager._polling or not manager._wakeup_enabled or manager._closed:
        return 0
    manager._send_wake()
    return 0


cdef void _free_loop_sockets(Manager manager) noexcept:
    free(manager._loop_sockets.by_fd)
    manager._loop_sockets.by_fd = NULL
    manager._loop_sockets.len = 0
    manager._loop_sockets.in_use = 0
