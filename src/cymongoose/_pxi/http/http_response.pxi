# Responses written piecewise, at any time while the request is open (from the handler, a
# later event, a timer or a call_soon_threadsafe() callback): http_begin() writes the head,
# http_write()/http_sendfile() the body, http_end() completes it. The framing is chosen here
# from the request (HEAD, HTTP/1.0) and the headers (Content-Length), and enforced: a body
# larger than its Content-Length is refused, a shorter one closes the connection, so a
# response is never malformed. Keep-alive and pipelining follow the guard (http_guard.pxi).

cdef enum:
    _RS_IDLE = 0
    _RS_BEGUN = 1
    _RS_END_AFTER_FILE = 2  # http_end() called while a file is still being sent

cdef enum:
    _RF_NONE = 0  # no body may be sent (HEAD, 1xx, 204, 304)
    _RF_LENGTH = 1
    _RF_CHUNKED = 2
    _RF_CLOSE = 3  # HTTP/1.0 without Content-Length: the close ends the body

DEF _FILE_BURST = 4 * 1024 * 1024  # sendfile bytes per event, so one file can't starve others
DEF _FILE_PIECE = 16384  # copied through the send buffer when sendfile can't be used

cdef bytes _TE_CHUNKED = b"Transfer-Encoding: chunked\r\n"

# What compression (http_compress.pxi) makes of a response, as it starts:
cdef enum:
    _CP_NONE = 0  # go out as written
    _CP_VARY = 1  # as written, with Vary: Accept-Encoding
    _CP_ENCODE = 2  # compressed (and Vary)
    _CP_SKIP_IDENTITY = 4  # leave the app's "Content-Encoding: identity" out
    _CP_HAS_VARY = 8  # the app's Vary already names Accept-Encoding (or is "*")

# Whole bodies at least this long are compressed with the GIL released: below it, releasing
# and taking the GIL back costs more than the other threads gain.
DEF _COMPRESS_NOGIL_AT = 32768


cdef inline const char *_field_bytes(object item, Py_ssize_t *n, str what) except NULL:
    # str is sent as ISO-8859-1, the octets HTTP fields carry (PEP 3333's rule for WSGI):
    # a str whose characters all fit one byte is stored as exactly those octets, so it is
    # read in place; bytes as they are.
    if type(item) is bytes:
        n[0] = PyBytes_GET_SIZE(item)
        return PyBytes_AS_STRING(item)
    if type(item) is str:
        if PyUnicode_KIND(item) == PyUnicode_1BYTE_KIND:
            n[0] = PyUnicode_GET_LENGTH(item)
            return <const char *>PyUnicode_1BYTE_DATA(item)
        (<str>item).encode("latin-1")  # raises UnicodeEncodeError naming the character
    raise TypeError(f"header {what} must be str or bytes, not {type(item).__name__}")


cdef inline int _put(mg.mg_connection *c, const void *p, size_t n) except -1:
    # A head is written a few bytes at a time: while the send buffer has room, copy in
    # place (mg_send() resizes and re-aligns the buffer on every call).
    if c.send.size - c.send.len >= n and not c.is_udp:
        memcpy(c.send.buf + c.send.len, p, n)
        c.send.len += n
        return 0
    if not mg.mg_send(c, p, n):
        raise MemoryError("out of memory for the send buffer")
    return 0


@cython.final
@cython.auto_pickle(False)
cdef class HeaderBlock:
    """Header fields checked and rendered once, for fields many responses carry unchanged
    (the servers' Date and Server): `more_headers=` of http_begin()/http_respond() copies
    them into each response as they are, instead of checking every byte again."""

    cdef readonly bytes lines  # the rendered "Name: value\r\n" lines
    cdef readonly tuple pairs  # the fields as given, as (name, value) tuples
    cdef int conn_tokens
    cdef bint has_connection

    def __cinit__(self, headers):
        cdef Py_ssize_t nlen, vlen
        cdef const char *nptr
        cdef const char *vptr
        cdef list parts = []
        cdef list pairs = []
        for pair in headers:
            name, value = pair
            nptr = _field_bytes(name, &nlen, "names")
            vptr = _field_bytes(value, &vlen, "values")
            if not _valid_name(nptr, nlen):
                raise ValueError(_bad_header_name(name))
            if not _valid_value(vptr, vlen):
                raise ValueError(_bad_header_value(name, value))
            if (_is_named(nptr, nlen, b"content-length", 14)
                    or _is_named(nptr, nlen, b"transfer-encoding", 17)):
                raise ValueError(f"a HeaderBlock cannot hold {name!r}: the body's framing "
                                 "belongs to each response")
            if _is_named(nptr, nlen, b"connection", 10):
                self.has_connection = True
                _connection_tokens(<const unsigned char *>vptr, <size_t>vlen,
                                   &self.conn_tokens)
            parts.append(nptr[:nlen] + b": " + vptr[:vlen] + b"\r\n")
            pairs.append((name, value))
        self.lines = b"".join(parts)
        self.pairs = tuple(pairs)

    def __len__(self):
        return len(self.pairs)

    def __iter__(self):
        return iter(self.pairs)

    def __repr__(self):
        return f"HeaderBlock({list(self.pairs)!r})"


cpdef enum DefaultHeader:
    # The fields a server adds to a response whose app left them out, as bits of the index
    # into its default header blocks (serving/default_headers.py's DefaultHeaders.blocks).
    DEFAULT_DATE = 1
    DEFAULT_SERVER = 2


cdef inline int _default_header_bit(const char *p, Py_ssize_t n) noexcept:
    """DEFAULT_DATE or DEFAULT_SERVER when p[:n] names that field (in any case), else 0."""
    if _is_named(p, n, b"date", 4):
        return DEFAULT_DATE
    if _is_named(p, n, b"server", 6):
        return DEFAULT_SERVER
    return 0


cdef int _missing_default_headers(object headers) except -1:
    """Which default fields (DEFAULT_DATE | DEFAULT_SERVER) the app's (name, value) pairs
    leave for the server to add. A name that is neither bytes nor str names none of them:
    writing the response refuses it later, with its own error."""
    cdef int missing = DEFAULT_DATE | DEFAULT_SERVER
    cdef Py_ssize_t n
    cdef const char *p
    for pair in headers:
        name = pair[0]
        if type(name) is bytes:
            n = PyBytes_GET_SIZE(name)
            p = PyBytes_AS_STRING(name)
        elif type(name) is str and PyUnicode_KIND(name) == PyUnicode_1BYTE_KIND:
            n = PyUnicode_GET_LENGTH(name)
            p = <const char *>PyUnicode_1BYTE_DATA(name)
        else:
            continue
        missing &= ~_default_header_bit(p, n)
    return missing


def missing_default_headers(headers):
    return _missing_default_headers(headers)


cdef int _put_headers(mg.mg_connection *c, object headers, int status_code,
                      long long *declared, int *conn_tokens, bint *has_connection,
                      int plan=0) except -1:
    """Validate and append `headers` (name, value) pairs as header lines. `plan`: what
    compression makes of the response (http_compress.pxi): a compressed body's
    Content-Length is read but not sent, and an opt-out's Content-Encoding is left out."""
    cdef Py_ssize_t nlen, vlen, k
    cdef const char *nptr
    cdef const char *vptr
    for pair in headers:
        name, value = pair
        nptr = _field_bytes(name, &nlen, "names")
        vptr = _field_bytes(value, &vlen, "values")
        if not _valid_name(nptr, nlen):
            raise ValueError(_bad_header_name(name))
        if not _valid_value(vptr, vlen):
            raise ValueError(_bad_header_value(name, value))
        if nlen == 14 and _is_named(nptr, nlen, b"content-length", 14):
            if declared[0] >= 0 or vlen == 0 or vlen > 18:
                raise ValueError(f"invalid or repeated Content-Length {value!r}")
            declared[0] = 0
            for k in range(vlen):
                if not 48 <= <unsigned char>vptr[k] <= 57:
                    raise ValueError(f"invalid Content-Length {value!r}")
                declared[0] = declared[0] * 10 + (vptr[k] - 48)
            if status_code == 204 or (plan & _CP_ENCODE):
                continue  # RFC 9110 §8.6: never on a 204; a compressed body has its own
        elif (plan & _CP_SKIP_IDENTITY) and nlen == 16 and \
                _is_named(nptr, nlen, b"content-encoding", 16):
            continue  # the app's "identity": no compression, and no such field (RFC 9110)
        elif nlen == 17 and _is_named(nptr, nlen, b"transfer-encoding", 17):
            raise ValueError(
                "Transfer-Encoding is chosen by the server: leave it out (a response "
                "without Content-Length is sent chunked)")
        elif nlen == 10 and _is_named(nptr, nlen, b"connection", 10):
            has_connection[0] = True
            _connection_tokens(<const unsigned char *>vptr, <size_t>vlen, conn_tokens)
        elif (plan & _CP_ENCODE) and nlen == 4 and _is_named(nptr, nlen, b"etag", 4) \
                and vlen and vptr[0] == 34:
            # Compressed here, the bytes are no longer the ones a strong tag names: weak,
            # as nginx's gzip makes it, so If-None-Match still matches (weakly).
            _put(c, b"ETag: W/", 8)
            _put(c, vptr, <size_t>vlen)
            _put(c, b"\r\n", 2)
            continue
        _put(c, nptr, <size_t>nlen)
        _put(c, b": ", 2)
        _put(c, vptr, <size_t>vlen)
        _put(c, b"\r\n", 2)
    return 0


cdef int _check_response_start(Connection conn, str what) except -1:
    """One response per request, and none after close(): a second response would reach
    the client as the answer to its next (pipelined) request, and after close() nothing is
    sent at all. Both were silent in 0.2.x; both are the handler's bug, told at once.
    A connection the guard does not watch (a client, a plain TCP listener) is not checked:
    it has no request to answer."""
    conn._ensure_open()
    if conn._close_called:
        raise RuntimeError(f"{what}: close() was already called on this connection, so "
                           "nothing more is sent on it; answer before closing")
    cdef HttpGuard *g = &conn._guard
    cdef mg.mg_connection *c = conn._c
    if g.resp_state != _RS_IDLE:
        raise RuntimeError(f"{what}: a response was started with http_begin(): finish it "
                           "with http_write()/http_end()")
    if g.phase == _PH_NONE:
        return 0
    if g.phase != _PH_RESP and g.phase != _PH_STREAM:
        raise RuntimeError(f"{what}: no request is waiting for a response on this "
                           "connection (its last request was already answered)")
    # Answered: Mongoose clears is_resp when a response is complete, and a served file
    # keeps its sender in c->pfn (or, once the handler returned, in g.inner) until sent.
    # Before MG_EV_HTTP_MSG (a buffered request's MG_EV_HTTP_HDRS) is_resp is not set yet.
    if (g.inner != NULL or c.pfn == _mg_file_sender
            or (not c.is_resp and (g.phase == _PH_STREAM
                                   or (g.flags & (_GF_DELIVERED | _GF_STREAM)) != 0))):
        raise RuntimeError(f"{what}: this request was already answered; each request gets "
                           "exactly one response")
    return 0


cdef int _check_status(int status_code) except -1:
    """A final status: an interim one (1xx) would leave the client waiting for the real
    answer, and four digits are no status at all."""
    if not 200 <= status_code <= 999:
        raise ValueError(
            f"status_code must be between 200 and 999 (interim 1xx responses are sent by "
            f"the server), not {status_code}")
    return 0


cdef int _http_begin(Connection conn, int status_code, object headers, object reason,
                     object more_headers=None, Py_ssize_t body_len=-1,
                     str what="http_begin()", int plan=-1) except -1:
    """Write the head. `body_len` >= 0: the whole body is that long and comes right after
    (http_respond), so a missing Content-Length is added rather than chunking. `plan`:
    compression's decision when the caller made it (http_respond: `body_len` is then the
    compressed length); -1: made here, for a streamed body."""
    _check_response_start(conn, what)
    cdef mg.mg_connection *c = conn._c
    cdef HttpGuard *g = &conn._guard
    if g.phase != _PH_RESP and g.phase != _PH_STREAM:
        raise RuntimeError(
            f"{what}: no request is waiting for a response on this connection (it answers "
            "a request received on an HTTP listener)")
    if not c.is_resp:
        raise RuntimeError(f"{what}: this request was already answered; each request gets "
                           "exactly one response")
    _check_status(status_code)
    cdef bytes status
    if reason is None:
        status = _status_line(status_code)
    else:
        if isinstance(reason, str):
            reason = (<str>reason).encode("latin-1")
        elif not isinstance(reason, bytes):
            raise TypeError(f"reason must be str, bytes or None, not {type(reason).__name__}")
        if not _valid_value(PyBytes_AS_STRING(reason), PyBytes_GET_SIZE(reason)):
            raise ValueError(f"reason {reason!r} contains CR, LF, NUL or another control "
                             "character")
        status = b"HTTP/1.1 %d %s\r\n" % (status_code, reason)
    cdef long long declared = -1
    cdef HeaderBlock block
    cdef int conn_tokens = 0
    cdef bint has_connection = False
    cdef bint nobody = (g.flags & _GF_HEAD) != 0 or status_code == 204 or status_code == 304
    cdef char number[24]
    cdef int k
    cdef size_t n
    if plan < 0:
        plan = _CP_NONE
        if (<GilSlot *>c.mgr.userdata).compress != NULL:
            if headers is not None and type(headers) is not list and \
                    type(headers) is not tuple:
                headers = list(headers)  # read twice: by the plan, then written
            if more_headers is not None and type(more_headers) is not HeaderBlock and \
                    type(more_headers) is not list and type(more_headers) is not tuple:
                more_headers = list(more_headers)
            plan = _compress_plan(conn, headers, more_headers, status_code, -1, NULL)
    # Written straight into the send buffer; a header refused half-way takes it all back.
    cdef size_t saved = c.send.len
    try:
        _put(c, PyBytes_AS_STRING(status), <size_t>PyBytes_GET_SIZE(status))
        if headers is not None:
            _put_headers(c, headers, status_code, &declared, &conn_tokens, &has_connection,
                         plan)
        if type(more_headers) is HeaderBlock:
            block = <HeaderBlock>more_headers
            _put(c, PyBytes_AS_STRING(block.lines), <size_t>PyBytes_GET_SIZE(block.lines))
            conn_tokens |= block.conn_tokens
            has_connection = has_connection or block.has_connection
        elif more_headers is not None:
            _put_headers(c, more_headers, status_code, &declared, &conn_tokens,
                         &has_connection, plan)
        if plan != _CP_NONE:
            _put_coding_fields(c, g.coding, plan)
        if plan & _CP_ENCODE and body_len < 0:
            # Streamed and compressed: the app's Content-Length counts what it writes, and
            # the wire is chunked (or ends with the connection, for HTTP/1.0).
            g.plain_counted = declared >= 0
            g.plain_left = <size_t>declared if declared >= 0 else 0
            declared = -1
        elif plan & _CP_ENCODE:
            declared = -1  # the compressed length (body_len) frames it
        if nobody:
            g.resp_framing = _RF_NONE
        elif declared >= 0:
            g.resp_framing = _RF_LENGTH
            g.resp_left = <size_t>declared
        elif body_len >= 0:
            g.resp_framing = _RF_LENGTH
            g.resp_left = <size_t>body_len
            n = <size_t>body_len
            k = 23
            while True:
                number[k] = <char>(48 + n % 10)
                n //= 10
                if n == 0:
                    break
                k -= 1
            _put(c, b"Content-Length: ", 16)
            _put(c, &number[k], <size_t>(24 - k))
            _put(c, b"\r\n", 2)
        elif not (g.flags & _GF_HTTP10):
            g.resp_framing = _RF_CHUNKED
            _put(c, PyBytes_AS_STRING(_TE_CHUNKED), <size_t>PyBytes_GET_SIZE(_TE_CHUNKED))
        else:
            g.resp_framing = _RF_CLOSE
            g.flags |= _GF_CLOSE
        conn_field = _connection_field(conn, has_connection, (conn_tokens & _GF_CLOSE) != 0)
        if conn_field != NULL:
            _put(c, conn_field, strlen(conn_field))
        _put(c, b"\r\n", 2)
        if plan & _CP_ENCODE and body_len < 0 and g.resp_framing != _RF_NONE:
            _encoder_open(c, g)
    except BaseException:
        c.send.len = saved
        g.resp_framing = _RF_NONE
        g.resp_left = 0
        g.plain_counted = False
        raise
    g.resp_state = _RS_BEGUN
    g.flags |= _GF_RESP_BEGUN
    g.resp_status = status_code
    return 0


cdef object _http_respond(Connection conn, int status_code, object headers, object body,
                          object reason, object more_headers):
    """A whole response in one call: head, body and end (see http_begin/http_end)."""
    conn._ensure_open()
    cdef Py_buffer view
    if isinstance(body, str):
        raise TypeError("response bodies are bytes: encode str first")
    PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
    cdef HttpGuard *g = &conn._guard
    cdef size_t before = conn._c.send.len
    cdef int plan = _CP_NONE
    cdef long long declared = -1
    cdef Manager manager = None
    cdef const void *data = view.buf
    cdef Py_ssize_t size = view.len
    try:
        if (<GilSlot *>conn._c.mgr.userdata).compress != NULL:
            if headers is not None and type(headers) is not list and \
                    type(headers) is not tuple:
                headers = list(headers)
            if more_headers is not None and type(more_headers) is not HeaderBlock and \
                    type(more_headers) is not list and type(more_headers) is not tuple:
                more_headers = list(more_headers)
            plan = _compress_plan(conn, headers, more_headers, status_code, view.len,
                                  &declared)
            if plan & _CP_ENCODE:
                if declared >= 0 and declared != view.len:
                    raise ValueError(f"the body has {view.len} bytes but the Content-Length "
                                     f"says {declared}")
                manager = <Manager>(<GilSlot *>conn._c.mgr.userdata).manager
                _encode_whole(manager, g.coding, view.buf, <size_t>view.len)
                data = manager._whole_out.buf
                size = <Py_ssize_t>manager._whole_out.len
        _http_begin(conn, status_code, headers, reason, more_headers, size,
                    "http_respond()", plan)
        # With a whole body the framing is its length (or none, for HEAD, 204, 304).
        if g.resp_framing == _RF_LENGTH:
            if <size_t>size != g.resp_left:
                raise ValueError(
                    f"the body has {view.len} bytes but the Content-Length says "
                    f"{g.resp_left}")
            g.resp_left = 0
            _put(conn._c, data, <size_t>size)
    except BaseException:
        if g.resp_state == _RS_BEGUN:  # nothing of this response may go out
            conn._c.send.len = before
            g.flags &= ~_GF_RESP_BEGUN
            g.resp_state = _RS_IDLE
            g.resp_framing = _RF_NONE
            g.resp_left = 0
        raise
    finally:
        PyBuffer_Release(&view)
        if manager is not None:
            _trim_whole_out(manager)
    return _finish_response(conn._c, g)


cdef int _check_writing(Connection conn) except -1:
    conn._ensure_open()
    if conn._guard.resp_state != _RS_BEGUN:
        raise RuntimeError(
            "no response in progress: call http_begin() first (and nothing after http_end())")
    if conn._guard.file_fd >= 0:
        raise RuntimeError("a file is still being sent: wait for it, or call http_end()")
    return 0


cdef int _chunk_size_line(char *line, size_t n) noexcept nogil:
    """Write "<hex n>\r\n" at the end of line[24] (the reverse proxy's chunks too); where
    it starts. It ends at line + 23."""
    cdef int k = 20
    line[21] = 13
    line[22] = 10
    while True:
        line[k] = b"0123456789abcdef"[n & 15]
        n >>= 4
        if n == 0:
            break
        k -= 1
    return k


cdef int _send_chunk_size(mg.mg_connection *c, size_t n) except -1:
    cdef char line[24]
    cdef int k = _chunk_size_line(line, n)
    if not mg.mg_send(c, &line[k], <size_t>(23 - k)):
        raise RuntimeError("out of memory for the send buffer")
    return 0


cdef int _http_write(Connection conn, object data) except -1:
    _check_writing(conn)
    cdef mg.mg_connection *c = conn._c
    cdef HttpGuard *g = &conn._guard
    cdef Py_buffer view
    if isinstance(data, str):
        raise TypeError("response bodies are bytes: encode str first")
    cdef int r
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        if view.len == 0 or g.resp_framing == _RF_NONE:
            return 0
        if g.encoder != NULL:
            if g.plain_counted:
                if <size_t>view.len > g.plain_left:
                    raise ValueError(
                        f"writing {view.len} bytes would exceed the response's "
                        f"Content-Length ({g.plain_left} bytes left)")
                g.plain_left -= <size_t>view.len
            if view.len >= _COMPRESS_NOGIL_AT:
                with nogil:
                    r = _encode_piece(c, g, view.buf, <size_t>view.len, mg.CYM_FLUSH)
            else:
                r = _encode_piece(c, g, view.buf, <size_t>view.len, mg.CYM_FLUSH)
            if r != 0:
                raise MemoryError("http_write failed: out of memory compressing the body")
            return 0
        if g.resp_framing == _RF_LENGTH:
            if <size_t>view.len > g.resp_left:
                raise ValueError(
                    f"writing {view.len} bytes would exceed the response's Content-Length "
                    f"({g.resp_left} bytes left)")
            g.resp_left -= <size_t>view.len
        elif g.resp_framing == _RF_CHUNKED:
            _send_chunk_size(c, <size_t>view.len)
        if not mg.mg_send(c, view.buf, <size_t>view.len):
            raise RuntimeError("http_write failed: out of memory for the send buffer")
        if g.resp_framing == _RF_CHUNKED:
            mg.mg_send(c, b"\r\n", 2)
    finally:
        PyBuffer_Release(&view)
    return 0


cdef bint _finish_response(mg.mg_connection *c, HttpGuard *g) noexcept nogil:
    return _finish_response_with(c, g, NULL, 0)


cdef bint _finish_response_with(mg.mg_connection *c, HttpGuard *g, const char *trailers,
                                size_t trailers_len) noexcept nogil:
    """Close the response's framing and hand the connection back to the guard. False when
    the body fell short of its Content-Length: the connection is closed after the flush,
    which tells the client the response is incomplete. `trailers`: field lines sent after
    a chunked body's last chunk (RFC 9112 section 7.1.2); with any other framing there is
    no place for them, and they are dropped."""
    cdef bint whole = True
    cdef bint close = False
    if g.encoder != NULL:
        # The compressed stream's end (the gzip trailer, zstd's last block) goes first.
        if _encode_piece(c, g, NULL, 0, mg.CYM_END) != 0 or \
                (g.plain_counted and g.plain_left > 0):
            whole = False
            close = True
        _encoder_close(c, g)
    g.plain_counted = False
    if not whole:
        pass  # an unfinished body: no last chunk, the close tells the client
    elif g.resp_framing == _RF_CHUNKED and trailers_len:
        mg.mg_send(c, b"0\r\n", 3)
        mg.mg_send(c, trailers, trailers_len)
        mg.mg_send(c, b"\r\n", 2)
    elif g.resp_framing == _RF_CHUNKED:
        mg.mg_send(c, b"0\r\n\r\n", 5)
    elif g.resp_framing == _RF_LENGTH and g.resp_left > 0:
        whole = False
        close = True
    elif g.resp_framing == _RF_CLOSE:
        close = True
    if g.phase == _PH_STREAM and (g.flags & _GF_CLOSE):
        close = True  # no keep-alive: no reason to read the rest of the body
    g.resp_state = _RS_IDLE
    g.resp_framing = _RF_NONE
    g.resp_left = 0
    if close and g.phase == _PH_STREAM and _stream_decode(c, g) == 0 and \
            not (g.flags & _GF_BODY_DONE):
        _linger_unread_body(c, g)
    elif close:
        _start_linger(c, g, mg.mg_millis(), False)
    c.is_resp = 0
    return whole


cdef void _linger_unread_body(mg.mg_connection *c, HttpGuard *g) noexcept nogil:
    # The client may still be sending the body: closing with its bytes unread makes the
    # kernel send a reset, which can destroy this response before a client that sends
    # first and reads later sees it. Linger as after a refusal (http_guard.pxi): flush, then
    # half-close (which also ends a close-delimited body) and discard input for a while.
    _start_linger(c, g, mg.mg_millis(), True)


cdef object _http_end(Connection conn, object trailers=None):
    conn._ensure_open()
    cdef HttpGuard *g = &conn._guard
    cdef bytes block = _trailer_block(trailers) if trailers else b""
    if g.resp_state == _RS_END_AFTER_FILE:
        return True
    if g.resp_state != _RS_BEGUN:
        raise RuntimeError("no response in progress: call http_begin() first")
    if g.file_fd >= 0:
        g.resp_state = _RS_END_AFTER_FILE  # _pump_file finishes it
        return True
    return _finish_response_with(conn._c, g, PyBytes_AS_STRING(block),
                                 <size_t>PyBytes_GET_SIZE(block))


# Fields a trailer may not carry: they frame or route the message, or are the connection's
# (RFC 9110 section 6.5.1); a client would have acted on them before the body.
cdef frozenset _NOT_TRAILERS = frozenset((
    b"content-length", b"transfer-encoding", b"host", b"connection", b"keep-alive",
    b"upgrade", b"te", b"trailer", b"content-type", b"content-encoding", b"content-range",
    b"set-cookie", b"cache-control", b"expires", b"location", b"authorization"))


cdef bytes _trailer_block(object trailers):
    """http_end(trailers=...): (name, value) pairs (str or bytes) as field lines, checked
    as header fields are."""
    cdef list lines = []
    cdef bytes name, value
    for pair in trailers:
        try:
            key, val = pair
        except (TypeError, ValueError):
            raise TypeError("trailers are (name, value) pairs") from None
        name = key.encode("latin-1") if isinstance(key, str) else bytes(key)
        value = val.encode("latin-1") if isinstance(val, str) else bytes(val)
        if not _valid_name(name, len(name)):
            raise ValueError(_bad_header_name(key))
        if not _valid_value(value, len(value)):
            raise ValueError(_bad_header_value(key, val))
        if name.lower() in _NOT_TRAILERS:
            raise ValueError(f"{key!r} may not be a trailer field (RFC 9110 section 6.5.1)")
        lines.append(name + b": " + value + b"\r\n")
    return b"".join(lines)


cdef int _http_sendfile(Connection conn, int fd, long long offset, long long count) except -1:
    _check_writing(conn)
    cdef mg.mg_connection *c = conn._c
    cdef HttpGuard *g = &conn._guard
    if offset < 0 or count < 0:
        raise ValueError("offset and count must be >= 0")
    if count == 0 or g.resp_framing == _RF_NONE:
        return 0
    if g.resp_framing == _RF_LENGTH and g.encoder == NULL:
        if <size_t>count > g.resp_left:
            raise ValueError(
                f"sending {count} bytes would exceed the response's Content-Length "
                f"({g.resp_left} bytes left)")
    if g.encoder != NULL and g.plain_counted and <size_t>count > g.plain_left:
        raise ValueError(
            f"sending {count} bytes would exceed the response's Content-Length "
            f"({g.plain_left} bytes left)")
    cdef int own = mg.dup(fd)
    if own < 0:
        raise OSError(errno, f"cannot duplicate file descriptor {fd}")
    if g.encoder != NULL:
        if g.plain_counted:
            g.plain_left -= <size_t>count
    elif g.resp_framing == _RF_LENGTH:
        g.resp_left -= <size_t>count
    elif g.resp_framing == _RF_CHUNKED:
        _send_chunk_size(c, <size_t>count)
    g.file_fd = own
    g.file_off = offset
    g.file_left = <size_t>count
    _pump_file(c, g)
    return 0


cdef void _file_done(HttpGuard *g) noexcept nogil:
    if g.file_fd >= 0:
        mg.close(g.file_fd)
    g.file_fd = -1
    g.file_left = 0


cdef void _pump_file(mg.mg_connection *c, HttpGuard *g) noexcept nogil:
    """Move the next part of an http_sendfile() file to the socket: sendfile(2) once every
    byte queued before it has left (plain TCP), else 16 KiB pieces through the send buffer,
    which also makes Mongoose wait for writability and call us again."""
    cdef long off
    cdef ssize_t n
    cdef size_t budget = _FILE_BURST
    cdef char piece[_FILE_PIECE]
    if c.is_closing:
        return
    # A compressed body is read and encoded piece by piece: sendfile(2) has no place there.
    cdef bint to_socket = not c.is_tls and not mg.cym_h2_is_stream(c) and g.encoder == NULL
    if to_socket and c.send.len == 0:
        off = <long>g.file_off
        while g.file_left > 0 and budget > 0:
            n = mg.sendfile(<int><size_t>c.fd, g.file_fd, &off,
                            g.file_left if g.file_left < budget else budget)
            if n <= 0:
                if n == 0 or (errno != EAGAIN and errno != EINTR):
                    _log_event(c, 0, b"file for http_sendfile() ended early or failed")
                    c.is_closing = 1
                    g.file_off = off
                    return
                break
            g.file_left -= <size_t>n
            budget -= <size_t>n
            _metrics_sent(c, g, <size_t>n)
        g.file_off = off
    while g.file_left > 0 and c.send.len < 4 * _FILE_PIECE:
        n = mg.pread(g.file_fd, piece, _FILE_PIECE if g.file_left > _FILE_PIECE
                     else g.file_left, <long>g.file_off)
        if n <= 0:
            _log_event(c, 0, b"file for http_sendfile() ended early or failed")
            c.is_closing = 1
            return
        if g.encoder != NULL:
            # Kept, not flushed: the encoder's blocks fill up across pieces.
            if _encode_piece(c, g, piece, <size_t>n, mg.CYM_KEEP) != 0:
                _log_event(c, 0, b"out of memory compressing a file for http_sendfile()")
                c.is_closing = 1
                return
        else:
            mg.mg_send(c, piece, <size_t>n)
        g.file_off += n
        g.file_left -= <size_t>n
        if g.encoder != NULL:
            budget -= <size_t>n if <size_t>n < budget else budget
            if budget == 0:
                break  # the rest at the next poll: one file does not starve the others
        if to_socket:
            break  # one piece is enough to be woken when the socket drains
    if g.file_left == 0:
        _file_done(g)
        if g.resp_framing == _RF_CHUNKED and g.encoder == NULL:
            mg.mg_send(c, b"\r\n", 2)
        elif g.encoder != NULL and g.resp_state != _RS_END_AFTER_FILE:
            # The app may write more later: what the file gave reaches the client now.
            if _encode_piece(c, g, NULL, 0, mg.CYM_FLUSH) != 0:
                c.is_closing = 1
                return
        if g.resp_state == _RS_END_AFTER_FILE:
            _finish_response(c, g)
