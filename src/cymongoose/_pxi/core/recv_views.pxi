# Zero-copy memoryviews into a connection's receive buffer, valid while one of its events runs.
#
# Every *_view accessor (HttpMessage.body_view, WsMessage.data_view, Connection.recv_view(),
# ...) returns a read-only slice of one memoryview over the connection's receive buffer,
# exported by a _RecvSpan made on first use in an event. When the connection's outermost
# event returns (_recv_span_end, from dispatch.pxi) every memoryview handed out is released,
# so using one raises ValueError ("released memoryview"), and new ones cannot be made.
#
# CPython cannot revoke a slice of a memoryview or a buffer taken from one (mv[1:],
# memoryview(mv), numpy.frombuffer(mv)): they keep the exporter's buffer exported. If any
# is still alive when the event ends, Mongoose's receive buffer is *pinned*: the span takes
# ownership of it and the connection gets a copy to go on with, so the stale slice reads an
# old snapshot, never freed memory. The pinned block is freed once the last such buffer is
# released, and, while its Manager polls, only at the start of the next poll(): Mongoose's
# own code may still hold pointers into it for the rest of the iteration (http_cb keeps its
# mg_http_message across MG_EV_HTTP_HDRS and MG_EV_HTTP_MSG).
#
# Mongoose allocates iobufs with mg_calloc()/mg_free(), which are calloc()/free() on this
# platform (MG_ENABLE_CUSTOM_CALLOC is 0), so a pinned block is freed with free() and the
# replacement comes from calloc().


cdef str _VIEW_OUTSIDE_EVENT = (
    "{} is a zero-copy view into the receive buffer and exists only while a handler of this "
    "connection runs; call it inside the handler, or use {} for a copy")


@cython.final
cdef class _RecvSpan:
    """Exports one connection's receive buffer for the duration of one event."""

    def __cinit__(self):
        self._buf = NULL
        self._len = 0
        self._exports = 0
        self._pinned = NULL
        self._valid = False

    def __getbuffer__(self, Py_buffer *buffer, int flags):
        if not self._valid:
            raise BufferError("this receive-buffer view's event has ended")
        PyBuffer_FillInfo(buffer, self, <void *>self._buf, self._len, 1, flags)
        mg.cym_ft_lock(&self._lock)
        self._exports += 1
        mg.cym_ft_unlock(&self._lock)

    def __releasebuffer__(self, Py_buffer *buffer):
        cdef bint last
        mg.cym_ft_lock(&self._lock)
        self._exports -= 1
        last = self._exports == 0 and self._pinned != NULL
        mg.cym_ft_unlock(&self._lock)
        if last:
            _recv_span_retire(self)

    def __dealloc__(self):
        # Only reachable with no buffer exported (each export holds a reference).
        if self._pinned != NULL:
            free(self._pinned)
            self._pinned = NULL


cdef void _recv_span_retire(_RecvSpan span) noexcept:
    """The last buffer into a pinned block was released: free it now, or at the next poll()
    if its Manager is inside one (see the top of this file)."""
    cdef Manager mgr = span._manager
    span._manager = None
    cdef char *block = span._pinned
    span._pinned = NULL
    cdef bint kept = False
    # Atomic loads: the last buffer may be released on an app thread.
    if (mgr is not None and mg.cym_load_int_sc(<int *>&mgr._polling)
            and not mg.cym_load_int(<int *>&mgr._closed)):
        try:
            address = <size_t>block  # boxed before the lock: an allocation may run the GC
            with mgr._retired_lock:
                if not mgr._retired_closed:
                    mgr._retired_recv.append(address)
                    kept = True
        except BaseException:
            pass  # out of memory for a list slot: freeing now is the lesser risk
    if not kept:
        free(block)


cdef void _free_retired_recv(Manager mgr) noexcept:
    """Free pinned receive buffers whose views are all gone; Manager.poll() calls this
    before each iteration and close() after Mongoose let go of everything."""
    cdef list retired = mgr._retired_recv
    if not retired and not mgr._closed:
        return
    cdef list fresh
    try:
        fresh = []
    except BaseException:
        return  # out of memory: the next poll tries again
    # Swapped out under the lock, so an app thread's retire lands in one list or the other,
    # never in one being freed.
    with mgr._retired_lock:
        retired = mgr._retired_recv
        mgr._retired_recv = fresh
        if mgr._closed:
            mgr._retired_closed = True
    for block in retired:
        free(<char *><size_t>block)


cdef object _recv_view(Connection conn, const char *p, size_t n, str what, str copy_name):
    """A read-only memoryview of p[0:n], which lies in conn's receive buffer, released when
    conn's current event ends."""
    if conn._c == NULL or conn._event_depth == 0:
        raise RuntimeError(_VIEW_OUTSIDE_EVENT.format(what, copy_name))
    cdef mg.mg_connection *c = conn._c
    cdef _RecvSpan span = conn._span
    if span is None or span._buf != <const char *>c.recv.buf:
        if span is not None:
            # The handler made Mongoose reallocate the receive buffer mid-event (nothing in
            # cymongoose does): the old views end here, as if their event had.
            _recv_span_end(conn)
        span = _RecvSpan.__new__(_RecvSpan)
        span._buf = <const char *>c.recv.buf
        span._len = <Py_ssize_t>c.recv.size
        span._valid = True
        span._handed = []
        span._base = memoryview(span)
        conn._span = span
    cdef Py_ssize_t off = 0
    if n > 0:
        if p < span._buf or <size_t>(p - span._buf) + n > <size_t>span._len:
            # Not in the receive buffer (never expected): a copy is the safe answer.
            return memoryview(PyBytes_FromStringAndSize(p, <Py_ssize_t>n))
        off = p - span._buf
    view = span._base[off:off + <Py_ssize_t>n]
    span._handed.append(view)
    return view


cdef void _recv_span_end(Connection conn) noexcept:
    """conn's outermost event returned: release its views; pin the buffer if some outlive
    it (see the top of this file)."""
    cdef _RecvSpan span = conn._span
    conn._span = None
    span._valid = False
    try:
        for view in span._handed:
            try:
                view.release()
            except BufferError:
                pass  # something took a buffer from this view: it keeps the export
        span._handed = None
        try:
            span._base.release()
        except BufferError:
            pass
        span._base = None
    except BaseException:
        pass
    if span._exports == 0:
        return
    cdef mg.mg_connection *c = conn._c
    cdef unsigned char *fresh
    if c == NULL or <const char *>c.recv.buf != span._buf:
        return  # not Mongoose's buffer any more: nothing of it can be freed under the view
    fresh = <unsigned char *>calloc(1, c.recv.size) if c.recv.size else NULL
    if fresh == NULL and c.recv.size:
        # No memory for the copy: the view keeps the block and the connection, which
        # cannot go on without its buffered bytes, is closed.
        span._pinned = <char *>c.recv.buf
        c.recv.buf = NULL
        c.recv.len = c.recv.size = 0
        c.is_closing = 1
    else:
        # The whole allocation, not just recv.len: the HTTP guard may have hidden a
        # pipelined request beyond len while the handler ran (http_guard.pxi, _run_parser).
        if c.recv.size:
            memcpy(fresh, c.recv.buf, c.recv.size)
        span._pinned = <char *>c.recv.buf
        c.recv.buf = fresh
    span._manager = <Manager>conn._manager if conn._manager != NULL else None
    try:
        warnings_warn(
            "a zero-copy view (or a slice of one) outlived its event; it now reads a copy of "
            "the receive buffer kept until it is released: copy with bytes(view) inside the "
            "handler instead", ResourceWarning, stacklevel=1)
    except BaseException:
        pass
