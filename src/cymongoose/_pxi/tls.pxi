# TLS options and per-connection TLS set-up with Mongoose's built-in TLS (to be completed).


@cython.final
cdef class TlsOpts:
    def __init__(self, ca=None, cert=None, key=None, name=None, skip_verification=False):
        self.ca = b"" if ca is None else _coerce_bytes(ca, "ca")
        self.cert = b"" if cert is None else _coerce_bytes(cert, "cert")
        self.key = b"" if key is None else _coerce_bytes(key, "key")
        self.name = b"" if name is None else _coerce_bytes(name, "name")
        self.skip_verification = skip_verification


cdef int _tls_init(Connection conn, TlsOpts opts) except -1:
    raise NotImplementedError("tls_init")


cdef int _tls_free(Connection conn) except -1:
    raise NotImplementedError("tls_free")
