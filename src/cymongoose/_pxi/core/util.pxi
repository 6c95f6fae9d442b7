# Utility functions: event names, log level, URL parts, glob match, form vars, multipart, hashes.

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.pyport cimport PY_SSIZE_T_MAX

# Hashing releases the GIL only past this size: below it the release costs more than it saves.
cdef enum:
    _NOGIL_HASH_MIN = 65536

cdef dict _EVENT_NAMES = {int(m.value): f"MG_EV_{m.name}" for m in Event}


def event_name(int ev):
    cdef object name = _EVENT_NAMES.get(ev)
    if name is not None:
        return name
    if ev > mg.MG_EV_USER:
        return f"MG_EV_USER+{ev - mg.MG_EV_USER}"
    return f"MG_EV_UNKNOWN({ev})"


def log_set(int level):
    if level < mg.MG_LL_NONE or level > mg.MG_LL_VERBOSE:
        raise ValueError(
            f"level must be between MG_LL_NONE ({mg.MG_LL_NONE}) and "
            f"MG_LL_VERBOSE ({mg.MG_LL_VERBOSE}), got {level}")
    mg.mg_log_level = level


def log_get():
    return mg.mg_log_level


def url_encode(str data not None):
    cdef bytes src = _utf8(data)
    cdef size_t n = <size_t>PyBytes_GET_SIZE(src)
    cdef size_t cap, out_len
    cdef char *out
    if n == 0:
        return ""
    # mg_url_encode fails (returns 0) unless n_out + 4 < cap before each input byte; each
    # byte needs at most 3 output chars, so 3 * n + 5 always fits.
    cap = 3 * n + 5
    out = <char *>PyMem_Malloc(cap)
    if out == NULL:
        raise MemoryError()
    try:
        out_len = mg.mg_url_encode(PyBytes_AS_STRING(src), n, out, cap)
        if out_len == 0:
            raise ValueError("url_encode failed")
        return out[:out_len].decode("ascii")
    finally:
        PyMem_Free(out)


# Mongoose's URL parsers read a NUL-terminated string, so a NUL inside `url` is refused
# rather than silently cutting the URL. The returned mg_str values point into `u`.

def url_port(str url not None):
    cdef bytes u = _utf8_no_nul(url, "url")
    return mg.mg_url_port(u)


def url_host(str url not None):
    cdef bytes u = _utf8_no_nul(url, "url")
    return _decode_mg(mg.mg_url_host(u))


def url_user(str url not None):
    cdef bytes u = _utf8_no_nul(url, "url")
    return _decode_mg(mg.mg_url_user(u))


def url_pass(str url not None):
    cdef bytes u = _utf8_no_nul(url, "url")
    return _decode_mg(mg.mg_url_pass(u))


def url_uri(str url not None):
    cdef bytes u = _utf8_no_nul(url, "url")
    cdef const char *p = mg.mg_url_uri(u)
    return _decode(p, strlen(p))


def url_is_ssl(str url not None):
    cdef bytes u = _utf8_no_nul(url, "url")
    return bool(mg.mg_url_is_ssl(u))


cdef list _glob_captures(const char *s, size_t slen, const char *p, size_t plen):
    """Captures of a pattern that mg_match() accepted, one per wildcard, in pattern order.

    Mongoose 7.23's own capture tracking can step past the end of the caller's array when
    it backtracks over a `*` followed by several `?` (the capture pointer moves forward once
    per `?` but back only once per retry), so no fixed-size array is safe. This walks the
    same control flow as mg_match() (same result), recording each wildcard's span by
    position instead of by moving a pointer.
    """
    cdef Py_ssize_t nwild = 0
    cdef size_t i = 0, j = 0, ni = 0, nj = 0, k
    cdef bint retry = False
    for k in range(plen):
        if p[k] == b'?' or p[k] == b'*' or p[k] == b'#':
            nwild += 1
    if nwild == 0:
        return []
    # Ordinal of each wildcard, start and length of its capture.
    cdef Py_ssize_t *ordinal = <Py_ssize_t *>PyMem_Malloc(plen * sizeof(Py_ssize_t))
    cdef size_t *start = <size_t *>PyMem_Malloc(<size_t>nwild * sizeof(size_t))
    cdef size_t *length = <size_t *>PyMem_Malloc(<size_t>nwild * sizeof(size_t))
    cdef Py_ssize_t w = 0
    cdef list caps
    try:
        if ordinal == NULL or start == NULL or length == NULL:
            raise MemoryError()
        for k in range(plen):
            ordinal[k] = w
            if p[k] == b'?' or p[k] == b'*' or p[k] == b'#':
                start[w] = 0
                length[w] = 0
                w += 1
        while i < plen or j < slen:
            if i < plen and j < slen and (
                    p[i] == b'?' or (p[i] != b'*' and p[i] != b'#' and s[j] == p[i])):
                if p[i] == b'?':
                    start[ordinal[i]] = j
                    length[ordinal[i]] = 1
                i += 1
                j += 1
            elif i < plen and (p[i] == b'*' or p[i] == b'#'):
                # A first visit starts the capture here; a retry (back from a failed
                # match) keeps the start and widens the capture by one.
                if not retry:
                    start[ordinal[i]] = j
                length[ordinal[i]] = j - start[ordinal[i]]
                retry = False
                ni = i
                i += 1
                nj = j + 1
            elif nj > 0 and nj <= slen and (
                    (ni < plen and p[ni] == b'#') or (j < slen and s[j] != b'/')):
                i = ni
                j = nj
                retry = True
            else:
                return None
        caps = []
        for w in range(nwild):
            caps.append(_decode(s + start[w], length[w]))
        return caps
    finally:
        PyMem_Free(ordinal)
        PyMem_Free(start)
        PyMem_Free(length)


def match(str s not None, str pattern not None):
    cdef bytes sb = _utf8(s)
    cdef bytes pb = _utf8(pattern)
    cdef const char *sp = PyBytes_AS_STRING(sb)
    cdef const char *pp = PyBytes_AS_STRING(pb)
    cdef size_t slen = <size_t>PyBytes_GET_SIZE(sb)
    cdef size_t plen = <size_t>PyBytes_GET_SIZE(pb)
    if not mg.mg_match(mg.mg_str_n(sp, slen), mg.mg_str_n(pp, plen), NULL):
        return False, []
    cdef list caps = _glob_captures(sp, slen, pp, plen)
    if caps is None:  # cannot happen: same walk as mg_match; keep the boolean honest
        return False, []
    return True, caps


def http_var(buf, str name not None):
    cdef bytes b = _coerce_bytes(buf, "buf")
    cdef bytes n = _utf8(name)
    cdef mg.mg_str v = mg.mg_http_var(
        mg.mg_str_n(PyBytes_AS_STRING(b), <size_t>PyBytes_GET_SIZE(b)),
        mg.mg_str_n(PyBytes_AS_STRING(n), <size_t>PyBytes_GET_SIZE(n)))
    if v.buf == NULL:
        return None
    return _decode(v.buf, v.len)


def http_parse_multipart(body, offset=0):
    cdef bytes b = _coerce_bytes(body, "body")
    cdef mg.mg_http_part part
    cdef Py_ssize_t ofs
    cdef size_t nxt
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise TypeError(f"offset must be int, not {type(offset).__name__}")
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    if offset >= PyBytes_GET_SIZE(b):
        return 0, None
    ofs = offset
    nxt = mg.mg_http_next_multipart(
        mg.mg_str_n(PyBytes_AS_STRING(b), <size_t>PyBytes_GET_SIZE(b)), <size_t>ofs, &part)
    if nxt == 0:
        return 0, None
    return nxt, {
        "name": _decode_mg(part.name),
        "filename": _decode_mg(part.filename),
        "body": _bytes_mg(part.body),
    }


def md5(data):
    cdef bytes b = _coerce_bytes(data, "data")
    cdef const unsigned char *p = <const unsigned char *>PyBytes_AS_STRING(b)
    cdef size_t n = <size_t>PyBytes_GET_SIZE(b)
    cdef unsigned char digest[16]
    cdef mg.mg_md5_ctx ctx
    if n >= _NOGIL_HASH_MIN:
        with nogil:
            mg.mg_md5_init(&ctx)
            mg.mg_md5_update(&ctx, p, n)
            mg.mg_md5_final(&ctx, digest)
    else:
        mg.mg_md5_init(&ctx)
        mg.mg_md5_update(&ctx, p, n)
        mg.mg_md5_final(&ctx, digest)
    return PyBytes_FromStringAndSize(<char *>digest, 16)


def sha1(data):
    cdef bytes b = _coerce_bytes(data, "data")
    cdef const unsigned char *p = <const unsigned char *>PyBytes_AS_STRING(b)
    cdef size_t n = <size_t>PyBytes_GET_SIZE(b)
    cdef unsigned char digest[20]
    cdef mg.mg_sha1_ctx ctx
    if n >= _NOGIL_HASH_MIN:
        with nogil:
            mg.mg_sha1_init(&ctx)
            mg.mg_sha1_update(&ctx, p, n)
            mg.mg_sha1_final(digest, &ctx)
    else:
        mg.mg_sha1_init(&ctx)
        mg.mg_sha1_update(&ctx, p, n)
        mg.mg_sha1_final(digest, &ctx)
    return PyBytes_FromStringAndSize(<char *>digest, 20)


def sha256(data):
    cdef bytes b = _coerce_bytes(data, "data")
    # mg_sha256 takes a non-const pointer but only reads it.
    cdef uint8_t *p = <uint8_t *>PyBytes_AS_STRING(b)
    cdef size_t n = <size_t>PyBytes_GET_SIZE(b)
    cdef uint8_t digest[32]
    if n >= _NOGIL_HASH_MIN:
        with nogil:
            mg.mg_sha256(digest, p, n)
    else:
        mg.mg_sha256(digest, p, n)
    return PyBytes_FromStringAndSize(<char *>digest, 32)


cdef void _hmac_sha256(uint8_t *digest, const unsigned char *key, size_t keysz,
                       const unsigned char *data, size_t n) noexcept nogil:
    # RFC 2104 over Mongoose's SHA-256. Not mg_hmac_sha256(): Mongoose 7.23 hashes keys of
    # 64 bytes or more, but only keys *longer* than the 64-byte block may be hashed, so a
    # 64-byte key gave a wrong MAC.
    cdef mg.mg_sha256_ctx ctx
    cdef unsigned char k[64]
    cdef unsigned char pad[64]
    cdef unsigned char inner[32]
    cdef size_t i
    memset(k, 0, 64)
    if keysz > 64:
        mg.mg_sha256_init(&ctx)
        mg.mg_sha256_update(&ctx, key, keysz)
        mg.mg_sha256_final(k, &ctx)
    elif keysz > 0:
        memcpy(k, key, keysz)
    for i in range(64):
        pad[i] = k[i] ^ 0x36
    mg.mg_sha256_init(&ctx)
    mg.mg_sha256_update(&ctx, pad, 64)
    mg.mg_sha256_update(&ctx, data, n)
    mg.mg_sha256_final(inner, &ctx)
    for i in range(64):
        pad[i] = k[i] ^ 0x5c
    mg.mg_sha256_init(&ctx)
    mg.mg_sha256_update(&ctx, pad, 64)
    mg.mg_sha256_update(&ctx, inner, 32)
    mg.mg_sha256_final(digest, &ctx)


def hmac_sha256(key, data):
    cdef bytes k = _coerce_bytes(key, "key")
    cdef bytes b = _coerce_bytes(data, "data")
    cdef const unsigned char *kp = <const unsigned char *>PyBytes_AS_STRING(k)
    cdef size_t kn = <size_t>PyBytes_GET_SIZE(k)
    cdef const unsigned char *p = <const unsigned char *>PyBytes_AS_STRING(b)
    cdef size_t n = <size_t>PyBytes_GET_SIZE(b)
    cdef uint8_t digest[32]
    if n + kn >= _NOGIL_HASH_MIN:
        with nogil:
            _hmac_sha256(digest, kp, kn, p, n)
    else:
        _hmac_sha256(digest, kp, kn, p, n)
    return PyBytes_FromStringAndSize(<char *>digest, 32)


def base64_encode(data):
    cdef bytes b = _coerce_bytes(data, "data")
    cdef size_t n = <size_t>PyBytes_GET_SIZE(b)
    cdef size_t cap, out_len
    cdef char *out
    if n == 0:
        return ""
    # mg_base64_encode wants room for the padded output plus a NUL.
    cap = (n + 2) // 3 * 4 + 1
    out = <char *>PyMem_Malloc(cap)
    if out == NULL:
        raise MemoryError()
    try:
        out_len = mg.mg_base64_encode(
            <const unsigned char *>PyBytes_AS_STRING(b), n, out, cap)
        if out_len == 0:
            raise ValueError("base64_encode failed")
        return out[:out_len].decode("ascii")
    finally:
        PyMem_Free(out)


cdef inline bint _b64_char(unsigned char c):
    return (c >= b'A' and c <= b'Z') or (c >= b'a' and c <= b'z') or (
        c >= b'0' and c <= b'9') or c == b'+' or c == b'/'


def base64_decode(str data not None):
    cdef bytes src
    cdef const unsigned char *s
    cdef size_t n, i, pad = 0, cap, out_len
    cdef char *out
    try:
        src = data.encode("ascii")
    except UnicodeEncodeError:
        raise ValueError("invalid base64: non-ASCII character") from None
    n = <size_t>PyBytes_GET_SIZE(src)
    if n == 0:
        return b""
    # Mongoose 7.23 silently drops a trailing partial group and accepts '=' in the middle
    # of the input or before a data character; check the shape here so that bad input is
    # an error rather than quietly wrong bytes.
    if n % 4 != 0:
        raise ValueError(f"invalid base64: length {n} is not a multiple of 4")
    s = <const unsigned char *>PyBytes_AS_STRING(src)
    if s[n - 1] == b'=':
        pad = 2 if s[n - 2] == b'=' else 1
    for i in range(n - pad):
        if not _b64_char(s[i]):
            raise ValueError(f"invalid base64: unexpected character {chr(s[i])!r} at {i}")
    cap = n // 4 * 3 + 1
    out = <char *>PyMem_Malloc(cap)
    if out == NULL:
        raise MemoryError()
    try:
        out_len = mg.mg_base64_decode(<const char *>s, n, out, cap)
        if out_len == 0:
            raise ValueError("invalid base64")
        return PyBytes_FromStringAndSize(out, <Py_ssize_t>out_len)
    finally:
        PyMem_Free(out)


def millis():
    return mg.mg_millis()


def random_bytes(size_t length):
    cdef bytes out
    cdef char *p
    cdef bint ok
    if length > <size_t>PY_SSIZE_T_MAX:
        raise OverflowError("length is too large")
    out = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>length)
    if length == 0:
        return out
    p = PyBytes_AS_STRING(out)
    # May block briefly on the OS entropy source.
    with nogil:
        ok = mg.mg_random(p, length)
    if not ok:
        raise OSError("Mongoose could not obtain random bytes")
    return out


def random_str(size_t length):
    cdef char *buf
    if length == 0:
        return ""
    if length >= <size_t>PY_SSIZE_T_MAX:
        raise OverflowError("length is too large")
    # mg_random_str(buf, len) writes len - 1 characters and a NUL.
    buf = <char *>PyMem_Malloc(length + 1)
    if buf == NULL:
        raise MemoryError()
    try:
        mg.mg_random_str(buf, length + 1)
        return buf[:length].decode("ascii")
    finally:
        PyMem_Free(buf)


def crc32(data, uint32_t initial=0):
    cdef bytes b = _coerce_bytes(data, "data")
    cdef const char *p = PyBytes_AS_STRING(b)
    cdef size_t n = <size_t>PyBytes_GET_SIZE(b)
    cdef uint32_t crc
    if n >= _NOGIL_HASH_MIN:
        with nogil:
            crc = mg.mg_crc32(initial, p, n)
    else:
        crc = mg.mg_crc32(initial, p, n)
    return crc
