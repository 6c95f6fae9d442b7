# Message views valid for one event: HttpMessage, WsMessage, MqttMessage. Plain names and
# *_bytes/*_text copy; *_view accessors return memoryviews into the receive buffer that are
# released when the event ends (recv_views.pxi).


# mg_http_get_var() writes into a caller buffer; 0.2.5's documented limit for a decoded value.
DEF _QUERY_VAR_MAX = 2048


@cython.final
@cython.freelist(8)
cdef class HttpMessage:
    """A parsed HTTP request or response, pointing into Mongoose's receive buffer."""

    def __cinit__(self):
        self._hm = NULL

    cdef int _ensure_valid(self) except -1:
        if self._hm == NULL:
            raise RuntimeError(_STALE_VIEW_MSG.format("HttpMessage"))
        return 0

    def __bool__(self):
        return self._hm != NULL

    def __repr__(self):
        if self._hm == NULL:
            return "<HttpMessage invalid>"
        return f"<HttpMessage {self.method} {self.uri}>"

    @property
    def method(self):
        self._ensure_valid()
        return _decode_mg(self._hm.method)

    @property
    def uri(self):
        self._ensure_valid()
        return _decode_mg(self._hm.uri)

    @property
    def query(self):
        self._ensure_valid()
        return _decode_mg(self._hm.query)

    @property
    def proto(self):
        self._ensure_valid()
        return _decode_mg(self._hm.proto)

    @property
    def body_bytes(self):
        self._ensure_valid()
        return _bytes_mg(self._hm.body)

    @property
    def body_text(self):
        self._ensure_valid()
        return _decode_mg(self._hm.body)

    @property
    def body_view(self):
        self._ensure_valid()
        return _recv_view(self._conn, self._hm.body.buf, self._hm.body.len,
                          "HttpMessage.body_view", "body_bytes")

    @property
    def head_view(self):
        # The request (or status) line and header lines exactly as received, up to and
        # including the blank line.
        self._ensure_valid()
        cdef const char *start = self._hm.head.buf
        cdef size_t n = self._hm.head.len
        # Mongoose's head excludes the final blank line; include it when it follows.
        if self._hm.body.buf != NULL and self._hm.body.buf >= start + n:
            n = <size_t>(self._hm.body.buf - start)
        return _recv_view(self._conn, start, n, "HttpMessage.head_view", "headers_bytes()")

    def header_views(self):
        # (name, value) memoryviews in arrival order, duplicates kept.
        self._ensure_valid()
        cdef list out = []
        cdef size_t i
        cdef mg.mg_http_header *h
        for i in range(<size_t>mg.MG_MAX_HTTP_HEADERS):
            h = &self._hm.headers[i]
            if h.name.len == 0:
                break
            out.append((
                _recv_view(self._conn, h.name.buf, h.name.len, "HttpMessage.header_views()",
                           "headers_bytes()"),
                _recv_view(self._conn, h.value.buf, h.value.len,
                           "HttpMessage.header_views()", "headers_bytes()")))
        return out

    def header(self, str name not None, default=None):
        self._ensure_valid()
        cdef bytes key = _utf8(name)
        cdef const char *k = key
        cdef size_t klen = len(key)
        cdef size_t i
        cdef mg.mg_str *hn
        for i in range(<size_t>mg.MG_MAX_HTTP_HEADERS):
            hn = &self._hm.headers[i].name
            if hn.len == 0:
                break
            if hn.len == klen and _ascii_casecmp(hn.buf, k, klen):
                return _decode_mg(self._hm.headers[i].value)
        return default

    def headers(self):
        self._ensure_valid()
        cdef list out = []
        cdef size_t i
        for i in range(<size_t>mg.MG_MAX_HTTP_HEADERS):
            if self._hm.headers[i].name.len == 0:
                break
            out.append((_decode_mg(self._hm.headers[i].name),
                        _decode_mg(self._hm.headers[i].value)))
        return out

    def headers_bytes(self):
        # The raw octets, in arrival order, duplicates kept: what WSGI (latin-1 str) and ASGI
        # (bytes) servers build from. One copy per name and value.
        self._ensure_valid()
        cdef list out = []
        cdef size_t i
        cdef mg.mg_http_header *h
        for i in range(<size_t>mg.MG_MAX_HTTP_HEADERS):
            h = &self._hm.headers[i]
            if h.name.len == 0:
                break
            out.append((PyBytes_FromStringAndSize(h.name.buf, <Py_ssize_t>h.name.len),
                        PyBytes_FromStringAndSize(h.value.buf, <Py_ssize_t>h.value.len)))
        return out

    def asgi_scope(self, dict base not None, Connection conn not None, dict state not None):
        return _asgi_scope(self, base, conn, state)  # asgi_scope.pxi

    def wsgi_environ(self, dict base not None, Connection conn not None, str root_path=""):
        return _wsgi_environ(self, base, conn, root_path)

    @property
    def uri_bytes(self):
        self._ensure_valid()
        return PyBytes_FromStringAndSize(self._hm.uri.buf, <Py_ssize_t>self._hm.uri.len)

    @property
    def query_bytes(self):
        self._ensure_valid()
        return PyBytes_FromStringAndSize(self._hm.query.buf, <Py_ssize_t>self._hm.query.len)

    def query_var(self, str name not None):
        self._ensure_valid()
        cdef bytes key = _utf8(name)
        cdef mg.mg_str raw = mg.mg_http_var(self._hm.query, mg.mg_str_n(key, len(key)))
        if raw.buf == NULL or raw.len == 0:
            return None
        cdef char out[_QUERY_VAR_MAX + 1]
        cdef int n = mg.mg_url_decode(raw.buf, raw.len, out, sizeof(out), 1)
        if n < 0 or n > _QUERY_VAR_MAX:
            raise ValueError(
                f"query parameter {name!r} decodes to more than {_QUERY_VAR_MAX} bytes; "
                "read msg.query and decode it yourself for large values")
        return _decode(out, <size_t>n) if n > 0 else None

    def status(self):
        if self._hm == NULL:
            return None
        return mg.mg_http_status(self._hm)

    def header_var(self, str header_name not None, str var_name not None):
        self._ensure_valid()
        value = self.header(header_name)
        if value is None:
            return None
        cdef bytes hv = _utf8(value)
        cdef bytes vn = _utf8(var_name)
        cdef mg.mg_str r = mg.mg_http_get_header_var(
            mg.mg_str_n(hv, len(hv)), mg.mg_str_n(vn, len(vn)))
        if r.buf == NULL or r.len == 0:
            return None
        return _decode_mg(r)


cdef inline bint _ascii_casecmp(const char *a, const char *b, size_t n) noexcept nogil:
    cdef size_t i
    cdef char x, y
    for i in range(n):
        x = a[i]
        y = b[i]
        if x != y:
            if 65 <= x <= 90:
                x = x + 32
            if 65 <= y <= 90:
                y = y + 32
            if x != y:
                return False
    return True


@cython.final
@cython.freelist(8)
cdef class WsMessage:
    """One WebSocket data message, pointing into Mongoose's receive buffer."""

    def __cinit__(self):
        self._wm = NULL

    cdef int _ensure_valid(self) except -1:
        if self._wm == NULL:
            raise RuntimeError(_STALE_VIEW_MSG.format("WsMessage"))
        return 0

    def __bool__(self):
        return self._wm != NULL

    def __repr__(self):
        if self._wm == NULL:
            return "<WsMessage invalid>"
        return f"<WsMessage op={self._wm.flags & 0x0F} len={self._wm.data.len}>"

    @property
    def data(self):
        self._ensure_valid()
        return _bytes_mg(self._wm.data)

    @property
    def text(self):
        self._ensure_valid()
        return _decode_mg(self._wm.data)

    @property
    def data_view(self):
        self._ensure_valid()
        return _recv_view(self._conn, self._wm.data.buf, self._wm.data.len,
                          "WsMessage.data_view", "data")

    @property
    def flags(self):
        self._ensure_valid()
        return self._wm.flags


@cython.final
@cython.freelist(8)
cdef class MqttMessage:
    """One MQTT packet, pointing into Mongoose's receive buffer."""

    def __cinit__(self):
        self._mm = NULL

    cdef int _ensure_valid(self) except -1:
        if self._mm == NULL:
            raise RuntimeError(_STALE_VIEW_MSG.format("MqttMessage"))
        return 0

    def __bool__(self):
        return self._mm != NULL

    def __repr__(self):
        if self._mm == NULL:
            return "<MqttMessage invalid>"
        return f"<MqttMessage cmd={self._mm.cmd} topic={self.topic!r}>"

    @property
    def topic(self):
        self._ensure_valid()
        return _decode_mg(self._mm.topic)

    @property
    def data(self):
        self._ensure_valid()
        return _bytes_mg(self._mm.data)

    @property
    def text(self):
        self._ensure_valid()
        return _decode_mg(self._mm.data)

    @property
    def data_view(self):
        self._ensure_valid()
        return _recv_view(self._conn, self._mm.data.buf, self._mm.data.len,
                          "MqttMessage.data_view", "data")

    @property
    def id(self):
        self._ensure_valid()
        return self._mm.id

    @property
    def cmd(self):
        self._ensure_valid()
        return self._mm.cmd

    @property
    def qos(self):
        self._ensure_valid()
        return self._mm.qos

    @property
    def ack(self):
        self._ensure_valid()
        return self._mm.ack

    def properties(self):
        self._ensure_valid()
        return _mqtt_properties(self._mm)
