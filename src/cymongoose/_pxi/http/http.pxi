# HTTP server and client helpers behind Connection.reply/serve_*/http_*: responses are framed
# here with explicit lengths, never through a C format string, so bodies are binary-safe.

cdef dict _REASONS = {
    100: "Continue", 101: "Switching Protocols", 200: "OK", 201: "Created",
    202: "Accepted", 203: "Non-Authoritative Information", 204: "No Content",
    205: "Reset Content", 206: "Partial Content", 300: "Multiple Choices",
    301: "Moved Permanently", 302: "Found", 303: "See Other", 304: "Not Modified",
    307: "Temporary Redirect", 308: "Permanent Redirect", 400: "Bad Request",
    401: "Unauthorized", 402: "Payment Required", 403: "Forbidden", 404: "Not Found",
    405: "Method Not Allowed", 406: "Not Acceptable", 408: "Request Timeout",
    409: "Conflict", 410: "Gone", 411: "Length Required", 412: "Precondition Failed",
    413: "Content Too Large", 414: "URI Too Long", 415: "Unsupported Media Type",
    416: "Range Not Satisfiable", 417: "Expectation Failed", 418: "I'm a teapot",
    421: "Misdirected Request", 422: "Unprocessable Content", 425: "Too Early",
    426: "Upgrade Required", 428: "Precondition Required", 429: "Too Many Requests",
    431: "Request Header Fields Too Large", 451: "Unavailable For Legal Reasons",
    500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway",
    503: "Service Unavailable", 504: "Gateway Timeout", 505: "HTTP Version Not Supported",
}

# Status lines for the common codes, prebuilt so the hot path does no formatting.
cdef dict _STATUS_LINES = {
    code: f"HTTP/1.1 {code} {reason}\r\n".encode("ascii") for code, reason in _REASONS.items()}
cdef bytes _DEFAULT_CONTENT_TYPE = b"Content-Type: text/plain\r\n"
cdef bytes _JSON_CONTENT_TYPE = b"Content-Type: application/json\r\n"


# Indexed by status code: the hot path finds its status line without hashing an int.
cdef PyObject *_STATUS_TABLE[600]
memset(_STATUS_TABLE, 0, sizeof(_STATUS_TABLE))
for _code, _line in _STATUS_LINES.items():
    if _code < 600:
        _STATUS_TABLE[<int>_code] = <PyObject *>_line  # _STATUS_LINES keeps it alive


cdef bytes _status_line(int status_code):
    if 0 <= status_code < 600 and _STATUS_TABLE[status_code] != NULL:
        return <bytes>_STATUS_TABLE[status_code]
    if status_code < 100 or status_code > 999:
        raise ValueError(f"status_code must be between 100 and 999, not {status_code}")
    return f"HTTP/1.1 {status_code} \r\n".encode("ascii")


cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object s, Py_ssize_t *size) except NULL


# Bytes a field name may hold: RFC 9110 tchar. Anything else (space, colon, CR, LF, NUL...)
# would change how the header block is parsed.
cdef bytes _TCHAR = (b"!#$%&'*+-.^_`|~0123456789"
                     b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
cdef bint _IS_TCHAR[256]
for _i in range(256):
    _IS_TCHAR[_i] = bytes([_i]) in _TCHAR


cdef inline bint _valid_name(const char *p, Py_ssize_t n) noexcept:
    cdef Py_ssize_t i
    if n == 0:
        return False
    for i in range(n):
        if not _IS_TCHAR[<unsigned char>p[i]]:
            return False
    return True


# A field value (and a reason phrase) holds HTAB, SP, visible ASCII and obs-text (bytes from
# 0x80: UTF-8 passes) only (RFC 9110 §5.5, RFC 9112 §4). CR and LF would end the field and
# start attacker-chosen ones (response splitting); NUL is cut by C parsers; any other control
# byte makes the response one a strict client refuses (found by fuzzing the renderer against
# h11): each is the app's mistake, told at once rather than sent.
cdef bint _IS_FIELD_BYTE[256]
for _i in range(256):
    _IS_FIELD_BYTE[_i] = _i == 9 or (0x20 <= _i <= 0x7e) or _i >= 0x80


cdef inline bint _valid_value(const char *p, Py_ssize_t n) noexcept:
    cdef Py_ssize_t i
    for i in range(n):
        if not _IS_FIELD_BYTE[<unsigned char>p[i]]:
            return False
    return True


# The messages of a refused header, shared by every way of sending one (reply, HeaderBlock,
# http_begin, the WebSocket upgrade). "Header name/value ... illegal character" is 0.2.x's
# wording, kept so code that matches on it still works.
cdef str _bad_header_name(object name):
    return (f"Header name {name!r} has an illegal character: a field name is an RFC 9110 "
            "token (no CR, LF, NUL, spaces or colons)")


cdef str _bad_header_value(object name, object value):
    return (f"Header value {value!r} for {name!r} has an illegal character: CR, LF, NUL or "
            "another control character (only tab, space, visible ASCII and bytes from 0x80 "
            "may appear); remove them")


cdef inline bint _is_named(const char *p, Py_ssize_t n, const char *lower_name,
                           Py_ssize_t lower_len) noexcept:
    return n == lower_len and _ascii_casecmp(p, lower_name, <size_t>n)


cdef int _send_response(Connection conn, int status_code, object headers, bint json_type,
                        bytes body) except -1:
    """Frame and queue one complete response. Every header is validated before anything is
    written, so a refused header leaves the connection untouched."""
    _check_response_start(conn, "reply_json()" if json_type else "reply()")
    cdef mg.mg_connection *c = conn._c
    # Found by fuzzing: reply(100) sent a lone interim response, and the client waited on.
    _check_status(status_code)
    cdef bytes status = _status_line(status_code)
    cdef Py_ssize_t body_len = PyBytes_GET_SIZE(body)
    # No body for HEAD, 204 and 304 (RFC 9110 §6.4.1); Content-Length still tells a HEAD
    # client what GET would have sent.
    cdef bint bodyless_status = status_code == 204 or status_code == 304
    # (name, value) as str, converted once: the second pass must write exactly the bytes
    # the first pass measured, whatever a value's __str__ would return a second time.
    cdef list pairs = None
    cdef bint converted = False
    cdef Py_ssize_t total = PyBytes_GET_SIZE(status) + 64, nlen, vlen
    cdef const char *nptr
    cdef const char *vptr
    cdef bint has_type = json_type
    cdef int conn_tokens = 0
    cdef bint has_connection = False
    cdef const char *conn_field
    if headers is not None:
        if type(headers) is not dict:
            if not isinstance(headers, dict):
                raise TypeError(
                    f"headers must be a dict or None, not {type(headers).__name__}")
        for key, value in (<dict>headers).items():
            if type(key) is not str:
                key = str(key)
                converted = True
            if type(value) is not str:
                value = str(value)
                converted = True
            nptr = PyUnicode_AsUTF8AndSize(key, &nlen)
            vptr = PyUnicode_AsUTF8AndSize(value, &vlen)
            if not _valid_name(nptr, nlen):
                raise ValueError(_bad_header_name(key))
            if not _valid_value(vptr, vlen):
                raise ValueError(_bad_header_value(key, value))
            if _is_named(nptr, nlen, b"content-type", 12):
                has_type = True
            elif _is_named(nptr, nlen, b"transfer-encoding", 17):
                # Beside the Content-Length reply() computes, it would frame the body twice
                # (RFC 9112 §6.1); http_begin() refuses it too.
                raise ValueError("Transfer-Encoding is chosen by the server: leave it out "
                                 "(reply() sends a Content-Length)")
            elif _is_named(nptr, nlen, b"connection", 10):
                has_connection = True
                _connection_tokens(<const unsigned char *>vptr, <size_t>vlen, &conn_tokens)
            total += nlen + vlen + 4
        # Plain str keys and values read back identically (and no Python code runs in
        # between), so the second pass can walk the dict again; anything str()-ed is kept.
        if converted:
            pairs = [(k if type(k) is str else str(k), v if type(v) is str else str(v))
                     for k, v in (<dict>headers).items()]
            total = PyBytes_GET_SIZE(status) + 64
            for key, value in pairs:
                nptr = PyUnicode_AsUTF8AndSize(key, &nlen)
                vptr = PyUnicode_AsUTF8AndSize(value, &vlen)
                if not _valid_name(nptr, nlen) or not _valid_value(vptr, vlen):
                    raise ValueError(
                        f"header {key!r}: {value!r} changed while being converted; "
                        "pass str names and values")
                total += nlen + vlen + 4
        else:
            pairs = None
    if not has_type:
        total += PyBytes_GET_SIZE(_DEFAULT_CONTENT_TYPE)
    if json_type:
        total += PyBytes_GET_SIZE(_JSON_CONTENT_TYPE)
    if ((<GilSlot *>c.mgr.userdata).compress != NULL and not bodyless_status
            and (conn._guard.phase == _PH_RESP or conn._guard.phase == _PH_STREAM)):
        _reply_compressed(conn, status_code, headers if pairs is None else pairs,
                          json_type, has_type, body)
        return 0
    # Connection: close / keep-alive as the request's framing requires (http_guard.pxi).
    conn_field = _connection_field(conn, has_connection, (conn_tokens & _GF_CLOSE) != 0)
    if conn_field != NULL:
        total += <Py_ssize_t>strlen(conn_field)

    # Everything is valid: write the head straight into the send buffer.
    cdef size_t start = c.send.len
    if c.send.size < start + <size_t>total:
        if not mg.mg_iobuf_resize(&c.send, start + <size_t>total):
            raise RuntimeError("reply failed: out of memory for the send buffer")
    cdef char *w = <char *>c.send.buf + start
    memcpy(w, PyBytes_AS_STRING(status), PyBytes_GET_SIZE(status))
    w += PyBytes_GET_SIZE(status)
    if json_type:
        memcpy(w, PyBytes_AS_STRING(_JSON_CONTENT_TYPE), PyBytes_GET_SIZE(_JSON_CONTENT_TYPE))
        w += PyBytes_GET_SIZE(_JSON_CONTENT_TYPE)
    elif not has_type:
        memcpy(w, PyBytes_AS_STRING(_DEFAULT_CONTENT_TYPE),
               PyBytes_GET_SIZE(_DEFAULT_CONTENT_TYPE))
        w += PyBytes_GET_SIZE(_DEFAULT_CONTENT_TYPE)
    if pairs is not None:
        for key, value in pairs:
            w = _write_field(w, key, value, json_type)
    elif headers is not None:
        for key, value in (<dict>headers).items():
            w = _write_field(w, key, value, json_type)
    if conn_field != NULL:
        memcpy(w, conn_field, strlen(conn_field))
        w += strlen(conn_field)
    if bodyless_status and status_code != 304:
        w[0] = 13
        w[1] = 10
        w += 2
    else:
        w += _write_content_length(w, body_len)
    c.send.len = <size_t>(w - <char *>c.send.buf)
    if body_len and not conn._head_request and not bodyless_status:
        if not mg.mg_send(c, PyBytes_AS_STRING(body), <size_t>body_len):
            raise RuntimeError("reply failed: out of memory for the send buffer")
    conn._guard.resp_status = status_code  # metrics.pxi: counted when the guard sees it end
    if conn._guard.phase == _PH_RESP or conn._guard.phase == _PH_STREAM:
        conn._guard.core_head_at = start + 1  # framed as the guard would: see _fix_response
    c.is_resp = 0  # response complete: Mongoose may parse the next pipelined request
    return 0


cdef int _reply_compressed(Connection conn, int status_code, object fields, bint json_type,
                           bint has_type, bytes body) except -1:
    """reply()/reply_json() with compression on: the same fields, through http_respond(),
    which compresses (the fields are valid str pairs by now)."""
    cdef list pairs = []
    cdef Py_ssize_t nlen
    cdef const char *nptr
    if json_type:
        pairs.append(("Content-Type", "application/json"))
    elif not has_type:
        pairs.append(("Content-Type", "text/plain"))
    for key, value in (fields.items() if type(fields) is dict else fields or ()):
        nptr = PyUnicode_AsUTF8AndSize(key, &nlen)
        if _is_named(nptr, nlen, b"content-length", 14):
            continue
        if json_type and _is_named(nptr, nlen, b"content-type", 12):
            continue
        pairs.append((key.encode("utf-8"), value.encode("utf-8")))
    _http_respond(conn, status_code, pairs, body, None, None)
    return 0


cdef inline char *_write_field(char *w, str key, str value, bint json_type):
    # Content-Length is always computed from the body (a wrong one would misframe the
    # connection); reply_json() owns Content-Type.
    cdef Py_ssize_t nlen, vlen
    cdef const char *nptr = PyUnicode_AsUTF8AndSize(key, &nlen)
    cdef const char *vptr
    if _is_named(nptr, nlen, b"content-length", 14):
        return w
    if json_type and _is_named(nptr, nlen, b"content-type", 12):
        return w
    vptr = PyUnicode_AsUTF8AndSize(value, &vlen)
    memcpy(w, nptr, nlen)
    w[nlen] = 58  # ':'
    w[nlen + 1] = 32  # ' '
    w += nlen + 2
    memcpy(w, vptr, vlen)
    w[vlen] = 13
    w[vlen + 1] = 10
    return w + vlen + 2


cdef inline Py_ssize_t _write_content_length(char *w, Py_ssize_t n) noexcept:
    # "Content-Length: <n>\r\n\r\n" without printf.
    cdef char digits[24]
    cdef int nd = 0, i
    memcpy(w, b"Content-Length: ", 16)
    if n == 0:
        digits[0] = 48
        nd = 1
    while n > 0:
        digits[nd] = <char>(48 + n % 10)
        n //= 10
        nd += 1
    for i in range(nd):
        w[16 + i] = digits[nd - 1 - i]
    memcpy(w + 16 + nd, b"\r\n\r\n", 4)
    return 20 + nd


cdef int _http_reply(Connection conn, int status_code, object body, object headers) except -1:
    _send_response(conn, status_code, headers, False, _coerce_bytes(body, "body"))
    return 0


cdef int _http_reply_json(Connection conn, object data, int status_code,
                          object headers) except -1:
    _check_response_start(conn, "reply_json()")
    import_json()
    _send_response(conn, status_code, headers, True, json_dumps(data).encode("utf-8"))
    return 0


cdef int _check_message(HttpMessage message) except -1:
    if message is None or message._hm == NULL:
        raise ValueError(
            "HttpMessage is no longer valid: serve it inside the handler of its event")
    return 0


cdef bint _uri_has_nul(const mg.mg_str *uri) noexcept nogil:
    """Whether the URI holds a NUL, raw or "%00": Mongoose decodes it into the file name,
    where C ends the name at it."""
    cdef size_t i
    for i in range(uri.len):
        if uri.buf[i] == 0:
            return True
        if (uri.buf[i] == c'%' and i + 2 < uri.len and uri.buf[i + 1] == c'0'
                and uri.buf[i + 2] == c'0'):
            return True
    return False


cdef int _http_serve_dir(Connection conn, HttpMessage message, str root_dir,
                         str extra_headers, str mime_types, str page404,
                         bint directory_listing) except -1:
    _check_response_start(conn, "serve_dir()")
    _check_message(message)
    if _uri_has_nul(&message._hm.uri):
        # The guard refuses such a request before any handler runs (_path_has_encoded_nul);
        # this catches a message it never saw (a client connection's, say): the client's
        # mistake gets a 400, as Mongoose answers a path it finds unsafe.
        _http_reply(conn, 400, b"Invalid path\n", None)
        return 0
    cdef bytes root = _utf8_no_nul(root_dir, "root_dir")
    cdef bytes extra = _utf8_no_nul(_checked_header_block(extra_headers), "extra_headers")
    cdef bytes mimes = _utf8_no_nul(mime_types, "mime_types")
    cdef bytes p404 = _utf8_no_nul(page404, "page404")
    cdef mg.mg_http_serve_opts opts
    memset(&opts, 0, sizeof(opts))
    opts.root_dir = root
    if len(extra):
        opts.extra_headers = extra
    if len(mimes):
        opts.mime_types = mimes
    if len(p404):
        opts.page404 = p404
    cdef bint answered_here = conn._guard.phase != _PH_NONE
    if answered_here and not _is_get_or_head(message._hm):
        return _static_send(conn, static_file_response(
            message._hm.method.buf[:message._hm.method.len].decode("latin-1"), None, None),
            _header_block_pairs(extra), "serve_dir()")
    # Mongoose maps the URI to a path (mounts, `..` refused, index files) and, while
    # cym_serve_result is set (build_fixes.py STATIC_SERVE), records what it found instead
    # of answering; http_static.pxi answers. A connection the guard does not watch (a
    # client's) has no streamed-response state: Mongoose answers it as before.
    # Listing is decided inside mg_http_serve_dir (build_fixes.py DIRLIST): the flag is
    # this thread's, and holds only for this call.
    cdef mg.cym_serve_out *out = NULL
    if answered_here:
        out = <mg.cym_serve_out *>calloc(1, sizeof(mg.cym_serve_out))
        if out == NULL:
            raise MemoryError()
    try:
        mg.cym_serve_result = out
        mg.cym_dirlist_allowed = directory_listing
        mg.mg_http_serve_dir(conn._c, message._hm, &opts)
        mg.cym_dirlist_allowed = 0
        mg.cym_serve_result = NULL
        if out != NULL:
            _static_dir_answer(conn, message, out, extra, mimes, p404)
    finally:
        mg.cym_dirlist_allowed = 0
        mg.cym_serve_result = NULL
        free(out)
    return 0


cdef bint _is_get_or_head(mg.mg_http_message *hm) noexcept:
    return ((hm.method.len == 3 and memcmp(hm.method.buf, b"GET", 3) == 0)
            or (hm.method.len == 4 and memcmp(hm.method.buf, b"HEAD", 4) == 0))


cdef int _static_dir_answer(Connection conn, HttpMessage message, mg.cym_serve_out *out,
                            bytes extra, bytes mimes, bytes p404) except -1:
    cdef mg.mg_http_message *hm = message._hm
    cdef list extra_pairs
    if out.kind == mg.CYM_SERVE_NONE:
        return 0  # Mongoose answered (a listing, a path it finds unsafe)
    extra_pairs = _header_block_pairs(extra)
    if out.kind == mg.CYM_SERVE_REDIRECT:
        # The slash makes the index page's relative links resolve inside the directory;
        # the query goes along (Mongoose 7.23 dropped it).
        location = hm.uri.buf[:hm.uri.len] + b"/"
        if hm.query.len:
            location += b"?" + hm.query.buf[:hm.query.len]
        return _static_send(conn, _static_text(301, "Moved Permanently\n",
                                               [("Location", location)]),
                            extra_pairs, "serve_dir()")
    if out.kind == mg.CYM_SERVE_FORBIDDEN:
        return _static_send(conn, _static_text(403, "Forbidden\n"), extra_pairs,
                            "serve_dir()")
    # A file URL with a trailing slash names no file (nginx: 404); a directory's index does.
    cdef bint found = out.found and not (out.slash and not out.dir)
    return _static_serve_raw(conn, message, out.path.decode("utf-8", "surrogateescape"),
                             extra, mimes, p404, found, "serve_dir()")


cdef int _http_serve_file(Connection conn, HttpMessage message, str path,
                          str extra_headers, str mime_types) except -1:
    _check_response_start(conn, "serve_file()")
    _check_message(message)
    cdef bytes bpath = _utf8_no_nul(path, "path")
    cdef bytes extra = _utf8_no_nul(_checked_header_block(extra_headers), "extra_headers")
    cdef bytes mimes = _utf8_no_nul(mime_types, "mime_types")
    cdef mg.mg_http_serve_opts opts
    if conn._guard.phase != _PH_NONE:
        _static_serve_raw(conn, message, path, extra, mimes, b"", True, "serve_file()")
        return 0
    memset(&opts, 0, sizeof(opts))
    if len(extra):
        opts.extra_headers = extra
    if len(mimes):
        opts.mime_types = mimes
    mg.mg_http_serve_file(conn._c, message._hm, bpath, &opts)
    return 0


# Mongoose's static-file sender (static_cb, static in mongoose.c, exported by
# build_fixes.py): serve_dir/serve_file leave it in c->pfn with the file in c->pfn_data.
cdef mg.mg_event_handler_t _mg_file_sender = mg.cym_static_cb
DEF _SENDFILE_BURST = 4 * 1024 * 1024  # per event, so one download can't starve the rest


cdef void _sendfile_body(mg.mg_connection *c, HttpGuard *g, mg.mg_fd *fd) noexcept nogil:
    """Send what is left of a served file with sendfile(2) instead of Mongoose's copy
    through 16 KiB user-space chunks. Only on plain TCP, from the POSIX filesystem, and only
    once everything queued before it (the response head) has been written, so bytes stay
    in order. Mongoose's sender then sees nothing left and finishes the response as usual;
    if the socket fills up first, it queues one ordinary chunk, which makes Mongoose wait
    for writability and call us again."""
    if (c.is_tls or c.send.len != 0 or fd == NULL or fd.fs != &mg.mg_fs_posix
            or mg.cym_h2_is_stream(c)):
        return
    # static_cb keeps the bytes still to send in c->data (build_fixes.py checks where).
    cdef size_t *left = mg.cym_static_left(c)
    cdef FILE *fp = <FILE *>fd.fd
    cdef long offset
    cdef ssize_t n
    cdef size_t budget = _SENDFILE_BURST
    if left[0] == 0 or fp == NULL:
        return
    offset = ftell(fp)  # the logical position, read-ahead of an earlier chunk included
    if offset < 0:
        return
    while left[0] > 0 and budget > 0:
        n = mg.sendfile(<int><size_t>c.fd, mg.fileno(fp), &offset,
                        left[0] if left[0] < budget else budget)
        if n <= 0:
            if n < 0 and errno != EAGAIN and errno != EINTR:
                c.is_closing = 1  # the peer is gone or the file failed: no way to finish
            break
        left[0] -= <size_t>n
        budget -= <size_t>n
        _metrics_sent(c, g, <size_t>n)
    fseek(fp, offset, SEEK_SET)  # keep stdio's position (and buffer) in step


cdef str _checked_header_block(str block):
    # A raw header block must be whole "Name: value\r\n" lines: a bare CR or LF inside it
    # would let the caller's data start a new header or end the head early.
    if not block:
        return block
    if not block.endswith("\r\n"):
        block += "\r\n"
    for line in block[:len(block) - 2].split("\r\n"):
        if not line or "\r" in line or "\n" in line or ":" not in line:
            raise ValueError(
                f"extra_headers must be 'Name: value' lines separated by CRLF, got {line!r}")
    return block


cdef int _http_chunk(Connection conn, object data) except -1:
    conn._ensure_open()
    cdef bytes b = _coerce_bytes(data, "data")
    if conn._head_request and conn._c.is_accepted:
        # A HEAD response has no body, chunked or not; the last chunk still ends it.
        if not PyBytes_GET_SIZE(b):
            conn._c.is_resp = 0
        return 0
    mg.mg_http_write_chunk(conn._c, PyBytes_AS_STRING(b), <size_t>PyBytes_GET_SIZE(b))
    return 0


cdef int _http_sse(Connection conn, str event_type, str data) except -1:
    conn._ensure_open()
    if "\r" in event_type or "\n" in event_type:
        raise ValueError("event_type must not contain CR or LF")
    # Every line of data gets its own "data:" field so multi-line payloads survive.
    cdef list parts = [f"event: {event_type}\n"] if event_type else []
    for line in data.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        parts.append(f"data: {line}\n")
    parts.append("\n")
    _http_chunk(conn, "".join(parts))
    return 0


cdef int _http_basic_auth(Connection conn, str username, str password) except -1:
    conn._ensure_open()
    if ":" in username:
        raise ValueError("username must not contain ':' (RFC 7617)")
    token = binascii_b2a_base64(f"{username}:{password}".encode("utf-8"), newline=False)
    cdef bytes line = b"Authorization: Basic " + token + b"\r\n"
    mg.mg_send(conn._c, PyBytes_AS_STRING(line), <size_t>PyBytes_GET_SIZE(line))
    return 0
