# JSON path getters (over mg_json_get*) and the JSON-RPC dispatcher (over mg_rpc_*).

from libc.limits cimport INT_MAX


cdef bytes _json_bytes(object data, str argname):
    # mg_json_get() reports offsets and lengths as int, and mg_rpc_* print with "%.*s".
    cdef bytes b = _coerce_bytes(data, argname)
    if PyBytes_GET_SIZE(b) > INT_MAX:
        raise ValueError(f"{argname} is too large for Mongoose's JSON parser (over 2 GiB)")
    return b


cdef inline mg.mg_str _mg_bytes(bytes b):
    return mg.mg_str_n(PyBytes_AS_STRING(b), <size_t>PyBytes_GET_SIZE(b))


def json_get(data, str path not None):
    cdef bytes doc = _json_bytes(data, "data")
    cdef bytes p = _utf8_no_nul(path, "path")
    cdef int toklen = 0
    cdef int off = mg.mg_json_get(_mg_bytes(doc), p, &toklen)
    if off < 0 or toklen < 0:
        return None
    return _decode(PyBytes_AS_STRING(doc) + off, <size_t>toklen)


cdef object _json_number(bytes doc, bytes path):
    """The number at `path` as a Python float, or None when Mongoose finds no number there.

    mg_json_get_num() decides what counts as a number (Mongoose's semantics), but its own
    conversion is not correctly rounded in 7.23 (0.3 gives 0.30000000000000004, 1e999 a
    finite value), so the token text is converted by Python when it can be.
    """
    cdef double v = 0
    cdef int toklen = 0
    cdef int off
    if not mg.mg_json_get_num(_mg_bytes(doc), path, &v):
        return None
    off = mg.mg_json_get(_mg_bytes(doc), path, &toklen)
    tok = PyBytes_AS_STRING(doc)[off:off + toklen]
    try:
        return float(tok)
    except ValueError:
        return v


def json_get_num(data, str path not None, default=None):
    cdef bytes doc = _json_bytes(data, "data")
    cdef bytes p = _utf8_no_nul(path, "path")
    v = _json_number(doc, p)
    return default if v is None else v


def json_get_bool(data, str path not None, default=None):
    cdef bytes doc = _json_bytes(data, "data")
    cdef bytes p = _utf8_no_nul(path, "path")
    cdef mg.mg_bool v = False
    if not mg.mg_json_get_bool(_mg_bytes(doc), p, &v):
        return default
    return bool(v)


def json_get_long(data, str path not None, default=0):
    cdef bytes doc = _json_bytes(data, "data")
    cdef bytes p = _utf8_no_nul(path, "path")
    cdef int toklen = 0
    cdef int off
    if not isinstance(default, int):
        raise TypeError(f"default must be int, not {type(default).__name__}")
    # mg_json_get_long() casts a double to a C long, which loses digits above 2**53 and is
    # undefined out of range; Python ints have no range, so an integer literal converts
    # exactly and other numbers truncate toward zero like the C cast.
    v = _json_number(doc, p)
    if v is None:
        return default
    off = mg.mg_json_get(_mg_bytes(doc), p, &toklen)
    try:
        return int(PyBytes_AS_STRING(doc)[off:off + toklen])
    except ValueError:
        pass
    if not math_isfinite(v):
        return default
    return int(v)


def json_get_str(data, str path not None):
    cdef bytes doc = _json_bytes(data, "data")
    cdef bytes p = _utf8_no_nul(path, "path")
    cdef mg.mg_str tok = mg.mg_json_get_tok(_mg_bytes(doc), p)
    cdef char *s
    if tok.buf == NULL or tok.len < 2 or tok.buf[0] != b'"':
        return None
    if memchr(tok.buf, b'\\', tok.len) == NULL:
        return _decode(tok.buf + 1, tok.len - 2)
    if _has_unicode_escape(tok):
        # Mongoose 7.23 unescapes only \u00XX (and stops at anything wider), so strings with
        # \u escapes go through Python's decoder, which also joins surrogate pairs.
        import_json()
        try:
            return json_loads(_decode(tok.buf, tok.len), strict=False)
        except ValueError:
            return None
    s = mg.mg_json_get_str(_mg_bytes(doc), p)
    if s == NULL:
        return None
    try:
        return _decode(s, strlen(s))
    finally:
        mg.mg_free(s)


cdef bint _has_unicode_escape(mg.mg_str tok):
    cdef size_t i = 0
    while i + 1 < tok.len:
        if tok.buf[i] == b'\\':
            if tok.buf[i + 1] == b'u':
                return True
            i += 2
        else:
            i += 1
    return False


@cython.final
cdef class RpcReq:
    """One JSON-RPC request, valid while its handler runs (the C request lives on the stack
    of Rpc.process())."""

    def __cinit__(self):
        self._req = NULL
        self._answered = False
        self._frame = ""

    def __init__(self):
        raise TypeError("RpcReq objects are created by Rpc.process()")

    @property
    def frame(self):
        return self._frame

    cdef int _begin_answer(self) except -1:
        if self._req == NULL:
            raise RuntimeError("RpcReq answered after its handler returned")
        if self._answered:
            # "already sent" is the 0.2.x wording, kept so code matching on it still works.
            raise RuntimeError("RpcReq answer already sent: a request is answered once")
        self._answered = True
        return 0

    def ok(self, str result_json not None):
        cdef bytes r = _utf8(result_json)
        if PyBytes_GET_SIZE(r) > INT_MAX:
            raise ValueError("result_json is too large (over 2 GiB)")
        self._begin_answer()
        # mg_rpc_ok writes nothing for a notification (no id). The result is passed as a
        # "%.*s" argument, never as the format.
        mg.mg_rpc_ok(self._req, "%.*s", <int>PyBytes_GET_SIZE(r), PyBytes_AS_STRING(r))

    def err(self, int code, str message not None):
        self._begin_answer()
        _rpc_error(self._req, code, message)


cdef int _rpc_error(mg.mg_rpc_req *req, int code, str message) except -1:
    # Mongoose's own %m escaper stops at a NUL and leaves control characters other than
    # \b\f\n\r\t raw, which strict JSON parsers reject; json.dumps (ASCII output) always
    # gives a valid string.
    import_json()
    cdef bytes m = json_dumps(message).encode("ascii")
    if PyBytes_GET_SIZE(m) > INT_MAX:
        # At most 12 ASCII bytes per character (a surrogate pair as two \u escapes).
        m = json_dumps(message[:INT_MAX // 16]).encode("ascii")
    cdef int toklen = 0
    if mg.mg_json_get(req.frame, "$.id", &toklen) < 0:
        return 0  # a notification gets no response, not even an error
    mg.mg_rpc_err(req, code, "%.*s", <int>PyBytes_GET_SIZE(m), PyBytes_AS_STRING(m))
    return 0


cdef void _rpc_noop(mg.mg_rpc_req *req) noexcept nogil:
    # Registered as each entry's C handler so the list is a valid mg_rpc list; dispatch goes
    # through Rpc.process(), which calls the Python handler stored in fn_data.
    pass


@cython.final
cdef class Rpc:
    """JSON-RPC dispatcher. Handlers live in a Mongoose mg_rpc list (newest first, like
    mg_rpc_add); each entry's fn_data borrows the handler that self._handlers keeps alive."""

    def __cinit__(self):
        self._head = NULL
        self._handlers = {}
        self._patterns = []

    def __dealloc__(self):
        mg.mg_rpc_del(&self._head, NULL)  # NULL handler: free every entry

    def add(self, str method not None, handler):
        cdef bytes m = _utf8_no_nul(method, "method")
        cdef mg.mg_rpc *h
        if not callable(handler):
            raise TypeError(f"handler must be callable, not {type(handler).__name__}")
        if method in self._handlers:
            # Re-registering replaces the handler in place, keeping its match priority.
            h = self._head
            while h != NULL:
                if h.method.len == <size_t>PyBytes_GET_SIZE(m) and memcmp(
                        h.method.buf, PyBytes_AS_STRING(m), h.method.len) == 0:
                    h.fn_data = <void *>handler
                    break
                h = h.next
            self._handlers[method] = handler
            return
        h = self._head
        mg.mg_rpc_add(&self._head, _mg_bytes(m), _rpc_noop, <void *>handler)
        if self._head == h:
            raise MemoryError()
        self._handlers[method] = handler
        self._patterns.append(method)

    @property
    def methods(self):
        return list(self._patterns)

    def process(self, frame):
        cdef bytes fb = _json_bytes(frame, "frame")
        cdef mg.mg_rpc_req req
        cdef mg.mg_iobuf io
        cdef mg.mg_rpc *h
        cdef mg.mg_str method
        cdef int toklen = 0
        cdef char *name = NULL
        cdef RpcReq r
        memset(&req, 0, sizeof(req))
        memset(&io, 0, sizeof(io))
        io.align = 256
        req.head = &self._head
        req.pfn = mg.mg_pfn_iobuf
        req.pfn_data = &io
        req.frame = _mg_bytes(fb)
        try:
            if mg.mg_json_get(req.frame, "$", &toklen) < 0:
                # No id can be read from a frame that is not JSON: JSON-RPC says null.
                return '{"id":null,"error":{"code":-32700,"message":"Parse error"}}'
            name = mg.mg_json_get_str(req.frame, "$.method")
            if name == NULL:
                _rpc_error(&req, -32600, "Invalid Request")
                return _decode(<char *>io.buf, io.len)
            method = mg.mg_str_n(name, strlen(name))
            h = self._head
            while h != NULL and not mg.mg_match(method, h.method, NULL):
                h = h.next
            if h == NULL:
                _rpc_error(&req, -32601, _decode(name, strlen(name)) + " not found")
                return _decode(<char *>io.buf, io.len)
            req.rpc = h
            handler = <object>h.fn_data
            r = RpcReq.__new__(RpcReq)
            r._frame = _decode(req.frame.buf, req.frame.len)
            r._req = &req
            try:
                handler(r)
            except Exception as exc:
                if not r._answered:
                    r._answered = True
                    _rpc_error(&req, -32603, str(exc))
            finally:
                # The request and its output buffer are on this stack frame: the handler
                # may keep `r`, but it can no longer answer through it.
                r._req = NULL
            if not r._answered:
                _rpc_error(&req, -32603, "method did not answer")
            return _decode(<char *>io.buf, io.len)
        finally:
            if name != NULL:
                mg.mg_free(name)
            mg.mg_iobuf_free(&io)
