# Metrics counted in C (struct Metrics in the .pxd): the guard and the event bridge add to
# the Manager's counters without the GIL; Manager.metrics() and read_metrics() decode them.
#
# Threads: the loop thread is each counter's only writer (add_metric()'s two excepted), and
# metrics() may read from any thread. So the loop counts with relaxed atomic loads and
# stores (cym_bump_u64: the plain add it always was on x86-64 and aarch64, with no locked
# instruction), add_metric() with atomic adds, and readers copy word by word with relaxed
# loads. Manager._metrics_lock covers the pointer to the counters: metrics() and
# add_metric() follow it under the lock, share_metrics() and close() repoint it under it.

from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

cdef enum:
    _N_STATUSES = 1000
    _N_BUCKETS = 16

# What a connection is counted as (HttpGuard.meter): an accepted HTTP-server connection,
# one with a delivered request not finished yet, one that became a WebSocket, an HTTP/2
# stream (its requests count; its bytes and itself are its TCP connection's), an accepted
# connection that switched to HTTP/2 (http2.pxi's _h2_switch).
cdef enum:
    _MT_CONN = 1
    _MT_REQ = 2
    _MT_WS = 4
    _MT_STREAM = 8
    _MT_H2 = 16

# Upper bounds of the duration buckets in seconds (Prometheus' "le"); the 16th is +Inf.
DURATION_BOUNDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                   5.0, 10.0, 30.0)
cdef uint64_t _BOUNDS_NS[_N_BUCKETS - 1]
for _i, _bound in enumerate(DURATION_BOUNDS):
    _BOUNDS_NS[_i] = <uint64_t>(_bound * 1e9 + 0.5)

METRICS_SIZE = sizeof(Metrics)

_ADDABLE = ("request_timeouts", "threads_abandoned")


cdef inline Metrics *_metrics_of(mg.mg_connection *c) noexcept nogil:
    return (<GilSlot *>c.mgr.userdata).metrics


cdef inline uint64_t _now_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <uint64_t>ts.tv_sec * 1000000000 + <uint64_t>ts.tv_nsec


cdef void _metrics_conn_open(mg.mg_connection *c, HttpGuard *g) noexcept nogil:
    cdef Metrics *m = _metrics_of(c)
    g.meter = _MT_CONN
    mg.cym_bump_u64(&m.connections_open, 1)
    mg.cym_bump_u64(&m.connections_total, 1)


cdef inline uint64_t *_requests_of(Metrics *m, HttpGuard *g) noexcept nogil:
    """The by-status counts a request of `g`'s connection ends in: its protocol's."""
    if g.meter & _MT_STREAM:
        return &m.requests_http2[0]
    return &m.requests_http1[0]


cdef void _metrics_h2_switch(mg.mg_connection *c, HttpGuard *g) noexcept nogil:
    """The accepted connection now speaks HTTP/2 (until it closes: _metrics_conn_event)."""
    cdef Metrics *m = _metrics_of(c)
    g.meter |= _MT_H2
    mg.cym_bump_u64(&m.http2_connections_open, 1)
    mg.cym_bump_u64(&m.http2_connections_total, 1)


cdef void _metrics_request_start(mg.mg_connection *c, HttpGuard *g) noexcept nogil:
    g.meter |= _MT_REQ
    g.resp_status = 0
    g.req_start_ns = _now_ns()
    mg.cym_bump_u64(&_metrics_of(c).in_flight, 1)


cdef void _metrics_request_end(mg.mg_connection *c, HttpGuard *g, int status) noexcept nogil:
    """The delivered request is over (answered, or its connection closed or left HTTP):
    counted once, by `status` (0: none was written), with its duration."""
    cdef Metrics *m
    cdef uint64_t took
    cdef int i = 0
    if not (g.meter & _MT_REQ):
        return
    m = _metrics_of(c)
    g.meter &= ~_MT_REQ
    took = _now_ns() - g.req_start_ns
    while i < _N_BUCKETS - 1 and took > _BOUNDS_NS[i]:
        i += 1
    mg.cym_bump_u64(&m.duration_buckets[i], 1)
    mg.cym_store_double(&m.duration_sum,
                        mg.cym_load_double(&m.duration_sum) + <double>took * 1e-9)
    mg.cym_bump_u64(&_requests_of(m, g)[status if 0 <= status < _N_STATUSES else 0], 1)
    mg.cym_bump_u64(&m.in_flight, <uint64_t>-1)


cdef void _metrics_request_drop(mg.mg_connection *c, HttpGuard *g) noexcept nogil:
    # Mongoose's parser refused what the guard accepted: no handler saw it, nothing counts.
    if g.meter & _MT_REQ:
        g.meter &= ~_MT_REQ
        mg.cym_bump_u64(&_metrics_of(c).in_flight, <uint64_t>-1)


cdef void _metrics_answered(mg.mg_connection *c, HttpGuard *g, int status,
                            bint refused) noexcept nogil:
    # A request the guard answered itself (a refusal, a health probe): never delivered, so
    # neither in flight nor in the duration histogram.
    cdef Metrics *m = _metrics_of(c)
    mg.cym_bump_u64(&_requests_of(m, g)[status], 1)
    if refused:
        mg.cym_bump_u64(&m.refused[status], 1)


cdef void _metrics_websocket(mg.mg_connection *c, HttpGuard *g) noexcept nogil:
    """The connection's request became a WebSocket: the 101 ends it."""
    cdef Metrics *m
    if not (g.meter & _MT_CONN) or (g.meter & _MT_WS):
        return
    m = _metrics_of(c)
    _metrics_request_end(c, g, 101)
    g.meter |= _MT_WS
    mg.cym_bump_u64(&m.websockets_open, 1)
    mg.cym_bump_u64(&m.websockets_total, 1)


cdef void _metrics_conn_event(mg.mg_connection *c, HttpGuard *g, int ev,
                              void *ev_data) noexcept nogil:
    # Called by _on_event for counted connections. Mongoose reports plaintext counts in
    # MG_EV_READ/WRITE (after TLS decryption, before encryption): bytes_* are HTTP and
    # WebSocket bytes, not wire bytes. sendfile(2) bodies bypass these events
    # (_metrics_sent is called there).
    cdef Metrics *m = _metrics_of(c)
    if g.meter & _MT_STREAM:
        if ev == mg.MG_EV_CLOSE:
            _metrics_request_end(c, g, g.resp_status)
            g.meter = 0
        return
    if ev == mg.MG_EV_READ:
        mg.cym_bump_u64(&m.bytes_received, <uint64_t>(<long *>ev_data)[0])
    elif ev == mg.MG_EV_WRITE:
        mg.cym_bump_u64(&m.bytes_sent, <uint64_t>(<long *>ev_data)[0])
    elif ev == mg.MG_EV_CLOSE:
        _metrics_request_end(c, g, g.resp_status)
        mg.cym_bump_u64(&m.connections_open, <uint64_t>-1)
        if g.meter & _MT_WS:
            mg.cym_bump_u64(&m.websockets_open, <uint64_t>-1)
        if g.meter & _MT_H2:
            mg.cym_bump_u64(&m.http2_connections_open, <uint64_t>-1)
        g.meter = 0


cdef inline void _metrics_sent(mg.mg_connection *c, HttpGuard *g, size_t n) noexcept nogil:
    if g.meter & _MT_CONN:
        mg.cym_bump_u64(&_metrics_of(c).bytes_sent, n)


cdef inline bint _over_limit(mg.mg_connection *c) noexcept nogil:
    cdef GilSlot *slot = <GilSlot *>c.mgr.userdata
    return (slot.limit_concurrency != 0 and
            mg.cym_load_u64(&slot.metrics.in_flight) >= slot.limit_concurrency)


cdef void _copy_metrics(Metrics *dst, const Metrics *src) noexcept nogil:
    # Word by word with relaxed atomic loads: a writer on another thread or in another
    # process may be counting. Every field is an aligned 8-byte word (the .pxd's layout
    # rule), so each is read whole; the copy as a whole is a snapshot only as far as that.
    cdef size_t i
    cdef const uint64_t *words = <const uint64_t *>src
    cdef uint64_t *out = <uint64_t *>dst
    if (<size_t>src) % sizeof(uint64_t) != 0:  # a buffer given to read_metrics() at an odd
        memcpy(dst, src, sizeof(Metrics))  # offset: no atomic load there, a plain copy
        return
    for i in range(sizeof(Metrics) // sizeof(uint64_t)):
        out[i] = mg.cym_load_u64(&words[i])


cdef dict _manager_metrics(Manager manager):
    cdef Metrics *m = <Metrics *>calloc(1, sizeof(Metrics))
    if m == NULL:
        raise MemoryError()
    try:
        with manager._metrics_lock:
            _copy_metrics(m, manager._gil.metrics)
        return _decode_copied_metrics(m)
    finally:
        free(m)


cdef dict _decode_metrics(const Metrics *src):
    cdef Metrics *m = <Metrics *>calloc(1, sizeof(Metrics))
    if m == NULL:
        raise MemoryError()
    try:
        _copy_metrics(m, src)
        return _decode_copied_metrics(m)
    finally:
        free(m)


cdef dict _decode_copied_metrics(const Metrics *m):
    cdef int i
    return {
        "requests": {i: m.requests_http1[i] + m.requests_http2[i]
                     for i in range(_N_STATUSES)
                     if m.requests_http1[i] or m.requests_http2[i]},
        "requests_http2": {i: m.requests_http2[i] for i in range(_N_STATUSES)
                           if m.requests_http2[i]},
        "refused": {i: m.refused[i] for i in range(_N_STATUSES) if m.refused[i]},
        "duration_buckets": tuple([m.duration_buckets[i] for i in range(_N_BUCKETS)]),
        "duration_sum": m.duration_sum,
        "in_flight": m.in_flight,
        "connections_open": m.connections_open,
        "connections_total": m.connections_total,
        "bytes_received": m.bytes_received,
        "bytes_sent": m.bytes_sent,
        "websockets_open": m.websockets_open,
        "websockets_total": m.websockets_total,
        "http2_connections_open": m.http2_connections_open,
        "http2_connections_total": m.http2_connections_total,
        "request_timeouts": m.request_timeouts,
        "threads_abandoned": m.threads_abandoned,
    }


cdef int _get_metrics_buffer(object buffer, Py_buffer *view, bint writable) except -1:
    PyObject_GetBuffer(buffer, view, PyBUF_SIMPLE | (PyBUF_WRITABLE if writable else 0))
    if view.len != sizeof(Metrics):
        PyBuffer_Release(view)
        raise ValueError(f"a metrics buffer holds METRICS_SIZE ({sizeof(Metrics)}) bytes, "
                         f"not {view.len}")
    return 0


def read_metrics(buffer):
    """The snapshot Manager.metrics() returns, read from a buffer of METRICS_SIZE bytes
    (one a Manager counts into after share_metrics())."""
    cdef Py_buffer view
    _get_metrics_buffer(buffer, &view, False)
    try:
        return _decode_metrics(<const Metrics *>view.buf)
    finally:
        PyBuffer_Release(&view)


cdef int _share_metrics(Manager manager, object buffer) except -1:
    cdef Py_buffer view
    try:
        _get_metrics_buffer(buffer, &view, True)
    except BufferError as exc:
        raise ValueError(f"share_metrics() needs a writable buffer: {exc}") from None
    # The counts so far go along, so the buffer carries this Manager's whole history.
    memcpy(view.buf, manager._gil.metrics, sizeof(Metrics))
    with manager._metrics_lock:
        manager._gil.metrics = <Metrics *>view.buf
        _release_shared_metrics(manager)
        manager._shared = view
        manager._sharing = True
    return 0


cdef void _unshare_metrics(Manager manager, bint keep_counts) noexcept:
    """Release share_metrics()'s buffer; with `keep_counts`, counting goes on (and
    metrics() reads) in the Manager's own struct, from the shared counts."""
    if not manager._sharing:
        return
    with manager._metrics_lock:
        if keep_counts:
            memcpy(&manager._metrics, manager._shared.buf, sizeof(Metrics))
            manager._gil.metrics = &manager._metrics
        _release_shared_metrics(manager)


cdef void _release_shared_metrics(Manager manager) noexcept:
    # Under _metrics_lock: no other thread is reading the buffer let go.
    if manager._sharing:
        manager._sharing = False
        PyBuffer_Release(&manager._shared)


cdef int _add_metric(Manager manager, str name, long long delta) except -1:
    cdef Metrics *m
    if name != "request_timeouts" and name != "threads_abandoned":
        raise ValueError(f"add_metric() accepts {' or '.join(map(repr, _ADDABLE))}, "
                         f"not {name!r}")
    with manager._metrics_lock:  # app threads call it: atomic adds (threads_abandoned is a
        m = manager._gil.metrics  # gauge, so delta may be negative)
        if name == "request_timeouts":
            mg.cym_add_u64(&m.request_timeouts, <uint64_t>delta)
        else:
            mg.cym_add_u64(&m.threads_abandoned, <uint64_t>delta)
    return 0
