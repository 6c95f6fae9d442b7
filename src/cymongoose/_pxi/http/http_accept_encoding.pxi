# Accept-Encoding (RFC 9110 section 12.5.3): which content coding a response may use, for
# response compression and for precompressed static files alike. Read in C, once, from the
# header's bytes; any byte out of the grammar makes the whole field read as "identity only",
# which is always a safe answer (a client that sends nonsense gets what it would get from a
# server that compresses nothing).

# The codings the server can produce, as bits; their order of preference on equal q-values
# is zstd, then br, then gzip (smaller output first, as Caddy orders them).
cdef enum:
    CODING_IDENTITY = 0
    CODING_GZIP = 1
    CODING_BR = 2
    CODING_ZSTD = 4

cdef int[3] _CODINGS_BY_PREFERENCE = [CODING_ZSTD, CODING_BR, CODING_GZIP]

cdef enum:
    _AE_IDENTITY = 3  # slots in the q table below
    _AE_STAR = 4
    _AE_SLOTS = 5
    _Q_UNSET = -1


cdef inline bint _ae_space(unsigned char ch) noexcept nogil:
    return ch == 32 or ch == 9


cdef inline bint _ae_tchar(unsigned char ch) noexcept nogil:
    # RFC 9110 token characters
    if (48 <= ch <= 57) or (65 <= ch <= 90) or (97 <= ch <= 122):
        return True
    return ch in b"!#$%&'*+-.^_`|~"


cdef int _ae_slot(const unsigned char *p, size_t n) noexcept nogil:
    """The q-table slot of coding name p[:n] (case-insensitive); -1 for one we do not make."""
    cdef char low[9]
    cdef size_t i
    if n == 0 or n > 8:
        return -1
    for i in range(n):
        low[i] = <char>(p[i] | 0x20) if 65 <= p[i] <= 90 else <char>p[i]
    if n == 4 and memcmp(low, b"gzip", 4) == 0:
        return 0
    if n == 6 and memcmp(low, b"x-gzip", 6) == 0:  # RFC 9110 8.4.1.3: the same coding
        return 0
    if n == 2 and memcmp(low, b"br", 2) == 0:
        return 1
    if n == 4 and memcmp(low, b"zstd", 4) == 0:
        return 2
    if n == 8 and memcmp(low, b"identity", 8) == 0:
        return _AE_IDENTITY
    if n == 1 and low[0] == b"*":
        return _AE_STAR
    return -1


cdef int _ae_qvalue(const unsigned char *p, size_t n) noexcept nogil:
    """A qvalue ("0", "0.5", "1.000") as thousandths; -1 if it is not one."""
    cdef int q, scale = 100
    cdef size_t i
    if n == 0 or n > 5 or (p[0] != 48 and p[0] != 49):
        return -1
    q = (p[0] - 48) * 1000
    if n == 1:
        return q
    if p[1] != 46:  # "."
        return -1
    for i in range(2, n):
        if not (48 <= p[i] <= 57):
            return -1
        q += (p[i] - 48) * scale
        scale //= 10
    return q if q <= 1000 else -1


cdef int _pick_coding(const char *header, size_t n, int offered) noexcept nogil:
    """The coding (a CODING_* bit in `offered`) the client takes most gladly, ties going
    to zstd, then br, then gzip; CODING_IDENTITY when it takes none of them, prefers the
    identity, or the field is malformed. `header` NULL: no Accept-Encoding, identity (a
    client that says nothing gets what it can surely read)."""
    cdef const unsigned char *p = <const unsigned char *>header
    cdef int q[_AE_SLOTS]
    cdef size_t i = 0, start, end
    cdef int slot, value, k, coding, best = CODING_IDENTITY, best_q = 0, identity_q
    if header == NULL or offered == 0:
        return CODING_IDENTITY
    for k in range(_AE_SLOTS):
        q[k] = _Q_UNSET
    while i < n:
        while i < n and (_ae_space(p[i]) or p[i] == 44):  # empty list elements are allowed
            i += 1
        if i == n:
            break
        start = i
        while i < n and _ae_tchar(p[i]):
            i += 1
        end = i
        if end == start:
            return CODING_IDENTITY
        slot = _ae_slot(p + start, end - start)
        value = 1000
        while i < n and _ae_space(p[i]):
            i += 1
        while i < n and p[i] == 59:  # ";" parameters: only q means anything here
            i += 1
            while i < n and _ae_space(p[i]):
                i += 1
            start = i
            while i < n and _ae_tchar(p[i]):
                i += 1
            if i == start or i == n or p[i] != 61:  # "name=" expected
                return CODING_IDENTITY
            k = i - start
            i += 1
            end = i
            while end < n and _ae_tchar(p[end]):
                end += 1
            if k == 1 and (p[start] | 0x20) == 113:  # "q"
                value = _ae_qvalue(p + i, end - i)
                if value < 0:
                    return CODING_IDENTITY
            elif end == i:
                return CODING_IDENTITY
            i = end
            while i < n and _ae_space(p[i]):
                i += 1
        if i < n and p[i] != 44:
            return CODING_IDENTITY
        # A coding named twice keeps its first weight, as nginx and Caddy read it.
        if slot >= 0 and q[slot] == _Q_UNSET:
            q[slot] = value
    # The identity's own weight, by name or through "*"; unset (-1) when the field gives it
    # none, which states no preference for it over the codings listed.
    identity_q = q[_AE_IDENTITY] if q[_AE_IDENTITY] != _Q_UNSET else q[_AE_STAR]
    for k in range(3):
        coding = _CODINGS_BY_PREFERENCE[k]
        if not (offered & coding):
            continue
        slot = 2 if coding == CODING_ZSTD else (1 if coding == CODING_BR else 0)
        value = q[slot] if q[slot] != _Q_UNSET else q[_AE_STAR]
        if value > best_q:
            best, best_q = coding, value
    # A client that likes the identity better than any coding we offer gets it.
    if best != CODING_IDENTITY and identity_q > best_q:
        return CODING_IDENTITY
    return best


def _pick_content_coding(header, int offered):
    """Tests' window on _pick_coding: `header` bytes or None, `offered` CODING_* bits
    (1 gzip, 2 br, 4 zstd); the coding chosen, 0 for the identity."""
    cdef Py_buffer view
    if header is None:
        return _pick_coding(NULL, 0, offered)
    PyObject_GetBuffer(header, &view, PyBUF_SIMPLE)
    try:
        return _pick_coding(<const char *>view.buf, <size_t>view.len, offered)
    finally:
        PyBuffer_Release(&view)
