# TLS options, their validation against what the TLS engine accepts, and per-connection TLS
# set-up and release.

# The engine is chosen at build time (CMake CYMONGOOSE_TLS, docs/tls.md):
# - "openssl" (default): Mongoose's OpenSSL backend over the system libssl. RSA, ECDSA and
#   Ed25519 keys, TLS 1.2 and 1.3. Mongoose's mg_tls_init() would build an SSL_CTX and
#   parse the certificate and key for every connection (1.7 ms with RSA-2048, more than
#   the handshake), so cym_tls.h makes one SSL_CTX per TlsOpts and role, on first use, and
#   gives each connection the struct mg_tls that Mongoose's handshake, I/O and
#   mg_tls_free() expect. Keys are checked and re-encoded once per TlsOpts (the key must
#   belong to the certificate; an encrypted key is refused before OpenSSL could prompt for
#   a password on the terminal). A DER `ca` is wrapped as PEM. Servers pick http/1.1 by
#   ALPN.
# - "builtin": Mongoose 7.23's own TLS 1.3 (src/tls_builtin.c), checked below so a wrong key
#   is a ValueError naming the problem instead of a handshake that fails later:
#   - Private key: ECDSA P-256 only ("EC PRIVATE KEY", or PKCS#8 "PRIVATE KEY" with the
#     prime256v1 curve), unencrypted. Mongoose parses RSA keys too, but its RSA-CRT signer
#     (mg_rsa_crt_sign) compares a BearSSL-encoded bit length with a byte count and fails
#     every signature, so an RSA key would fail every handshake ("TLS OOM"): refused here.
#     mg_parse_pem() reads only the first PEM block of a string, so the key block is
#     extracted from files that carry more (EC PARAMETERS, certificates); DER input is
#     re-wrapped as PEM with the label Mongoose expects.
#   - Without skip_verification a client offers only ECDSA P-256 signatures, so the server
#     it talks to must use a P-256 certificate. An IP SAN equal to the address connected to
#     passes the host check, whatever `name` says.
#   - Known Mongoose 7.23 defect: its ECDSA CertificateVerify keeps a leading zero byte of r
#     or s (not minimal DER); vendor/mongoose/build_fixes.py fixes it in our build.
# Both engines: certificates are PEM (a chain: leaf first) or one DER certificate. A client
# verifies the server's chain only when `ca` is set, and its host name only when `name` is
# set. A server given `ca` requires client certificates signed by it. skip_verification
# turns every check of the peer off (OpenSSL: also a server's request for a client
# certificate); the name is still sent as SNI. An HTTP client (http_connect) offers
# http/1.1 by ALPN with the OpenSSL engine. Validity dates use
# mg_now(), seeded from time.time() at import (module_init.pxi). mg_tls_init() and OpenSSL
# copy everything they keep, so the option bytes need to live only for the call.

TLS_ENGINE = "openssl" if mg.CYM_TLS_OPENSSL else "builtin"

cdef str _TLS_ACCEPTED = (
    "this build uses Mongoose's built-in TLS (cymongoose.TLS_ENGINE == 'builtin'), which "
    "accepts only unencrypted ECDSA P-256 (prime256v1) keys, as PEM 'EC PRIVATE KEY' or "
    "PKCS#8 'PRIVATE KEY' (e.g. `openssl ecparam -name prime256v1 -genkey -noout`); RSA, "
    "other curves and Ed25519 need the OpenSSL engine (docs/tls.md)")

cdef bytes _OID_EC_PUBLIC_KEY = bytes.fromhex("2a8648ce3d0201")   # 1.2.840.10045.2.1
cdef bytes _OID_RSA = bytes.fromhex("2a864886f70d010101")         # 1.2.840.113549.1.1.1
cdef bytes _OID_P256 = bytes.fromhex("2a8648ce3d030107")          # 1.2.840.10045.3.1.7
cdef dict _OID_NAMES = {
    bytes.fromhex("2b81040022"): "ECDSA P-384",
    bytes.fromhex("2b81040023"): "ECDSA P-521",
    bytes.fromhex("2b8104000a"): "ECDSA secp256k1",
    bytes.fromhex("2b6570"): "Ed25519",
    bytes.fromhex("2b6571"): "Ed448",
    bytes.fromhex("2b656e"): "X25519",
    bytes.fromhex("2b656f"): "X448",
    bytes.fromhex("2a8648ce380401"): "DSA",
    bytes.fromhex("2a864886f70d01010a"): "RSA-PSS",
}
# Longest host name Mongoose keeps (tls_data.hostname is 254 bytes, NUL included).
DEF _TLS_MAX_NAME = 252

cdef object _PEM_BLOCK = re_compile(
    rb"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re_DOTALL)


@cython.final
cdef class TlsOpts:
    """TLS settings for Connection.tls_init(); every field is stored as bytes."""

    # What a server offers for TLS 1.2 when `ciphers` is empty (cym_tls.h says why).
    DEFAULT_CIPHERS = mg.cym_tls_default_ciphers.decode("ascii")

    def __init__(self, ca=None, cert=None, key=None, name=None, skip_verification=False,
                 ciphers=None):
        self.ca = b"" if ca is None else _coerce_bytes(ca, "ca")
        self.cert = b"" if cert is None else _coerce_bytes(cert, "cert")
        self.key = b"" if key is None else _coerce_bytes(key, "key")
        self.name = b"" if name is None else _coerce_bytes(name, "name")
        self.skip_verification = skip_verification
        self.ciphers = b"" if ciphers is None else _coerce_bytes(ciphers, "ciphers")
        if self.ciphers:
            _tls_check_ciphers(self.ciphers)  # at once: a typo stops a server at start-up

    def __dealloc__(self):
        _tls_drop_contexts(self)

    def __reduce__(self):
        # The OpenSSL contexts cannot travel; the fields can, and the copy rebuilds its own.
        return (TlsOpts, (self.ca, self.cert, self.key, self.name,
                          bool(self.skip_verification), self.ciphers))

    @classmethod
    def from_files(cls, ca=None, cert=None, key=None, name=None, skip_verification=False,
                   ciphers=None):
        return _tls_opts_from_files(ca, cert, key, name, skip_verification, ciphers)

    def __repr__(self):
        # Never show key material.
        return (f"TlsOpts(ca={len(self.ca)} bytes, cert={len(self.cert)} bytes, "
                f"key={'set' if self.key else 'none'}, name={self.name!r}, "
                f"skip_verification={bool(self.skip_verification)}"
                + (f", ciphers={self.ciphers!r})" if self.ciphers else ")"))


class _DerError(ValueError):
    pass


cdef tuple _der(bytes der, Py_ssize_t pos, Py_ssize_t end):
    """(tag, value start, value end) of the DER element at `pos`."""
    cdef Py_ssize_t n, k, i
    if end - pos < 2:
        raise _DerError("truncated")
    tag = der[pos]
    n = der[pos + 1]
    pos += 2
    if n & 0x80:
        k = n & 0x7F
        if k == 0 or k > 4 or end - pos < k:
            raise _DerError("bad length")
        n = 0
        for i in range(k):
            n = (n << 8) | der[pos + i]
        pos += k
    if end - pos < n:
        raise _DerError("truncated")
    return tag, pos, pos + n


cdef list _der_children(bytes der, Py_ssize_t start, Py_ssize_t end):
    cdef list out = []
    while start < end:
        tlv = _der(der, start, end)
        out.append(tlv)
        start = tlv[2]
    return out


cdef str _tls_oid_name(bytes oid):
    return _OID_NAMES.get(oid, "OID " + oid.hex())


cdef int _tls_check_sec1(bytes der, Py_ssize_t start, Py_ssize_t end, bint outer) except -1:
    """RFC 5915 ECPrivateKey: a 32-byte scalar on P-256."""
    cdef tuple root = _der(der, start, end)
    if root[0] != 0x30:
        raise _DerError("not a SEQUENCE")
    cdef list items = _der_children(der, root[1], root[2])
    if len(items) < 2 or items[0][0] != 0x02 or items[1][0] != 0x04:
        raise _DerError("not an ECPrivateKey")
    for tag, s, e in items[2:]:
        if tag == 0xA0:  # [0] parameters: the named curve
            curve = _der(der, s, e)
            oid = der[curve[1]:curve[2]]
            if curve[0] != 0x06 or oid != _OID_P256:
                raise ValueError(
                    f"TlsOpts.key is an {_tls_oid_name(oid)} key; {_TLS_ACCEPTED}")
    if items[1][2] - items[1][1] != 32:
        raise ValueError(
            f"TlsOpts.key is an EC key of {items[1][2] - items[1][1]} bytes, not P-256; "
            f"{_TLS_ACCEPTED}")
    # tls_init() reads a traditional key only through the prefix 30 <short length> 02 01 01
    # 04 20 (a PKCS#8-wrapped one goes through a real DER parser).
    if outer and (der[start + 1] & 0x80 or der[start + 2:start + 7] != b"\x02\x01\x01\x04\x20"):
        raise _DerError("ECPrivateKey not in the canonical P-256 layout")
    return 0


cdef int _tls_check_rsa(bytes der, Py_ssize_t start, Py_ssize_t end) except -1:
    cdef tuple root = _der(der, start, end)
    if root[0] != 0x30:
        raise _DerError("not a SEQUENCE")
    cdef list items = _der_children(der, root[1], root[2])
    if len(items) < 9 or any(t[0] != 0x02 for t in items[:9]):
        raise _DerError("not an RSAPrivateKey")
    modulus = der[items[1][1]:items[1][2]].lstrip(b"\x00")
    raise ValueError(f"TlsOpts.key is a {len(modulus) * 8}-bit RSA key; {_TLS_ACCEPTED}")


cdef str _tls_check_pkcs8(bytes der):
    """Returns the traditional label matching the PKCS#8 key's algorithm."""
    cdef tuple root = _der(der, 0, len(der))
    if root[0] != 0x30:
        raise _DerError("not a SEQUENCE")
    cdef list items = _der_children(der, root[1], root[2])
    if len(items) < 3 or items[0][0] != 0x02 or items[1][0] != 0x30 or items[2][0] != 0x04:
        raise _DerError("not a PrivateKeyInfo")
    cdef list alg = _der_children(der, items[1][1], items[1][2])
    if not alg or alg[0][0] != 0x06:
        raise _DerError("no algorithm")
    oid = der[alg[0][1]:alg[0][2]]
    if oid == _OID_RSA:
        _tls_check_rsa(der, items[2][1], items[2][2])
        return "RSA PRIVATE KEY"
    if oid == _OID_EC_PUBLIC_KEY:
        curve = der[alg[1][1]:alg[1][2]] if len(alg) > 1 and alg[1][0] == 0x06 else b""
        if curve != _OID_P256:
            raise ValueError(
                f"TlsOpts.key is an {_tls_oid_name(curve)} key; {_TLS_ACCEPTED}")
        _tls_check_sec1(der, items[2][1], items[2][2], False)
        return "EC PRIVATE KEY"
    raise ValueError(f"TlsOpts.key is an {_tls_oid_name(oid)} key; {_TLS_ACCEPTED}")


cdef bytes _pem(str label, bytes der):
    b64 = binascii_b2a_base64(der, newline=False)
    lines = [b64[i:i + 64] for i in range(0, len(b64), 64)]
    return (b"-----BEGIN " + label.encode() + b"-----\n" + b"\n".join(lines) +
            b"\n-----END " + label.encode() + b"-----\n")


cdef bytes _tls_key(bytes key, bytes cert):
    """The private key as one PEM block Mongoose parses, or ValueError saying why not."""
    cdef list blocks = [(m.group(1).decode("ascii"), m.group(2))
                        for m in _PEM_BLOCK.finditer(key)]
    cdef list keys = [b for b in blocks if "PRIVATE KEY" in b[0]]
    cdef str label
    cdef bytes der
    if not blocks and b"-----BEGIN" in key:
        raise ValueError("TlsOpts.key: the PEM block is incomplete (no matching END line)")
    if blocks:
        if not keys:
            found = ", ".join(sorted({b[0] for b in blocks}))
            raise ValueError(f"TlsOpts.key holds no private key (found: {found})")
        if len(keys) > 1:
            raise ValueError("TlsOpts.key holds more than one private key; pass exactly one")
        label, body = keys[0]
        if label == "ENCRYPTED PRIVATE KEY" or b"ENCRYPTED" in body.split(b"\n\n")[0]:
            raise ValueError(
                "TlsOpts.key is encrypted; decrypt it first (for example "
                "`openssl pkey -in key.pem -out plain.pem`): cymongoose does not take key "
                "passwords")
    if mg.CYM_TLS_OPENSSL:
        return _tls_key_openssl(key, cert)
    if not blocks:
        der = key  # DER: find out what it is and wrap it with the right label
        try:
            _tls_check_sec1(der, 0, len(der), True)
            return _pem("EC PRIVATE KEY", der)
        except _DerError:
            pass
        try:
            _tls_check_pkcs8(der)
            return _pem("PRIVATE KEY", der)
        except _DerError:
            pass
        try:
            _tls_check_rsa(der, 0, len(der))
            return _pem("RSA PRIVATE KEY", der)
        except _DerError:
            raise ValueError(
                f"TlsOpts.key is neither a PEM private key nor a DER one; {_TLS_ACCEPTED}"
            ) from None
    if label not in ("EC PRIVATE KEY", "PRIVATE KEY", "RSA PRIVATE KEY"):
        raise ValueError(f"TlsOpts.key is a {label!r} block; {_TLS_ACCEPTED}")
    try:
        der = binascii_a2b_base64(b"".join(body.split()))
    except binascii_Error:
        raise ValueError(f"TlsOpts.key: the {label} block is not valid base64") from None
    try:
        if label == "EC PRIVATE KEY":
            _tls_check_sec1(der, 0, len(der), True)
        elif label == "RSA PRIVATE KEY":
            _tls_check_rsa(der, 0, len(der))
        else:
            _tls_check_pkcs8(der)
    except _DerError as exc:
        raise ValueError(f"TlsOpts.key: malformed {label} ({exc}); {_TLS_ACCEPTED}") from None
    return _pem(label, der)


cdef bytes _tls_key_openssl(bytes key, bytes cert):
    """OpenSSL engine: the key re-encoded as unencrypted PKCS#8 PEM, checked against the
    certificate (cym_tls.h)."""
    cdef char *out = NULL
    cdef size_t out_len = 0
    cdef char err[256]
    err[0] = 0
    if mg.cym_tls_key_pem(PyBytes_AS_STRING(key), <size_t>PyBytes_GET_SIZE(key),
                          PyBytes_AS_STRING(cert), <size_t>PyBytes_GET_SIZE(cert),
                          &out, &out_len, err, sizeof(err)) != 0:
        raise ValueError(f"TlsOpts.key: {err.decode('utf-8', 'replace')}")
    try:
        return PyBytes_FromStringAndSize(out, <Py_ssize_t>out_len)
    finally:
        mg.cym_tls_free(out)


cdef int _tls_check_certs(bytes pem, str argname) except -1:
    if b"-----BEGIN CERTIFICATE-----" in pem:
        if b"-----END CERTIFICATE-----" not in pem:
            raise ValueError(f"TlsOpts.{argname}: the PEM certificate has no END line")
        return 0
    if pem[:1] == b"\x30":  # one DER certificate
        return 0
    raise ValueError(
        f"TlsOpts.{argname} must hold PEM certificates ('-----BEGIN CERTIFICATE-----') or "
        "one DER certificate")


cdef inline mg.mg_str _tls_str(bytes b):
    # An empty field must be a NULL pointer: tls_init() tests cert.buf == NULL, not length.
    cdef mg.mg_str s
    s.len = <size_t>PyBytes_GET_SIZE(b)
    s.buf = PyBytes_AS_STRING(b) if s.len else NULL
    return s


cdef tuple _tls_prepared(TlsOpts opts):
    """(ca, cert, key, name, ciphers) as handed to the engine, validated once per set of
    field values."""
    cdef bytes ca = opts.ca if opts.ca is not None else b""
    cdef bytes cert = opts.cert if opts.cert is not None else b""
    cdef bytes key = opts.key if opts.key is not None else b""
    cdef bytes name = opts.name if opts.name is not None else b""
    cdef bytes ciphers = opts.ciphers if opts.ciphers is not None else b""
    # The fields are public and writable: the cache holds the very objects it checked, so
    # any assignment (even of equal bytes) validates again. A server calls tls_init() with
    # the same TlsOpts for every accepted connection; this saves the parse each time.
    cdef tuple seen = opts._checked_fields
    if (seen is not None and seen[0] is ca and seen[1] is cert and seen[2] is key
            and seen[3] is name and seen[4] is ciphers):
        return opts._prepared
    cdef tuple prepared = _tls_check_opts(ca, cert, key, name) + (ciphers,)
    if ciphers:
        _tls_check_ciphers(ciphers)
    _tls_drop_contexts(opts)  # made from the previous values
    opts._checked_fields = (ca, cert, key, name, ciphers)
    opts._prepared = prepared
    return prepared


cdef int _tls_init(Connection conn, TlsOpts opts) except -1:
    conn._ensure_open()
    if opts is None:
        raise TypeError("opts must be a TlsOpts, not None")
    cdef mg.mg_connection *c = conn._c
    if c.is_listening:
        # Mongoose keeps nothing of a listener's TLS state for accepted connections.
        warnings_warn(
            "tls_init() on a listener has no effect: call it on each accepted connection "
            "in MG_EV_ACCEPT", RuntimeWarning, stacklevel=1)
        return 0
    if c.tls != NULL:
        raise RuntimeError("tls_init() was already called on this connection")
    cdef tuple prepared
    cdef mg.mg_tls_opts o
    cdef int attached = 0
    try:
        with opts._lock:
            prepared = _tls_prepared(opts)
            if mg.CYM_TLS_OPENSSL:
                # Attached (its own reference taken) before the lock goes, so no other
                # thread can drop the context in between.
                attached = _tls_attach_shared(c, opts, prepared)
    except BaseException:
        # Never let the connection go on without TLS: on an https:// listener Mongoose would
        # serve it in plain text once MG_EV_ACCEPT returns without a TLS set-up.
        c.is_closing = 1
        raise
    if mg.CYM_TLS_OPENSSL:
        if attached != 0:
            c.is_closing = 1
            raise MemoryError("tls_init(): out of memory for the TLS session")
        return 0
    cdef bytes ca = prepared[0]
    cdef bytes cert = prepared[1]
    cdef bytes key = prepared[2]
    cdef bytes name = prepared[3]
    memset(&o, 0, sizeof(o))
    o.ca = _tls_str(ca)
    o.cert = _tls_str(cert)
    o.key = _tls_str(key) if cert else _tls_str(b"")
    o.name = _tls_str(name)
    o.skip_verification = bool(opts.skip_verification)
    mg.mg_tls_init(c, &o)  # may fire MG_EV_ERROR synchronously (OOM, rejected input)
    if conn._manager != NULL:
        _raise_pending(<Manager>conn._manager)
    return 0


cdef int _tls_attach_shared(mg.mg_connection *c, TlsOpts opts, tuple prepared) except -2:
    # OpenSSL engine, under opts._lock: the shared context for the connection's role, made
    # on first use, attached to c. 0, or -1 when OpenSSL is out of memory for the session.
    cdef bytes ca = prepared[0]
    cdef bytes cert = prepared[1]
    cdef bytes key = prepared[2]
    cdef bytes name = prepared[3]
    cdef void *ctx = _tls_shared_context(opts, c.is_client, ca, cert,
                                         key if cert else b"", prepared[4])
    return mg.cym_tls_attach(c, ctx, PyBytes_AS_STRING(name), <size_t>PyBytes_GET_SIZE(name),
                             1 if ca else 0, 1 if opts.skip_verification else 0,
                             1 if c.pfn == _mg_http_cb else 0)


cdef void *_tls_shared_context(TlsOpts opts, bint is_client, bytes ca, bytes cert,
                               bytes key, bytes ciphers) except NULL:
    """The OpenSSL context for this TlsOpts and role, made on first use (cym_tls.h)."""
    cdef void *ctx = opts._ctx_client if is_client else opts._ctx_server
    cdef char err[256]
    if ctx != NULL:
        return ctx
    err[0] = 0
    ctx = mg.cym_tls_ctx_new(1 if is_client else 0, PyBytes_AS_STRING(ca),
                             <size_t>PyBytes_GET_SIZE(ca), PyBytes_AS_STRING(cert),
                             <size_t>PyBytes_GET_SIZE(cert), PyBytes_AS_STRING(key),
                             <size_t>PyBytes_GET_SIZE(key), PyBytes_AS_STRING(ciphers),
                             err, sizeof(err))
    if ctx == NULL:
        raise ValueError(f"TlsOpts: {err.decode('utf-8', 'replace')}")
    if is_client:
        opts._ctx_client = ctx
    else:
        opts._ctx_server = ctx
    return ctx


cdef void _tls_drop_contexts(TlsOpts opts) noexcept:
    # Connections using them keep their own references (SSL_CTX_up_ref in cym_tls_attach).
    if opts._ctx_server != NULL:
        mg.cym_tls_ctx_free(opts._ctx_server)
        opts._ctx_server = NULL
    if opts._ctx_client != NULL:
        mg.cym_tls_ctx_free(opts._ctx_client)
        opts._ctx_client = NULL


cdef tuple _tls_check_opts(bytes ca, bytes cert, bytes key, bytes name):
    """Validate the options; returns them as Mongoose will read them (the key as one PEM
    block; with OpenSSL, a DER `ca` as PEM)."""
    if ca:
        _tls_check_certs(ca, "ca")
        if mg.CYM_TLS_OPENSSL and ca[:1] == b"\x30":
            ca = _pem("CERTIFICATE", ca)
    if cert:
        _tls_check_certs(cert, "cert")
        if not key:
            raise ValueError("TlsOpts.cert is set without its private key: set TlsOpts.key")
    if key:
        key = _tls_key(key, cert)
    if b"\x00" in name:
        raise ValueError("TlsOpts.name must not contain NUL bytes")
    if len(name) > _TLS_MAX_NAME:
        raise ValueError(f"TlsOpts.name is longer than {_TLS_MAX_NAME} bytes")
    return (ca, cert, key, name)


cdef int _tls_check_ciphers(bytes ciphers) except -1:
    """ValueError naming TlsOpts.ciphers unless OpenSSL takes every entry of the list."""
    cdef char err[256]
    if not mg.CYM_TLS_OPENSSL:
        raise ValueError("TlsOpts.ciphers needs the OpenSSL engine (cymongoose.TLS_ENGINE "
                         "is 'builtin', whose TLS 1.3 suites are fixed)")
    if b"\x00" in ciphers or not ciphers.isascii():
        raise ValueError("TlsOpts.ciphers must be an OpenSSL cipher list (ASCII, no NUL)")
    err[0] = 0
    if mg.cym_tls_check_ciphers(PyBytes_AS_STRING(ciphers), err, sizeof(err)) != 0:
        raise ValueError(f"TlsOpts.ciphers {ciphers.decode()!r}: "
                         f"{err.decode('utf-8', 'replace')}")
    return 0


cdef int _tls_free(Connection conn) except -1:
    conn._ensure_open()
    cdef mg.mg_connection *c = conn._c
    if c.tls == NULL:
        return 0
    mg.mg_tls_free(c)
    # The session cannot go on without its keys, and Mongoose would dereference the freed
    # state on the next send (is_tls still set): stop using TLS and close the connection.
    c.is_tls = 0
    c.is_tls_hs = 0
    c.is_closing = 1
    return 0


cdef str _tls_error_text(mg.mg_connection *c, str text):
    """Mongoose's OpenSSL handshake error ("tls hs: rc -1, err 1") made readable."""
    if not mg.CYM_TLS_OPENSSL or not text.startswith("tls hs:"):
        return text
    cdef char buf[256]
    if mg.cym_tls_verify_error(c, buf, sizeof(buf)):
        return buf.decode("utf-8", "replace")
    code = text.rpartition(" ")[2]
    if code == "1":  # SSL_ERROR_SSL
        reason = ("protocol error: not TLS, no common version or cipher, a missing or "
                  "refused certificate, or a fatal alert from the peer")
    elif code == "5":  # SSL_ERROR_SYSCALL
        reason = "the peer closed the connection"
    else:
        reason = "OpenSSL error"
    return f"TLS handshake failed: {reason} ({text})"


cdef extern from "<sys/socket.h>" nogil:
    ssize_t recv(int fd, void *buf, size_t n, int flags)
    enum:
        MSG_PEEK
        MSG_DONTWAIT

# A protected record carries at most 2^14 + 256 bytes in TLS 1.3 (RFC 8446 §5.2) and
# 2^14 + 2048 in TLS 1.2 (RFC 5246 §6.2.3), which only the OpenSSL engine speaks.
cdef size_t _TLS_MAX_RECORD = 16384 + (2048 if mg.CYM_TLS_OPENSSL else 256)


cdef void _tls_screen(mg.mg_connection *c) noexcept nogil:
    """Check the TLS record at the head of c->rtls, before Mongoose waits on it (POLL)."""
    # Mongoose 7.23 trusts a record header's length and waits for the whole record, polling
    # the connection every millisecond while any byte is buffered. So: plain text
    # ("GET / HTTP/1.1" announces an 8 KB record) would sit there until a timeout; a length
    # over what it buffers (16 KB + 40) would never complete; and once the handshake is done,
    # a peer that closes mid-record is never noticed (read_conn closes only with rtls empty).
    # Every TLS record starts with a content type 20-23 and major version 3.
    cdef const uint8_t *b = c.rtls.buf
    cdef size_t n = c.rtls.len
    cdef size_t rec
    cdef char probe
    if c.is_closing or b == NULL or n == 0:
        return
    if b[0] < 0x14 or b[0] > 0x17 or (n > 1 and b[1] != 0x03):
        mg.mg_error(c, "TLS: the peer sent non-TLS data")
        return
    if n >= 5:
        rec = (<size_t>b[3] << 8) | b[4]
        if rec > _TLS_MAX_RECORD:
            mg.mg_error(c, "TLS: record longer than the protocol allows")
            return
        if n >= 5 + rec:
            return  # a whole record: Mongoose processes it
    if not c.is_tls_hs and recv(<int><size_t>c.fd, &probe, 1, MSG_PEEK | MSG_DONTWAIT) == 0:
        mg.mg_error(c, "TLS: the peer closed in the middle of a record")
