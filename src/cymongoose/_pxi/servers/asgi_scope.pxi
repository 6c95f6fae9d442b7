# The ASGI http scope of one request, built in a single pass over Mongoose's parsed head
# (the ASGI server's per-request Python was mostly this). Headers are raw bytes with
# lower-cased names, in order, duplicates kept; the path is percent-decoded as UTF-8.

DEF _SCOPE_ITEMS = 16  # a base's 6 items, the 8 added per request, and 2 to spare


cdef object _utf8_path(const char *p, size_t n):
    """The percent-decoded path as str: UTF-8, undecodable bytes replaced (as uvicorn)."""
    if memchr(p, c'%', n) == NULL:
        return p[:n].decode("utf-8", "replace")
    cdef bytes out = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>n)
    cdef char *w = PyBytes_AS_STRING(out)
    cdef size_t i = 0, k = 0
    cdef int hi, lo
    while i < n:
        if p[i] == c'%' and i + 2 < n:
            hi = _unhex(<unsigned char>p[i + 1])
            lo = _unhex(<unsigned char>p[i + 2])
            if hi >= 0 and lo >= 0:
                w[k] = <char>(hi * 16 + lo)
                k += 1
                i += 3
                continue
        w[k] = p[i]
        k += 1
        i += 1
    return w[:k].decode("utf-8", "replace")


cdef dict _asgi_scope(HttpMessage msg, dict base, Connection conn, dict state):
    msg._ensure_valid()
    conn._ensure_open()
    cdef mg.mg_http_message *hm = msg._hm
    cdef dict scope
    cdef Py_ssize_t pos = 0
    cdef PyObject *key
    cdef PyObject *value
    if "headers" in base:
        # A template that has every key already (asgi/server.py's _scope_base): one block
        # copy and each item below replaces a value, no insertion, no resize.
        scope = PyDict_Copy(base)
    else:
        scope = _PyDict_NewPresized(_SCOPE_ITEMS)
        while PyDict_Next(base, &pos, &key, &value):
            PyDict_SetItem(scope, <object>key, <object>value)
    cdef list headers = []
    cdef size_t i
    cdef mg.mg_http_header *h
    cdef LoopCaches caches = _caches_of(conn)
    scope["method"] = _method_str(hm.method.buf, hm.method.len)
    scope["path"] = _utf8_path(hm.uri.buf, hm.uri.len)
    scope["raw_path"] = PyBytes_FromStringAndSize(hm.uri.buf, <Py_ssize_t>hm.uri.len)
    scope["query_string"] = PyBytes_FromStringAndSize(hm.query.buf, <Py_ssize_t>hm.query.len)
    scope["http_version"] = _ASGI_VERSIONS[_http_version(hm)]
    if conn._client is None:  # once per connection, not per request
        conn._client = (_format_ip(&conn._c.rem, caches), _addr_port(&conn._c.rem))
    scope["client"] = conn._client
    for i in range(<size_t>mg.MG_MAX_HTTP_HEADERS):
        h = &hm.headers[i]
        if h.name.len == 0:
            break
        headers.append((_asgi_slot_name(caches, i, h.name.buf, h.name.len),
                        PyBytes_FromStringAndSize(h.value.buf, <Py_ssize_t>h.value.len)))
    scope["headers"] = headers
    scope["state"] = PyDict_Copy(state)
    return scope
