# The C->Python bridge: Mongoose's event callback, the GIL hand-over, and per-event data.

cdef extern from "Python.h":
    PyThreadState *PyEval_SaveThread() nogil
    void PyEval_RestoreThread(PyThreadState *tstate) nogil
    Py_ssize_t Py_REFCNT(object o)


cdef inline void _take_gil_back(GilSlot *slot) noexcept nogil:
    # poll() released the GIL with PyEval_SaveThread(); the first callback of the iteration
    # takes it back for good, so every later event of this iteration runs without any GIL
    # traffic. poll() restores it itself if no callback ran.
    cdef PyThreadState *tstate
    if slot != NULL and slot.saved != NULL:
        tstate = slot.saved
        slot.saved = NULL
        PyEval_RestoreThread(tstate)


# _dispatch needs the GIL, and always has it once _take_gil_back() has run: poll() holds it
# or saved it in the slot, and every other path into Mongoose (listen(), close(), ...) is a
# Python call. Calling it through this nogil-typed pointer skips the PyGILState_Ensure/
# Release pair a `with gil` function would pay on every event (~80 instructions). The cast
# goes through void * because a direct cast is exactly what Cython warns about ("circumvents
# GIL validation"): here that is the point, and the reasoning above is the validation.
ctypedef void (*_gil_held_handler_t)(mg.mg_connection *c, int ev, void *ev_data) noexcept nogil
cdef _gil_held_handler_t _dispatch_gil_held = <_gil_held_handler_t><void *>_dispatch


cdef void _on_event(mg.mg_connection *c, int ev, void *ev_data) noexcept nogil:
    if c.fn_data == NULL:
        return
    if ev != mg.MG_EV_POLL:
        (<GilSlot *>c.mgr.userdata).io_events += 1
        if ev == mg.MG_EV_CLOSE:
            (<GilSlot *>c.mgr.userdata).closes += 1
        if (<Connection>c.fn_data)._guard.meter:  # an accepted HTTP-server connection
            _metrics_conn_event(c, &(<Connection>c.fn_data)._guard, ev, ev_data)
        if ((<Connection>c.fn_data)._guard.static_quiet
                and (ev == mg.MG_EV_READ or ev == mg.MG_EV_WRITE)):
            # The guard answered the request these bytes carried from a static mount
            # (http_static_mounts.pxi): no handler has anything to do with them.
            return
        if (<Connection>c.fn_data)._guard.proxy != NULL and ev != mg.MG_EV_CLOSE:
            # Proxied: the guard and proxy_exchange.pxi move its bytes; no handler has a
            # say until the exchange ends (its MG_EV_CLOSE still reaches the handler).
            return
        if (ev == mg.MG_EV_READ or ev == mg.MG_EV_WRITE) and mg.cym_h2_is_session(c):
            # HTTP/2 frames, which only the session reads; the handler sees each stream's
            # events on its own connection. Two Python calls a request saved.
            return
    else:
        if c.is_tls and c.rtls.len > 0:
            _tls_screen(c)  # tls.pxi: refuse what Mongoose's TLS would wait on forever
        if (<Connection>c.fn_data)._skip_poll or (<Connection>c.fn_data)._guard.proxy != NULL:
            # Every connection gets MG_EV_POLL every iteration: with 10,000 idle clients,
            # taking the GIL and entering Python dispatch for each would dominate the loop.
            return
    _take_gil_back(<GilSlot *>c.mgr.userdata)
    _dispatch_gil_held(c, ev, ev_data)


cdef inline bint _put_in_front(mg.mg_connection *c, mg.mg_event_handler_t theirs,
                               mg.mg_event_handler_t ours) noexcept nogil:
    """The one way cymongoose extends a Mongoose protocol: where c runs Mongoose's handler
    `theirs` (a static of mongoose.c, exported by build_fixes.py), run `ours`, which calls
    `theirs` and adds what it lacks. False when c runs something else (already ours, or
    the user's)."""
    if c == NULL or c.pfn != theirs:
        return False
    c.pfn = ours
    return True


@cython.auto_pickle(False)
cdef class _LoopHandler:
    """Base of the handlers the core calls without a Python call: the WSGI and ASGI
    servers' loop objects, whose events (each request's head, each connection's close) would
    otherwise each pay an argument tuple and argument parsing (about 700 instructions, a
    third of what a connection costs them beyond a raw handler's). Called as handlers from
    Python, they do the same."""

    cdef int on_event(self, Connection conn, int ev, object data) except -1:
        return 0

    def __call__(self, Connection conn, int ev, data):
        self.on_event(conn, ev, data)


cdef inline int _call_handler(object handler, Connection conn, int ev, object data) except -1:
    if isinstance(handler, _LoopHandler):
        return (<_LoopHandler>handler).on_event(conn, ev, data)
    handler(conn, ev, data)
    return 0


cdef Connection _bind(mg.mg_connection *c):
    """The Connection owned by c, created on first sight of an accepted connection."""
    cdef Connection conn = <Connection>c.fn_data
    cdef Connection child
    if conn._c == c:
        return conn
    if conn._c == NULL and not conn._bound:
        # Made by listen()/connect(), which already took the reference fn_data owns.
        conn._c = c
        conn._bound = True
        return conn
    # Mongoose copies the listener's fn_data onto each accepted connection: give the new
    # connection its own object, inheriting the listener's handler and limits.
    child = Connection.__new__(Connection)
    child._c = c
    child._bound = True
    child._manager = conn._manager
    child._handler = conn._handler
    child._mask = conn._mask
    child._mask_handler = conn._mask_handler
    child._skip_poll = conn._skip_poll
    child._limits = conn._limits
    child._recv_capped = conn._recv_capped
    Py_INCREF(child)  # owned by c->fn_data until MG_EV_CLOSE
    c.fn_data = <void *>child
    return child


cdef void _unbind(mg.mg_connection *c, Connection conn) noexcept:
    _ws_deflate_free(conn)  # ws_deflate.pxi
    _encoder_close(c, &conn._guard)  # a compressed response cut short (http_compress.pxi)
    conn._c = NULL
    conn._manager = NULL
    c.fn_data = NULL
    Py_DECREF(conn)


cdef void _dispatch(mg.mg_connection *c, int ev, void *ev_data) noexcept:
    cdef GilSlot *slot = <GilSlot *>c.mgr.userdata
    cdef Connection conn
    cdef Manager manager
    cdef char *inflated = NULL
    try:
        conn = _bind(c)
        if slot.finalizing:
            # The Manager is being deallocated: no Python code may see it again.
            if ev == mg.MG_EV_CLOSE:
                _unbind(c, conn)
            return
        manager = <Manager>slot.manager
        if c.is_accepted and (ev == mg.MG_EV_HTTP_MSG or (
                ev == mg.MG_EV_HTTP_HDRS and conn._guard.flags & _GF_STREAM)):
            # Remembered so reply() sends no body to HEAD (RFC 9110 §9.3.2).
            conn._head_request = ((<mg.mg_http_message *>ev_data).method.len == 4 and
                                  memcmp((<mg.mg_http_message *>ev_data).method.buf,
                                         b"HEAD", 4) == 0)
        elif ev == mg.MG_EV_WS_CTL:
            _ws_on_ctl(conn, c, <mg.mg_ws_message *>ev_data)  # close code, ws.pxi
        elif ev == mg.MG_EV_WS_MSG and (<mg.mg_ws_message *>ev_data).flags & 0x40:
            # permessage-deflate (ws_deflate.pxi): handlers see the inflated message; one
            # that does not inflate, or inflates past the limit, fails the WebSocket instead.
            if _ws_inflate_message(conn, c, <mg.mg_ws_message *>ev_data, &inflated) != 0:
                return
        _deliver(manager, conn, c, ev, ev_data)
        if (ev == mg.MG_EV_READ and conn._recv_capped and c.recv.len > manager._max_recv_size
                and not c.is_closing):
            # Checked after the handler had its chance to consume (recv_data(consume=True)).
            mg.mg_error(c, "receive buffer over max_recv_size (%lu bytes): closing",
                        <unsigned long>manager._max_recv_size)
        if ev == mg.MG_EV_CLOSE:
            _unbind(c, conn)
    except BaseException as exc:
        # Only reachable through a bug in the bridge itself; never let it escape into C.
        _default_error_handler(exc)
    finally:
        free(inflated)  # the view of the inflated message died with its event


cdef void _deliver(Manager manager, Connection conn, mg.mg_connection *c, int ev,
                   void *ev_data) noexcept:
    """Call the Python handler for one event, with the exception rules of the module."""
    if manager._stop_dispatch:
        return
    handler = conn._handler if conn._handler is not None else manager._handler
    if handler is None:
        return
    if handler is not conn._mask_handler:  # handler changed: read its @handles() once
        conn._mask = _event_mask(handler)
        conn._mask_handler = handler
        conn._skip_poll = not (conn._mask >> mg.MG_EV_POLL) & 1
    if ev < 64 and not (conn._mask >> ev) & 1:
        return
    if ev == mg.MG_EV_POLL or ev == mg.MG_EV_READ or ev == mg.MG_EV_WRITE:
        # The most frequent events carry no data: no message view, only the depth count
        # that lets recv_view() work inside them.
        conn._event_depth += 1
        try:
            _call_handler(handler, conn, ev, None)
        except BaseException as exc:
            _route_exception(manager, exc)
        conn._event_depth -= 1
        if conn._span is not None and conn._event_depth == 0:
            _recv_span_end(conn)
        return
    cdef size_t send_mark = c.send.len
    cdef object data = None
    cdef HttpMessage hview = None
    cdef WsMessage wview = None
    cdef MqttMessage mview = None
    if ev == mg.MG_EV_HTTP_MSG or ev == mg.MG_EV_HTTP_HDRS or ev == mg.MG_EV_WS_OPEN:
        hview = _http_view(manager)
        hview._hm = <mg.mg_http_message *>ev_data
        hview._conn = conn
        data = hview
    elif ev == mg.MG_EV_WS_MSG:
        wview = WsMessage.__new__(WsMessage)
        wview._wm = <mg.mg_ws_message *>ev_data
        wview._conn = conn
        data = wview
    elif ev == mg.MG_EV_MQTT_MSG or ev == mg.MG_EV_MQTT_CMD:
        mview = MqttMessage.__new__(MqttMessage)
        mview._mm = <mg.mg_mqtt_message *>ev_data
        mview._conn = conn
        data = mview
    elif ev == mg.MG_EV_ERROR:
        data = (<const char *>ev_data).decode("utf-8", "ignore") if ev_data != NULL else ""
        if c.is_tls:
            data = _tls_error_text(c, data)  # tls.pxi: say why a handshake failed
    elif ev == mg.MG_EV_MQTT_OPEN:
        # mongoose.h documents int *, but mqtt_cb passes &mm.ack, a uint8_t (7.23).
        data = (<uint8_t *>ev_data)[0] if ev_data != NULL else 0
    elif ev == mg.MG_EV_SNTP_TIME:
        data = (<int64_t *>ev_data)[0] if ev_data != NULL else 0
    elif ev == mg.MG_EV_WAKEUP:
        data = _bytes_mg((<mg.mg_str *>ev_data)[0]) if ev_data != NULL else b""
    conn._event_depth += 1
    try:
        _call_handler(handler, conn, ev, data)
    except BaseException as exc:
        if _route_exception(manager, exc) and (ev == mg.MG_EV_HTTP_MSG or (
                ev == mg.MG_EV_HTTP_HDRS and conn._guard.flags & _GF_STREAM)):
            _answer_failed_request(c, send_mark)
    finally:
        # Views die with their event (picows' rule): a stored view raises, never reads
        # freed memory.
        if hview is not None:
            hview._hm = NULL
            hview._conn = None
        elif wview is not None:
            wview._wm = NULL
            wview._conn = None
        elif mview is not None:
            mview._mm = NULL
            mview._conn = None
        conn._event_depth -= 1
        if conn._span is not None and conn._event_depth == 0:
            _recv_span_end(conn)  # recv_views.pxi: the memoryviews die too


_EVENTS_ATTR = "cymongoose_events"


def handles(*events):
    """Decorator: deliver only these events to the handler (all events when absent).

    Every event costs a Python call, most of them MG_EV_POLL (each connection, each loop
    iteration) that a typical handler ignores; declaring the events it uses skips those
    calls entirely. Bookkeeping (views, MG_EV_CLOSE, 500 for failed requests) is unchanged.
    """
    for ev in events:
        if type(ev) is not int and not isinstance(ev, int):
            raise TypeError(f"events must be MG_EV_* ints, not {type(ev).__name__}")
        if not 0 <= ev < 64:
            raise ValueError(f"event {ev} cannot be selected; handlers without @handles() "
                             "receive every event, including MG_EV_USER+n")
    selected = frozenset(int(ev) for ev in events)

    def mark(handler):
        if not callable(handler):
            raise TypeError("@handles() decorates a callable handler(conn, ev, data)")
        setattr(handler, _EVENTS_ATTR, selected)
        return handler

    return mark


cdef uint64_t _event_mask(object handler):
    selected = getattr(handler, _EVENTS_ATTR, None)
    if selected is None:
        return ~(<uint64_t>0)
    cdef uint64_t mask = 0
    for ev in selected:
        if 0 <= ev < 64:
            mask |= (<uint64_t>1) << <int>ev
    return mask


cdef HttpMessage _http_view(Manager manager):
    # Reuse one view object per Manager when nobody kept the previous one: saves an
    # allocation per request. A view someone still holds (refcount > 1) or one in use by an
    # outer handler (nested WS_OPEN inside ws_upgrade) is never revived.
    cdef HttpMessage view = manager._http_view
    if view is None or view._hm != NULL or Py_REFCNT(view) > 2:
        view = HttpMessage.__new__(HttpMessage)
        manager._http_view = view
    return view


cdef void _deliver_synthetic(Manager manager, Connection conn, int ev, object data) noexcept:
    """Deliver an event cymongoose makes itself (MG_EV_WAKEUP payloads) to a handler."""
    if manager._stop_dispatch or conn._c == NULL:
        return
    handler = conn._handler if conn._handler is not None else manager._handler
    if handler is None:
        return
    if handler is not conn._mask_handler:
        conn._mask = _event_mask(handler)
        conn._mask_handler = handler
    if ev < 64 and not (conn._mask >> ev) & 1:
        return
    conn._event_depth += 1
    try:
        _call_handler(handler, conn, ev, data)
    except BaseException as exc:
        _route_exception(manager, exc)
    conn._event_depth -= 1
    if conn._span is not None and conn._event_depth == 0:
        _recv_span_end(conn)


cdef bint _route_exception(Manager manager, BaseException exc) noexcept:
    """KeyboardInterrupt/SystemExit: stored for poll() to re-raise, and Python dispatch
    stops for the rest of the iteration (False). Anything else: to the error handler (True).
    """
    if _is_fatal(exc):
        manager._fatal = exc
        manager._stop_dispatch = True
        return False
    manager._report(exc)
    return True


cdef bytes _RESPONSE_500 = (
    b"HTTP/1.1 500 Internal Server Error\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: 21\r\n"
    b"Connection: close\r\n")
cdef bytes _RESPONSE_500_END = b"\r\nInternal Server Error"  # after the Date line


cdef void _answer_failed_request(mg.mg_connection *c, size_t send_mark) noexcept:
    # The handler raised on a request it had not answered (Mongoose's is_resp still set).
    # Nothing written yet: a clean 500, then close after it is flushed. Something
    # written: the response is half-framed and can't be completed, so close now.
    if not c.is_accepted or c.is_closing or c.is_websocket or not c.is_resp:
        return
    cdef char date[_DATE_LINE_SIZE]
    if c.send.len == send_mark:
        mg.mg_send(c, PyBytes_AS_STRING(_RESPONSE_500), PyBytes_GET_SIZE(_RESPONSE_500))
        mg.mg_send(c, date, _date_line(date))
        mg.mg_send(c, PyBytes_AS_STRING(_RESPONSE_500_END),
                   PyBytes_GET_SIZE(_RESPONSE_500_END))
        c.is_resp = 0
        c.is_draining = 1
    else:
        c.is_closing = 1
