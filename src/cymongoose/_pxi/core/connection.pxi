# Connection: the Python face of one mg_connection (state, buffers, raw I/O); protocol
# methods are one-line delegations to the fragment of their protocol.


cdef inline uint16_t _addr_port(const mg.mg_addr *a) noexcept:
    return ((a.port & 0xFF) << 8) | (a.port >> 8)  # network to host order


cdef tuple _addr_tuple(const mg.mg_addr *a, LoopCaches caches=None):
    return (_format_ip(a, caches), _addr_port(a), bool(a.is_ip6))


cdef inline object _check_handler(object handler, str argname):
    if handler is not None and not callable(handler):
        raise TypeError(
            f"{argname} must be a callable handler(conn, ev, data) or None, "
            f"not {type(handler).__name__}")
    return handler


cdef int _status_arg(object value) except? -1:
    # Range-checked before narrowing to a C int, so 2**32 + 200 is refused, not 200.
    cdef long long n = _int_arg(value, "status_code")
    if not 0 <= n <= 999:
        raise ValueError(f"status_code must be between 200 and 999, not {n}")
    return <int>n


@cython.final
cdef class Connection:
    """One Mongoose connection. Made by the Manager; the same object is passed to every
    event of its connection."""

    def __cinit__(self):
        self._c = NULL
        self._manager = NULL
        self._bound = False

    cdef int _ensure_open(self) except -1:
        if self._c == NULL:
            raise RuntimeError(_CLOSED_MSG)
        self._unpark()
        return 0

    cdef void _unpark(self) noexcept:
        # Parked off the loop's list while idle (build_fixes.py PARKING): whatever a method
        # does to it (send, close, drain, a new handler) is seen by the next poll.
        if self._guard.quiet.slot:
            mg.cym_unpark(self._c)
        self._guard.quiet.until = 0  # skipped while its response was owed: polled again

    def __repr__(self):
        if self._c == NULL:
            return "<Connection closed>"
        return (f"<Connection id={self._c.id} readable={bool(self._c.is_readable)} "
                f"writable={bool(self._c.is_writable)}>")

    @property
    def handler(self):
        return self._handler

    def set_handler(self, handler):
        self._handler = _check_handler(handler, "handler")
        self._skip_poll = False  # the next event reads the new handler's mask
        self._unpark()  # back in the loop's list, then
        self._guard.quiet.until = 0  # it gets MG_EV_POLL again from the next poll

    @property
    def id(self):
        return self._c.id if self._c != NULL else 0

    @property
    def is_listening(self):
        return self._c != NULL and self._c.is_listening != 0

    @property
    def is_closing(self):
        return self._c == NULL or self._c.is_closing != 0

    @property
    def is_proxied(self):
        return self._c != NULL and self._guard.proxy != NULL

    @property
    def log_errors(self):
        return not self._quiet_errors

    @log_errors.setter
    def log_errors(self, value):
        self._quiet_errors = not value

    @property
    def is_client(self):
        return self._c != NULL and self._c.is_client != 0

    @property
    def is_tls(self):
        return self._c != NULL and _tls_carrier(self).is_tls != 0

    @property
    def http2_parent(self):
        # An HTTP/2 stream's own connection (http2.pxi), as the handler knows it.
        return _h2_parent_of(self)

    @property
    def tls_info(self):
        # tls_peer.pxi; the stub documents the keys.
        return _tls_peer_info(self)

    @property
    def is_udp(self):
        return self._c != NULL and self._c.is_udp != 0

    @property
    def is_websocket(self):
        return self._c != NULL and self._c.is_websocket != 0

    @property
    def ws_close_code(self):
        # The peer's WebSocket close code (ws.pxi); kept after close so MG_EV_CLOSE sees it.
        return self._ws_close_code if self._ws_close_code else None

    @property
    def ws_close_reason(self):
        return self._ws_close_reason if self._ws_close_code else None

    @property
    def is_readable(self):
        return self._c != NULL and self._c.is_readable != 0

    @property
    def is_writable(self):
        return self._c != NULL and self._c.is_writable != 0

    @property
    def is_full(self):
        return self._c != NULL and self._c.is_full != 0

    @property
    def peer_closed(self):
        # The client half-closed (sent EOF) on an HTTP connection kept open for the
        # responses it is owed (http_guard.pxi _on_peer_eof); it may be gone altogether.
        return self._c != NULL and self._guard.peer_eof

    @property
    def is_draining(self):
        return self._c != NULL and self._c.is_draining != 0

    @property
    def local_addr(self):
        return _addr_tuple(&self._c.loc) if self._c != NULL else None

    @property
    def remote_addr(self):
        return _addr_tuple(&self._c.rem, _caches_of(self)) if self._c != NULL else None

    @property
    def recv_len(self):
        return self._c.recv.len if self._c != NULL else 0

    @property
    def send_len(self):
        return self._c.send.len if self._c != NULL else 0

    @property
    def recv_size(self):
        return self._c.recv.size if self._c != NULL else 0

    @property
    def send_size(self):
        return self._c.send.size if self._c != NULL else 0

    def send(self, data):
        self._ensure_open()
        cdef Py_buffer view
        cdef bint ok
        PyObject_GetBuffer(_buffer_source(data, "data"), &view, PyBUF_SIMPLE)
        try:
            ok = mg.mg_send(self._c, view.buf, <size_t>view.len)
        finally:
            PyBuffer_Release(&view)
        if not ok:
            raise RuntimeError("send failed: out of memory for the send buffer")

    def recv_view(self):
        self._ensure_open()
        return _recv_view(self, <const char *>self._c.recv.buf, self._c.recv.len,
                          "Connection.recv_view()", "recv_data()")

    def recv_data(self, Py_ssize_t length=-1, *, bint consume=False):
        self._ensure_open()
        cdef size_t n = self._c.recv.len
        if length >= 0 and <size_t>length < n:
            n = <size_t>length
        out = PyBytes_FromStringAndSize(<char *>self._c.recv.buf, <Py_ssize_t>n)
        if consume and n > 0:
            mg.mg_iobuf_del(&self._c.recv, 0, n)
        return out

    def send_data(self, Py_ssize_t length=-1):
        self._ensure_open()
        cdef size_t n = self._c.send.len
        if length >= 0 and <size_t>length < n:
            n = <size_t>length
        return PyBytes_FromStringAndSize(<char *>self._c.send.buf, <Py_ssize_t>n)

    def close(self):
        # Marking, not freeing: Mongoose closes it at the end of the current (or next)
        # poll iteration, after any running handler has returned, so the mg_connection
        # never disappears under a handler that still uses it (0.2.5 freed it at once).
        # Output already queued (a reply() just before close()) is flushed first, as
        # asyncio's transport.close() does; with nothing queued the close is immediate.
        if self._c == NULL:
            return
        self._close_called = True
        self._unpark()
        if mg.cym_h2_shutdown(self._c) == 0:
            # An HTTP/2 connection ends gracefully: GOAWAY, its streams finish (http2.pxi).
            (<GilSlot *>self._c.mgr.userdata).io_events += 1
            return
        if self._c.send.len > 0 and not self._c.is_closing:
            self._c.is_draining = 1
        else:
            self._c.is_closing = 1
        # Counted as traffic: the next poll() runs an iteration at once instead of waiting
        # (its readiness probe does not walk the connections to find this one).
        (<GilSlot *>self._c.mgr.userdata).io_events += 1

    def drain(self):
        self._ensure_open()
        self._c.is_draining = 1

    def error(self, str message not None):
        self._ensure_open()
        cdef bytes m = _utf8(message)
        mg.mg_error(self._c, "%.*s", <int>min(len(m), 1 << 20), <const char *>m)

    # HTTP (http.pxi)
    def reply(self, status_code, body=b"", headers=None):
        _http_reply(self, _status_arg(status_code), body, headers)

    def reply_json(self, data, status_code=200, headers=None):
        _http_reply_json(self, data, _status_arg(status_code), headers)

    # directory_listing is off by default, as nginx's autoindex: a listing shows every name
    # in the directory (backups, files nobody meant to publish), so it is the caller's
    # choice. 0.2.x always listed; one keyword brings that back.
    def serve_dir(self, HttpMessage message, str root_dir not None,
                  str extra_headers not None="", str mime_types not None="",
                  str page404 not None="", *, bint directory_listing=False):
        _http_serve_dir(self, message, root_dir, extra_headers, mime_types, page404,
                        directory_listing)

    def serve_file(self, HttpMessage message, str path not None,
                   str extra_headers not None="", str mime_types not None=""):
        _http_serve_file(self, message, path, extra_headers, mime_types)

    def http_begin(self, status_code, headers=None, *, reason=None, more_headers=None):
        _http_begin(self, _status_arg(status_code), headers, reason,
                    more_headers)

    def http_write(self, data):
        _http_write(self, data)

    def http_sendfile(self, fd, offset=0, count=-1):
        cdef long long fl = _int_arg(fd, "fd")
        if not 0 <= fl <= 2147483647:
            raise ValueError(f"fd must be an open file descriptor, not {fl}")
        cdef int f = <int>fl
        cdef long long o = _int_arg(offset, "offset")
        cdef long long n = _int_arg(count, "count")
        if n < 0:
            n = os_fstat(f).st_size - o
        _http_sendfile(self, f, o, n)

    def http_end(self, trailers=None):
        return _http_end(self, trailers)

    def http_respond(self, status_code, headers=None, body=b"", *, reason=None,
                     more_headers=None):
        return _http_respond(self, _status_arg(status_code), headers, body,
                             reason, more_headers)

    @property
    def response_started(self):
        return self._c != NULL and self._guard.resp_state != _RS_IDLE

    def body_read(self, Py_ssize_t max_bytes=-1):
        return _body_read(self, max_bytes)

    @property
    def body_pending(self):
        if self._c == NULL or not (self._guard.flags & _GF_STREAM):
            return 0
        _stream_decode(self._c, &self._guard)
        return self._guard.body_ready

    @property
    def body_complete(self):
        if self._c == NULL:
            return False
        if not (self._guard.flags & _GF_STREAM):
            return True
        _stream_decode(self._c, &self._guard)
        return bool(self._guard.flags & _GF_BODY_DONE)

    def http_chunk(self, data):
        _http_chunk(self, data)

    def http_sse(self, str event_type not None, str data not None):
        _http_sse(self, event_type, data)

    def http_basic_auth(self, str username not None, str password not None):
        _http_basic_auth(self, username, password)

    # WebSocket (ws.pxi)
    def ws_upgrade(self, HttpMessage message, extra_headers=None, *, bint deflate=False):
        _ws_upgrade(self, message, extra_headers, deflate)

    def pause_reading(self, bint paused=True):
        _pause_reading(self, paused)  # loop_integration.pxi

    def ws_accept(self, key, headers=None, *, deflate_offer=None):
        _ws_accept(self, key, headers, deflate_offer)

    def ws_send(self, data, op=WEBSOCKET_OP_TEXT):
        _ws_send(self, data, op)

    # MQTT (mqtt.pxi)
    def mqtt_pub(self, str topic not None, message, qos=0, retain=False):
        return _mqtt_pub(self, topic, message, qos, retain)

    def mqtt_sub(self, str topic not None, qos=0):
        _mqtt_sub(self, topic, qos)

    def mqtt_unsub(self, str topic not None):
        _mqtt_unsub(self, topic)

    def mqtt_ping(self):
        _mqtt_ping(self)

    def mqtt_pong(self):
        _mqtt_pong(self)

    def mqtt_disconnect(self):
        _mqtt_disconnect(self)

    # TLS (tls.pxi)
    def tls_init(self, TlsOpts opts):
        _tls_init(self, opts)

    def tls_free(self):
        _tls_free(self)

    # DNS / SNTP (dns_sntp.pxi)
    def resolve(self, str url not None):
        _resolve(self, url)

    def resolve_cancel(self):
        _resolve_cancel(self)

    def sntp_request(self):
        _sntp_request(self)
