# LoopCaches: what one Manager's loop remembers between requests (the last client address's
# text, header names and their WSGI/ASGI forms), so the common request repeats no work.

from cpython.dict cimport PyDict_GetItem
from cpython.list cimport PyList_GET_ITEM

DEF _NAME_CACHE_MAX = 1024  # a client sending random names can't grow a name cache forever


cdef class LoopCaches:
    # Reads below take borrowed references from the lists and dicts: safe because only the
    # thread polling the owning Manager reads or writes them (the class comment in the .pxd).

    def __cinit__(self):
        self.ip4_text = None
        self.environ_raw = [b""] * mg.MG_MAX_HTTP_HEADERS
        self.environ_key = [None] * mg.MG_MAX_HTTP_HEADERS
        self.environ_keys = {}
        self.asgi_raw = [b""] * mg.MG_MAX_HTTP_HEADERS
        self.asgi_lower = [b""] * mg.MG_MAX_HTTP_HEADERS
        self.asgi_names = {}


cdef inline LoopCaches _caches_of(Connection conn):
    """The caches of the Manager that owns conn (open: its _manager is valid)."""
    return (<Manager>conn._manager)._caches


cdef str _ip4_text(const uint8_t *ip):
    cdef char text[16]
    cdef int n = 0, i
    cdef unsigned octet
    for i in range(4):
        octet = ip[i]
        if octet >= 100:
            text[n] = <char>(48 + octet // 100)
            n += 1
        if octet >= 10:
            text[n] = <char>(48 + octet // 10 % 10)
            n += 1
        text[n] = <char>(48 + octet % 10)
        text[n + 1] = 46  # "."
        n += 2
    return text[:n - 1].decode("ascii")


cdef str _format_ip(const mg.mg_addr *a, LoopCaches caches):
    """An address's text. With caches, every client behind one IPv4 address (a proxy, a load
    balancer, loopback) gets the same str, made once: an f-string of four ints was 2,800
    instructions of a WSGI/ASGI connection's cost. Without (a log line, a refusal), made."""
    cdef const uint8_t *ip = &a.addr.ip[0]  # not a.addr.ip: Cython's temporary drops const
    cdef uint32_t packed
    cdef int i
    if a.is_ip6:
        # Eight 4-hex-digit groups, no "::" compression (0.2.5's format).
        return ":".join([f"{(ip[i] << 8) | ip[i + 1]:04x}" for i in range(0, 16, 2)])
    if caches is None:
        return _ip4_text(ip)
    memcpy(&packed, ip, 4)
    if caches.ip4_text is None or packed != caches.ip4:
        caches.ip4_text = _ip4_text(ip)
        caches.ip4 = packed
    return caches.ip4_text


cdef inline object _environ_slot_key(LoopCaches caches, size_t i, const char *p, size_t n):
    # A client sends the same names in the same order request after request: a memcmp()
    # against the name last seen at this position usually finds the key.
    cdef object raw = <object>PyList_GET_ITEM(caches.environ_raw, <Py_ssize_t>i)
    if <size_t>PyBytes_GET_SIZE(raw) == n and memcmp(PyBytes_AS_STRING(raw), p, n) == 0:
        return <object>PyList_GET_ITEM(caches.environ_key, <Py_ssize_t>i)
    key = _environ_key(caches.environ_keys, p, n)
    caches.environ_raw[i] = PyBytes_FromStringAndSize(p, <Py_ssize_t>n)
    caches.environ_key[i] = key
    return key


cdef object _environ_key(dict known, const char *p, size_t n):
    cdef bytes name = PyBytes_FromStringAndSize(p, <Py_ssize_t>n)
    cdef PyObject *hit = PyDict_GetItem(known, name)
    if hit != NULL:
        return <object>hit
    cdef object key
    # "X_Forwarded_For" would become the same HTTP_X_FORWARDED_FOR as a proxy's
    # "X-Forwarded-For": names with "_" are dropped (as nginx and gunicorn do).
    if memchr(p, c'_', n) != NULL:
        key = None
    else:
        text = name.decode("latin-1").upper().replace("-", "_")
        if text == "CONTENT_TYPE" or text == "CONTENT_LENGTH":
            key = text
        else:
            key = "HTTP_" + text
        key = sys_intern(key)
    if len(known) < _NAME_CACHE_MAX:
        known[name] = key
    return key


cdef inline object _asgi_slot_name(LoopCaches caches, size_t i, const char *p, size_t n):
    cdef object raw = <object>PyList_GET_ITEM(caches.asgi_raw, <Py_ssize_t>i)
    if <size_t>PyBytes_GET_SIZE(raw) == n and memcmp(PyBytes_AS_STRING(raw), p, n) == 0:
        return <object>PyList_GET_ITEM(caches.asgi_lower, <Py_ssize_t>i)
    cdef bytes name = PyBytes_FromStringAndSize(p, <Py_ssize_t>n)
    cdef bytes lower
    cdef PyObject *hit = PyDict_GetItem(caches.asgi_names, name)
    if hit != NULL:
        lower = <bytes>hit
    else:
        lower = name.lower()
        if len(caches.asgi_names) < _NAME_CACHE_MAX:
            caches.asgi_names[name] = lower
    caches.asgi_raw[i] = name
    caches.asgi_lower[i] = lower
    return lower
