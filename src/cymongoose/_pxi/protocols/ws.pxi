# WebSocket: client connect, server upgrade, frame sending, close-code bookkeeping, and a frame
# guard in front of Mongoose's parser that refuses what RFC 6455 forbids and Mongoose lets by.

from libc.stdio cimport snprintf

# How Mongoose 7.23 (src/ws.c) delivers frames, which this file builds on:
# - TEXT/BINARY with FIN: MG_EV_WS_MSG. Fragments are reassembled in c->recv (c->pfn_data is
#   the reassembly offset) and delivered as one MG_EV_WS_MSG whose flags are the first
#   fragment's (opcode in the low 4 bits, FIN clear). Control frames may be interleaved.
# - PING: Mongoose answers PONG itself, then fires MG_EV_WS_CTL. PONG and every CONTINUATION
#   fragment also fire MG_EV_WS_CTL.
# - CLOSE: MG_EV_WS_CTL (payload = 2-byte code + UTF-8 reason), then Mongoose echoes the
#   payload in its own CLOSE frame and drains (flush, then close the socket).
# The public API delivers None for MG_EV_WS_CTL (0.2.5 compatibility), so the close code is
# surfaced on the connection instead: Connection.ws_close_code / ws_close_reason, set before
# the MG_EV_WS_CTL handler runs and kept after the connection closes.
#
# What Mongoose does not check, the guard below does before Mongoose parses: reserved bits,
# unknown opcodes, masking direction, control-frame size/fragmentation, stray or interleaved
# continuation frames, invalid close codes, and message size: a frame or reassembled message
# over the connection's max_body_size (http_limits.pxi; Mongoose itself silently waits forever for
# a frame over 1 GiB), refused when its header is read, before its payload arrives. A violation
# sends CLOSE 1002 (1009 for size), fires MG_EV_ERROR with the reason, and closes after a
# lingering close (_ws_fail); bytes after a CLOSE frame are ignored.
# Not checked: UTF-8 validity of TEXT payloads (WsMessage.text decodes with surrogateescape).

# Mongoose's own frame parser (static mg_ws_cb, exported by build_fixes.py): the guard
# calls it once the bytes are known to be valid.
cdef mg.mg_event_handler_t _mg_ws_cb = mg.cym_mg_ws_cb

# Mongoose ignores frames over 1 GiB without an error (ws_process returns 0 and waits).
DEF _WS_HARD_LIMIT = 1024 * 1024 * 1024
DEF _WS_PROTOCOL_ERROR = 1002
DEF _WS_TOO_BIG = 1009


cdef Connection _ws_connect(Manager manager, str url, object handler):
    manager._ensure_open()
    _check_handler(handler, "handler")
    cdef bytes burl = _utf8_no_nul(url, "url")
    cdef Connection conn = Connection.__new__(Connection)
    conn._handler = handler
    conn._manager = <void *>manager
    conn._limits = manager._limits
    cdef mg.mg_connection *c
    Py_INCREF(conn)  # the reference c->fn_data will own until MG_EV_CLOSE
    # No extra-header format: user text never reaches a C format string.
    c = mg.mg_ws_connect(&manager._mgr, burl, _on_event, <void *>conn, NULL)
    if c == NULL:
        Py_DECREF(conn)
        raise RuntimeError(
            f"Failed to connect to {url!r}: check the scheme (ws:// or wss://), host and port")
    if not conn._bound:
        conn._c = c
        conn._bound = True
    _ws_install_guard(c)
    _raise_pending(manager)
    return conn


cdef inline void _ws_install_guard(mg.mg_connection *c) noexcept:
    _put_in_front(c, _mg_ws_cb, _ws_guard)


cdef tuple _ws_header_block(object extra_headers):
    """('Name: value\\r\\n' lines for the 101 response, the Sec-WebSocket-Protocol chosen
    there or None). Same rules as reply() (http.pxi): RFC 9110 names, and no control
    characters but tab in values (no response splitting)."""
    if extra_headers is None:
        return b"", None
    if not isinstance(extra_headers, dict):
        raise TypeError(
            f"extra_headers must be a dict or None, not {type(extra_headers).__name__}")
    cdef list lines = []
    cdef bytes chosen = None
    cdef bytes name
    cdef bytes value
    for key, val in (<dict>extra_headers).items():
        if type(key) is not str:
            key = str(key)
        if type(val) is not str:
            val = str(val)
        name = (<str>key).encode("utf-8")
        value = (<str>val).encode("utf-8")
        if not _valid_name(name, len(name)):
            raise ValueError(_bad_header_name(key))
        if not _valid_value(value, len(value)):
            raise ValueError(_bad_header_value(key, val))
        if _is_named(name, len(name), b"sec-websocket-protocol", 22):
            chosen = value
        lines.append(name + b": " + value + b"\r\n")
    return b"".join(lines), chosen


cdef int _ws_upgrade(Connection conn, HttpMessage message, object extra_headers,
                     bint deflate) except -1:
    conn._ensure_open()
    _check_message(message)
    cdef mg.mg_connection *c = conn._c
    if c.is_websocket:
        raise RuntimeError("ws_upgrade(): this connection is already a WebSocket")
    if mg.cym_h2_is_stream(c):
        raise RuntimeError("ws_upgrade(): this request came over HTTP/2, whose streams are "
                           "not upgraded (WebSocket clients connect with HTTP/1.1)")
    cdef bytes block
    cdef bytes chosen
    block, chosen = _ws_header_block(extra_headers)
    cdef bytes agreed = None
    if deflate and not _has_extensions_line(block):
        # The caller's own Sec-WebSocket-Extensions line, if any, wins: it negotiated itself.
        agreed = _ws_deflate_negotiate(conn, _ws_deflate_offer_text(message._hm))
        if agreed is not None:
            block += agreed
    cdef mg.mg_str *offered = mg.mg_http_get_header(message._hm, b"Sec-WebSocket-Protocol")
    cdef bytes offered_line = None
    if offered != NULL:
        offered_line = (b"Sec-WebSocket-Protocol: " + _bytes_mg(offered[0]) + b"\r\n")
    cdef size_t mark = c.send.len
    # Header text goes in as a %s argument, never as the format. WS_OPEN fires inside.
    if len(block):
        mg.mg_ws_upgrade(c, message._hm, "%s", <const char *>block)
    else:
        mg.mg_ws_upgrade(c, message._hm, NULL)
    if not c.is_websocket:
        _ws_deflate_free(conn)  # refused (no key: 426): nothing was agreed
    if c.is_websocket:
        # Mongoose echoes the client's whole Sec-WebSocket-Protocol value. That is a duplicate
        # when the caller chose one in extra_headers, and invalid when the client offered a
        # list: either way remove Mongoose's line, so the response carries at most one.
        if offered_line is not None and (chosen is not None or b"," in offered_line):
            _ws_drop_echo(c, mark, offered_line)
        # Keep http_cb from parsing frames pipelined behind the request as HTTP; the guard
        # clears the flag on the next MG_EV_POLL, which makes Mongoose fire MG_EV_READ for them.
        c.is_resp = 1
        _metrics_websocket(c, &conn._guard)
    _ws_install_guard(c)
    _raise_pending(<Manager>conn._manager)
    return 0


cdef int _ws_accept(Connection conn, object key, object headers,
                    object deflate_offer) except -1:
    """Answer, later, a WebSocket handshake whose head arrived as MG_EV_HTTP_HDRS on a
    stream_body listener (an ASGI app accepts after the event is over, when its HttpMessage
    is gone): the 101 for `key` (the request's Sec-WebSocket-Key) with `headers`, then the
    connection speaks WebSocket. `deflate_offer`: the request's Sec-WebSocket-Extensions,
    to negotiate permessage-deflate from (ws_deflate.pxi), or None."""
    conn._ensure_open()
    cdef mg.mg_connection *c = conn._c
    cdef HttpGuard *g = &conn._guard
    if c.is_websocket:
        raise RuntimeError("ws_accept(): this connection is already a WebSocket")
    if (g.phase != _PH_STREAM and g.phase != _PH_RESP) or not c.is_resp:
        raise RuntimeError("ws_accept(): no request is waiting for an answer on this "
                           "connection (it answers a request of a stream_body listener)")
    if g.resp_state != _RS_IDLE:
        raise RuntimeError("ws_accept(): this request's response was already started")
    if type(key) is not bytes or not 0 < len(key) <= 64 or \
            not _valid_value(<bytes>key, len(key)):
        raise ValueError("key must be the request's Sec-WebSocket-Key as bytes")
    if not (g.flags & _GF_BODY_DONE) or g.body_ready:
        raise RuntimeError("ws_accept(): the handshake request has a body still unread")
    cdef long long declared = -1
    cdef int conn_tokens = 0
    cdef bint has_connection = False
    cdef size_t saved = c.send.len
    cdef bytes block = b""
    # Validated as http_begin() validates, written into the send buffer and taken back out
    # as one string for Mongoose's "%s" (user text never becomes a format).
    if headers is not None:
        try:
            _put_headers(c, headers, 101, &declared, &conn_tokens, &has_connection)
            block = PyBytes_FromStringAndSize(<char *>c.send.buf + saved,
                                              <Py_ssize_t>(c.send.len - saved))
        finally:
            c.send.len = saved
    if has_connection or declared >= 0:
        raise ValueError("Connection and Content-Length are set by the server in a 101")
    cdef bytes agreed = None
    if deflate_offer is not None and not _has_extensions_line(block):
        agreed = _ws_deflate_negotiate(conn, deflate_offer)
        if agreed is not None:
            block += agreed
    cdef mg.mg_http_message hm
    memset(&hm, 0, sizeof(mg.mg_http_message))
    hm.headers[0].name.buf = b"Sec-WebSocket-Key"
    hm.headers[0].name.len = 17
    hm.headers[0].value.buf = PyBytes_AS_STRING(key)
    hm.headers[0].value.len = <size_t>len(key)
    g.phase = _PH_NONE  # the HTTP guard is done with this connection
    mg.mg_ws_upgrade(c, &hm, "%s", <const char *>block)
    # As in _ws_upgrade: the guard clears is_resp on the next poll.
    c.is_resp = 1
    _metrics_websocket(c, g)
    _ws_install_guard(c)
    _raise_pending(<Manager>conn._manager)
    return 0


cdef bint _has_extensions_line(bytes block):
    """Does a header block ('Name: value\\r\\n' lines) set Sec-WebSocket-Extensions?"""
    return b"\nsec-websocket-extensions:" in (b"\n" + block.lower())


cdef void _ws_drop_echo(mg.mg_connection *c, size_t mark, bytes line) noexcept:
    # The 101 head starts at `mark` and ends with Mongoose's echo line, then CRLF. A WS_OPEN
    # handler may have appended frames after it, so locate the head's end, not the buffer's.
    cdef bytes head = PyBytes_FromStringAndSize(<char *>c.send.buf + mark,
                                                <Py_ssize_t>(c.send.len - mark))
    cdef Py_ssize_t end = head.find(b"\r\n\r\n")
    if end < 0:
        return
    cdef Py_ssize_t start = end + 2 - len(line)
    if start >= 0 and head[start:end + 2] == line:
        mg.mg_iobuf_del(&c.send, mark + <size_t>start, <size_t>len(line))


cdef int _ws_send(Connection conn, object data, object op) except -1:
    conn._ensure_open()
    if not isinstance(op, int) or isinstance(op, bool):
        raise TypeError(f"op must be an int WebSocket opcode, not {type(op).__name__}")
    if op < 0 or op > 15:
        raise ValueError(f"op must be a WebSocket opcode between 0 and 15, not {op}")
    cdef Py_buffer view
    PyObject_GetBuffer(_buffer_source(data, "data"), &view, PyBUF_SIMPLE)  # a *_view: no copy
    try:
        _ws_send_buffer(conn, <const char *>view.buf, <size_t>view.len, op)
    finally:
        PyBuffer_Release(&view)
    return 0


cdef int _ws_send_buffer(Connection conn, const char *buf, size_t n, int op) except -1:
    if op >= 8 and n > 125:
        raise ValueError(
            f"control frames (op {op}) carry at most 125 bytes (RFC 6455 §5.5), got {n}")
    cdef int iop = op
    cdef mg.mg_connection *c = conn._c
    if iop == mg.WEBSOCKET_OP_CLOSE:
        conn._ws_close_sent = True
    if conn._ws_deflate != NULL and _ws_send_deflated(conn, buf, n, iop):
        return 0  # ws_deflate.pxi: compressed, RSV1 set
    if mg.mg_ws_send(c, buf, n, iop) < n + 2:
        # Mongoose may have queued the header without the payload: the stream is broken.
        c.is_closing = 1
        raise RuntimeError("ws_send failed: out of memory for the send buffer")
    return 0


cdef void _ws_on_ctl(Connection conn, mg.mg_connection *c, mg.mg_ws_message *wm) noexcept:
    """Record the peer's close code before MG_EV_WS_CTL reaches the handler (dispatch.pxi)."""
    if (wm.flags & 0x0F) != mg.WEBSOCKET_OP_CLOSE:
        return
    if wm.data.len >= 2:
        conn._ws_close_code = ((<uint8_t>wm.data.buf[0]) << 8) | <uint8_t>wm.data.buf[1]
        conn._ws_close_reason = _decode(wm.data.buf + 2, wm.data.len - 2)
    else:
        conn._ws_close_code = 1005  # RFC 6455 §7.1.5: no status code was present
        conn._ws_close_reason = ""
    if conn._ws_close_sent:
        # Both close frames exchanged: close the socket now. Mongoose would echo this close
        # back after the handler (a second CLOSE from us); closing discards that echo.
        c.is_closing = 1


cdef inline bint _ws_valid_close_code(unsigned code) noexcept nogil:
    # RFC 6455 §7.4: 1004-1006 and 1015 must never be sent; 1000-2999 is reserved for the
    # protocol (1012-1014 are registered with IANA); 3000-4999 for libraries and apps.
    return ((1000 <= code <= 1003) or (1007 <= code <= 1014) or (3000 <= code <= 4999))


cdef int _ws_scan(const uint8_t *buf, size_t length, size_t pos, bint is_client,
                  bint in_frag, size_t msg_len, size_t limit, bint rsv1_ok, size_t *stop,
                  const char **why) noexcept nogil:
    """Check every frame header from `pos` on. Returns 0, or the close code for the first
    violation with *stop at that frame. A complete CLOSE frame sets *stop to its end.
    `rsv1_ok`: permessage-deflate was negotiated, so RSV1 may mark the first frame of a data
    message as compressed (RFC 7692 §6.1), never a continuation or control frame."""
    cdef uint8_t b0, b1, op
    cdef size_t hlen, plen, i, p
    cdef uint64_t n64
    cdef unsigned code
    stop[0] = length
    while length - pos >= 2:
        b0 = buf[pos]
        b1 = buf[pos + 1]
        op = b0 & 0x0F
        stop[0] = pos
        if b0 & 0x30 or (b0 & 0x40 and (not rsv1_ok or op == 0 or op >= 8)):
            why[0] = ("RSV1 set on a continuation or control frame" if rsv1_ok and
                      not b0 & 0x30 else "reserved bits set without a negotiated extension")
            return _WS_PROTOCOL_ERROR
        if (2 < op < 8) or op > 10:
            why[0] = "unknown opcode"
            return _WS_PROTOCOL_ERROR
        if is_client and (b1 & 0x80):
            why[0] = "masked frame from the server"
            return _WS_PROTOCOL_ERROR
        if not is_client and not (b1 & 0x80):
            why[0] = "unmasked frame from the client"
            return _WS_PROTOCOL_ERROR
        plen = b1 & 0x7F
        hlen = 2
        if plen == 126:
            if length - pos < 4:
                break
            plen = (<size_t>buf[pos + 2] << 8) | buf[pos + 3]
            hlen = 4
        elif plen == 127:
            if length - pos < 10:
                break
            n64 = 0
            for i in range(8):
                n64 = (n64 << 8) | buf[pos + 2 + i]
            if n64 >> 63:
                why[0] = "frame length with the most significant bit set"
                return _WS_PROTOCOL_ERROR
            if n64 > limit:
                why[0] = "message too big"
                return _WS_TOO_BIG
            plen = <size_t>n64
            hlen = 10
        if b1 & 0x80:
            hlen += 4
        if op >= 8:
            if not (b0 & 0x80):
                why[0] = "fragmented control frame"
                return _WS_PROTOCOL_ERROR
            if plen > 125:
                why[0] = "control frame longer than 125 bytes"
                return _WS_PROTOCOL_ERROR
        elif op == 0:
            if not in_frag:
                why[0] = "continuation frame without a message to continue"
                return _WS_PROTOCOL_ERROR
            if plen > limit - msg_len:
                why[0] = "message too big"
                return _WS_TOO_BIG
            msg_len += plen
            if b0 & 0x80:
                in_frag = False
                msg_len = 0
        else:
            if in_frag:
                why[0] = "new message inside a fragmented message"
                return _WS_PROTOCOL_ERROR
            if plen > limit:
                why[0] = "message too big"
                return _WS_TOO_BIG
            if not (b0 & 0x80):
                in_frag = True
                msg_len = plen
        if length - pos < hlen + plen:
            break  # the rest of this frame has not arrived yet
        if op == mg.WEBSOCKET_OP_CLOSE:
            if plen == 1:
                why[0] = "close frame with a 1-byte payload"
                return _WS_PROTOCOL_ERROR
            if plen >= 2:
                p = pos + hlen
                if b1 & 0x80:  # payload still masked: unmask the two code bytes
                    code = (((buf[p] ^ buf[p - 4]) << 8) | (buf[p + 1] ^ buf[p - 3]))
                else:
                    code = (<unsigned>buf[p] << 8) | buf[p + 1]
                if not _ws_valid_close_code(code):
                    why[0] = "invalid close code"
                    return _WS_PROTOCOL_ERROR
            stop[0] = pos + hlen + plen  # RFC 6455 §5.5.1: nothing follows a close
            return 0
        pos += hlen + plen
    stop[0] = length
    return 0


cdef size_t _ws_limit(mg.mg_connection *c) noexcept with gil:
    # The connection's body limit (http_guard.pxi) bounds a message, whole or reassembled.
    cdef size_t limit = _WS_HARD_LIMIT
    cdef Connection conn
    if c.fn_data != NULL:
        conn = <Connection>c.fn_data
        if 0 < conn._limits.max_body_size < limit:
            limit = conn._limits.max_body_size
    return limit


cdef struct _WsLinger:
    # A failed WebSocket reads and discards what its client still sends (see _ws_fail).
    uint64_t until  # mg_millis() when it closes, whatever the client is doing
    bint shut  # our side is half-closed: the CLOSE frame is out, the FIN after it


cdef _WsLinger *_ws_linger(mg.mg_connection *c) noexcept with gil:
    """The discard state of a connection that just failed, from its limits; NULL: close as
    soon as the CLOSE frame is out (lingering turned off, or no memory)."""
    cdef Connection conn
    cdef _WsLinger *w
    cdef uint64_t ms
    if c.fn != _on_event or c.fn_data == NULL:
        return NULL
    conn = <Connection>c.fn_data
    # As after an HTTP refusal (http_guard.pxi _start_linger): linger_timeout_ms in all.
    ms = conn._limits.linger_timeout_ms
    if ms == 0 or conn._limits.linger_time_ms == 0:
        return NULL
    if conn._limits.linger_time_ms < ms:
        ms = conn._limits.linger_time_ms
    w = <_WsLinger *>calloc(1, sizeof(_WsLinger))
    if w != NULL:
        w.until = mg.mg_millis() + ms
    return w


cdef void _ws_fail(mg.mg_connection *c, int code, const char *why) noexcept nogil:
    """Fail the WebSocket (RFC 6455 §7.1.7): CLOSE with `code`, MG_EV_ERROR, then close.
    A client still sending (the rest of a message over the limit) would turn an immediate
    close into a reset that destroys the CLOSE frame before it reads it; so, as the HTTP
    guard's lingering close, the frame is flushed, our side half-closed, and what arrives
    discarded until the client closes, for linger_timeout_ms at most (the websockets
    library's server also reads on until the client's answer to its 1009)."""
    cdef uint8_t frame[2 + 123]
    cdef char msg[192]
    cdef size_t n = strlen(why)
    if n > 123:
        n = 123
    frame[0] = <uint8_t>(code >> 8)
    frame[1] = <uint8_t>(code & 0xFF)
    memcpy(&frame[2], why, n)
    # From now on nothing is parsed: the discarding handler is this connection's "failed" mark.
    c.pfn = _ws_discard
    c.pfn_data = NULL
    c.recv.len = 0
    mg.mg_ws_send(c, frame, n + 2, mg.WEBSOCKET_OP_CLOSE)
    c.pfn_data = <void *>_ws_linger(c)
    if c.pfn_data == NULL:
        c.is_draining = 1  # flush the CLOSE, then close (mg_error would drop it unsent)
    snprintf(msg, sizeof(msg), "WebSocket protocol error: %s (closed with code %d)", why, code)
    mg.mg_call(c, mg.MG_EV_ERROR, msg)


cdef void _ws_discard(mg.mg_connection *c, int ev, void *ev_data) noexcept nogil:
    cdef _WsLinger *w = <_WsLinger *>c.pfn_data
    if ev == mg.MG_EV_READ:
        # Read on and discard until the client closes or w.until passes. Not reading would
        # block the client's send, and a client that handles frames only between its sends
        # (the websockets library's sync client holds one lock across both) would never read
        # our CLOSE: the close at w.until would then be a reset that loses it. Discarding
        # costs a recv per buffer, bounded in time by linger_timeout_ms, as the HTTP guard's
        # lingering close (and nginx's lingering_time).
        c.recv.len = 0
    elif ev == mg.MG_EV_POLL and w != NULL:
        if c.send.len == 0 and not w.shut and not c.is_tls:
            # The CLOSE frame is out: the FIN after it tells the client nothing else follows.
            shutdown(<int><size_t>c.fd, SHUT_WR)
            w.shut = True
        if mg.mg_millis() >= w.until:
            c.is_closing = 1
    elif ev == mg.MG_EV_CLOSE and w != NULL:
        c.pfn_data = NULL
        free(w)


cdef void _ws_guard(mg.mg_connection *c, int ev, void *ev_data) noexcept nogil:
    cdef size_t ofs, start, stop
    cdef const char *why = NULL
    cdef int code
    cdef int n
    if ev == mg.MG_EV_POLL:
        if c.is_resp and c.is_websocket and not c.is_client:
            c.is_resp = 0  # see _ws_upgrade: Mongoose now fires MG_EV_READ after this POLL
        _mg_ws_cb(c, ev, ev_data)
        return
    if ev != mg.MG_EV_READ:
        _mg_ws_cb(c, ev, ev_data)
        return
    if c.is_closing or c.is_draining or (not c.is_websocket and not c.is_client):
        # Going away (a CLOSE was exchanged, the user drained, or a 426 was sent): ignore.
        c.recv.len = 0
        return
    ofs = <size_t>c.pfn_data
    start = ofs
    if c.is_client and not c.is_websocket:
        n = mg.mg_http_get_request_len(c.recv.buf, c.recv.len)
        if n <= 0:
            _mg_ws_cb(c, ev, ev_data)  # handshake incomplete or not HTTP: Mongoose decides
            return
        start = <size_t>n
        ofs = 0
    if start >= c.recv.len:
        _mg_ws_cb(c, ev, ev_data)
        return
    _take_gil_back(<GilSlot *>c.mgr.userdata)  # the user handler right after needs it anyway
    code = _ws_scan(c.recv.buf, c.recv.len, start, c.is_client, ofs > 0,
                    ofs - 1 if ofs > 0 else 0, _ws_limit(c),
                    not c.is_client and _ws_deflate_on(c), &stop, &why)
    if stop < c.recv.len:
        c.recv.len = stop  # Mongoose only sees the frames before the violation or the close
    _mg_ws_cb(c, ev, ev_data)
    if code != 0 and not c.is_closing and not c.is_draining:
        _ws_fail(c, code, why)
