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


cdef inline bint _glob_run_at(const Py_UCS4 *s, size_t slen, const Py_UCS4 *p,
                              size_t a, size_t b, size_t e) noexcept nogil:
    """The run p[a:b] (literals and '?', no '*' or '#') matches s at e."""
    cdef size_t t
    if e > slen or b - a > slen - e:
        return False
    for t in range(b - a):
        if p[a + t] != c'?' and p[a + t] != s[e + t]:
            return False
    return True


cdef list _glob(str text, const Py_UCS4 *s, size_t slen, const Py_UCS4 *p, size_t plen):
    """The captures of s (the characters of `text`) matched against the glob p (`?` one
    character, `*` a run without '/', `#` any run), one per wildcard in pattern order, each
    run as short as a match allows and sliced from `text`; None when s does not match.
    Characters, not UTF-8 bytes: a '?' that took one byte of "é" left a capture of half a
    character (found by fuzzing).

    Not mg_match(): Mongoose 7.23 keeps one backtrack point and checks the byte after a
    failed comparison rather than the one a `*` would take in, so `/api/*/items` matched
    `/api/a/b/items` (found by fuzzing against a reference that tracks the set of pattern
    positions reached), and its capture array overruns on `*` followed by several `?`.
    Here, in O(len(s) x len(p)):
    can[k][j] says whether the pattern from the k-th run-wildcard on matches s[j:], filled
    from the last wildcard back; then one forward pass takes each run at its shortest."""
    cdef size_t nstar = 0, nwild = 0, k, j, e, a, b, m, t, row = slen + 1, w
    cdef size_t *at = NULL  # pattern positions of the '*'/'#' wildcards, then plen
    cdef size_t *cap_start = NULL
    cdef size_t *cap_len = NULL
    cdef size_t *ordinal = NULL  # capture number of each pattern position
    cdef unsigned char *can = NULL
    cdef bint ok, anyrun
    cdef list caps
    for k in range(plen):
        if p[k] == c'*' or p[k] == c'#':
            nstar += 1
        if p[k] == c'*' or p[k] == c'#' or p[k] == c'?':
            nwild += 1
    try:
        at = <size_t *>PyMem_Malloc((nstar + 1) * sizeof(size_t))
        ordinal = <size_t *>PyMem_Malloc((plen + 1) * sizeof(size_t))
        cap_start = <size_t *>PyMem_Malloc((nwild + 1) * sizeof(size_t))
        cap_len = <size_t *>PyMem_Malloc((nwild + 1) * sizeof(size_t))
        if at == NULL or ordinal == NULL or cap_start == NULL or cap_len == NULL:
            raise MemoryError()
        w = 0
        j = 0
        for k in range(plen):
            ordinal[k] = w
            if p[k] == c'*' or p[k] == c'#' or p[k] == c'?':
                w += 1
            if p[k] == c'*' or p[k] == c'#':
                at[j] = k
                j += 1
        at[nstar] = plen
        if nstar == 0:
            if plen != slen or not _glob_run_at(s, slen, p, 0, plen, 0):
                return None
        else:
            if not _glob_run_at(s, slen, p, 0, at[0], 0):
                return None
            # One bit per (wildcard, position): can[k * row + j]. The GIL is kept: patterns
            # are routes, short, and releasing it per call costs more than the loop.
            can = <unsigned char *>calloc(nstar * row // 8 + 1, 1)
            if can == NULL:
                raise MemoryError()
            k = nstar
            while k > 0:
                k -= 1
                a = at[k] + 1
                b = at[k + 1]
                m = b - a
                anyrun = p[at[k]] == c'#'
                j = row
                while j > 0:
                    j -= 1
                    ok = False
                    if _glob_run_at(s, slen, p, a, b, j):
                        if k + 1 == nstar:
                            ok = j + m == slen
                        else:
                            e = (k + 1) * row + j + m
                            ok = (can[e >> 3] >> (e & 7)) & 1
                    if not ok and j < slen and (anyrun or s[j] != c'/'):
                        e = k * row + j + 1
                        ok = (can[e >> 3] >> (e & 7)) & 1
                    if ok:
                        e = k * row + j
                        can[e >> 3] |= <unsigned char>(1 << (e & 7))
            e = at[0]
            if not (can[e >> 3] >> (e & 7)) & 1:
                return None
        # Forward: the head run, then each wildcard as short as can[] allows, then its run.
        for t in range(at[0] if nstar else plen):
            if p[t] == c'?':
                cap_start[ordinal[t]] = t
                cap_len[ordinal[t]] = 1
        j = at[0] if nstar else plen
        for k in range(nstar):
            a = at[k] + 1
            b = at[k + 1]
            m = b - a
            e = j
            while True:
                if _glob_run_at(s, slen, p, a, b, e):
                    if k + 1 == nstar:
                        ok = e + m == slen
                    else:
                        t = (k + 1) * row + e + m
                        ok = (can[t >> 3] >> (t & 7)) & 1
                    if ok:
                        break
                e += 1  # can[k][j] holds, so a run this long (or longer) is allowed
            cap_start[ordinal[at[k]]] = j
            cap_len[ordinal[at[k]]] = e - j
            for t in range(a, b):
                if p[t] == c'?':
                    cap_start[ordinal[t]] = e + t - a
                    cap_len[ordinal[t]] = 1
            j = e + m
        caps = []
        for w in range(nwild):
            caps.append(text[cap_start[w]:cap_start[w] + cap_len[w]])
        return caps
    finally:
        PyMem_Free(at)
        PyMem_Free(ordinal)
        PyMem_Free(cap_start)
        PyMem_Free(cap_len)
        free(can)


def match(str s not None, str pattern not None):
    cdef Py_UCS4 *sp = PyUnicode_AsUCS4Copy(s)
    cdef Py_UCS4 *pp = NULL
    cdef list caps
    try:
        pp = PyUnicode_AsUCS4Copy(pattern)
        caps = _glob(s, sp, <size_t>PyUnicode_GET_LENGTH(s), pp,
                     <size_t>PyUnicode_GET_LENGTH(pattern))
    finally:
        PyMem_Free(sp)
        PyMem_Free(pp)
    if caps is None:
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
