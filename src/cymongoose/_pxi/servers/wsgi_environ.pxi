# PEP 3333 environ of one request, built in a single pass over Mongoose's parsed head: the
# WSGI server's profile showed the Python version as the largest part of its per-request
# cost. Header values and the path are latin-1 `str` (one code point per octet), as
# PEP 3333 requires; repeated fields are joined with ", " (Cookie with "; ").

from cpython.dict cimport PyDict_Copy, PyDict_GetItem, PyDict_SetItem

from cpython.dict cimport PyDict_Next

cdef extern from "Python.h":
    object PyUnicode_DecodeLatin1(const char *s, Py_ssize_t size, const char *errors)
    # Cython's own dict literals use it: a dict made with room for n items never resizes
    # while they are added (also used by asgi_scope.pxi).
    dict _PyDict_NewPresized(Py_ssize_t minused)

# Items every request adds to its copy of the base: the base holds a placeholder for each, so
# the copy replaces values instead of inserting (see wsgi_environ_base()).
cdef tuple _ENVIRON_PER_REQUEST = ("REQUEST_METHOD", "PATH_INFO", "QUERY_STRING",
                                   "RAW_URI", "SERVER_PROTOCOL", "REMOTE_ADDR",
                                   "REMOTE_PORT", "wsgi.input")
DEF _ENVIRON_ROOM = 48  # items an environ holds before it has to grow: base and headers


def wsgi_environ_base(dict items not None):
    """The base environ of a listener for cymongoose.wsgi: `items` plus a placeholder for each
    item a request sets, in a dict with room for a request's headers too. Each request's
    environ is a copy of it, which has that room as well: nothing is resized per request."""
    cdef dict base = _PyDict_NewPresized(_ENVIRON_ROOM)
    cdef Py_ssize_t pos = 0
    cdef PyObject *key
    cdef PyObject *value
    # Item by item: update() would replace the presized table with a copy of the source's.
    while PyDict_Next(items, &pos, &key, &value):
        PyDict_SetItem(base, <object>key, <object>value)
    for name in _ENVIRON_PER_REQUEST:
        if name not in base:
            base[name] = ""
    return base


cdef inline int _unhex(unsigned char ch) noexcept nogil:
    if 48 <= ch <= 57:
        return ch - 48
    ch |= 0x20
    if 97 <= ch <= 102:
        return ch - 87
    return -1


cdef object _latin1_path(const char *p, size_t n):
    """The percent-decoded path as latin-1 str (invalid escapes are kept as they are)."""
    if memchr(p, c'%', n) == NULL:
        return PyUnicode_DecodeLatin1(p, <Py_ssize_t>n, NULL)
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
    return PyUnicode_DecodeLatin1(w, <Py_ssize_t>k, NULL)


cdef dict _wsgi_environ(HttpMessage msg, dict base, Connection conn, str root_path):
    msg._ensure_valid()
    conn._ensure_open()
    cdef mg.mg_http_message *hm = msg._hm
    cdef dict env = PyDict_Copy(base)
    cdef size_t i
    cdef mg.mg_http_header *h
    cdef PyObject *prev
    cdef LoopCaches caches = _caches_of(conn)
    env["REQUEST_METHOD"] = _method_str(hm.method.buf, hm.method.len)
    path = _latin1_path(hm.uri.buf, hm.uri.len)
    # RAW_URI: the target as the client sent it, path and query undecoded (gunicorn's key);
    # the access log writes it. Mongoose points query.buf past a '?' (even one with nothing
    # after it), so the target ends there; without one, the common case, the decoded path is
    # the same text and its object is shared.
    if hm.query.buf != NULL:
        env["RAW_URI"] = PyUnicode_DecodeLatin1(
            hm.uri.buf, <Py_ssize_t>(hm.query.buf + hm.query.len - hm.uri.buf), NULL)
    elif memchr(hm.uri.buf, c'%', hm.uri.len) == NULL:
        env["RAW_URI"] = path
    else:
        env["RAW_URI"] = PyUnicode_DecodeLatin1(hm.uri.buf, <Py_ssize_t>hm.uri.len, NULL)
    if root_path:
        if path == root_path or path.startswith(root_path + "/"):
            path = path[len(root_path):]
        else:
            env["SCRIPT_NAME"] = ""
    env["PATH_INFO"] = path
    env["QUERY_STRING"] = PyUnicode_DecodeLatin1(hm.query.buf, <Py_ssize_t>hm.query.len, NULL)
    env["SERVER_PROTOCOL"] = _PROTOCOLS[_http_version(hm)]
    if conn._peer is None:
        conn._peer = (_format_ip(&conn._c.rem, caches), str(_addr_port(&conn._c.rem)))
    env["REMOTE_ADDR"] = conn._peer[0]
    env["REMOTE_PORT"] = conn._peer[1]
    for i in range(<size_t>mg.MG_MAX_HTTP_HEADERS):
        h = &hm.headers[i]
        if h.name.len == 0:
            break
        key = _environ_slot_key(caches, i, h.name.buf, h.name.len)
        if key is None:
            continue
        value = PyUnicode_DecodeLatin1(h.value.buf, <Py_ssize_t>h.value.len, NULL)
        prev = PyDict_GetItem(env, key)
        if prev != NULL and key not in base:
            value = (<str>prev) + ("; " if key == "HTTP_COOKIE" else ", ") + value
        PyDict_SetItem(env, key, value)
    return env


# The methods almost every request uses, as shared str objects.
cdef tuple _COMMON_METHODS = ("GET", "POST", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS")


cdef object _method_str(const char *p, size_t n):
    cdef str m
    for m in _COMMON_METHODS:
        if <size_t>len(m) == n and memcmp(PyUnicode_AsUTF8AndSize(m, NULL), p, n) == 0:
            return m
    return PyUnicode_DecodeLatin1(p, <Py_ssize_t>n, NULL)
