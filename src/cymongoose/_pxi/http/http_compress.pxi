# Response compression (issue 39), in the core so every server gets it the same way: raw
# reply()/http_respond()/http_begin() responses, WSGI, ASGI and --static files. Off until
# Manager.set_compression() turns it on. Each request's Accept-Encoding is read once by the
# guard (http_accept_encoding.pxi); each response is then looked at once, as it starts:
#  - a whole body (http_respond, reply) is compressed in one call, without the GIL once it
#    is large, by an encoder the Manager keeps and resets;
#  - a streamed body gets an encoder of its own, and each http_write() goes out compressed
#    and flushed as its own chunk: what the app flushes, the client can decode at once.
# Never compressed (as nginx and Caddy decide): a response that has a Content-Encoding, a
# 206, one with Cache-Control: no-transform, HEAD/204/304 (no body), a Content-Type off the
# allow-list or none, and bodies shorter than min_length when their length is known. Every
# response whose type could be compressed says Vary: Accept-Encoding, compressed or not, so
# a shared cache keeps the variants apart. An app opts one response out with
# `Content-Encoding: identity`, which is then left out of what is sent.

cdef tuple _DEFAULT_COMPRESS_TYPES = (
    "text/", "application/json", "application/javascript", "application/xml",
    "application/x-javascript", "application/wasm", "image/svg+xml", "+json", "+xml")

cdef dict _CODING_NAMES = {"gzip": CODING_GZIP, "zstd": CODING_ZSTD}
cdef bytes _CE_GZIP = b"Content-Encoding: gzip\r\nVary: Accept-Encoding\r\n"
cdef bytes _CE_ZSTD = b"Content-Encoding: zstd\r\nVary: Accept-Encoding\r\n"
cdef bytes _VARY_AE = b"Vary: Accept-Encoding\r\n"


cdef int _set_compression(Manager m, object codings, Py_ssize_t min_length, int gzip_level,
                          int zstd_level, object types) except -1:
    """Manager.set_compression(): check everything, then switch the settings in one step
    (the guard reads them without the GIL between two polls)."""
    cdef int offered = 0
    if codings is None or codings is False:
        m._gil.compress = NULL
        return 0
    if isinstance(codings, str) and codings.strip().lower() == "on":
        # Every coding this build makes (a build without libzstd: gzip alone).
        codings = ("zstd", "gzip") if mg.CYM_ZSTD_BUILT else ("gzip",)
    elif isinstance(codings, str):
        codings = [part.strip() for part in codings.split(",") if part.strip()]
    for name in codings:
        bit = _CODING_NAMES.get(name.lower() if isinstance(name, str) else name)
        if bit is None:
            raise ValueError(f"compression codings are 'zstd' and 'gzip', not {name!r}")
        if bit == CODING_ZSTD and not mg.CYM_ZSTD_BUILT:
            raise ValueError("this build has no zstd (built with CYMONGOOSE_ZSTD=OFF): "
                             "offer 'gzip' only")
        offered |= <int>bit
    if offered == 0:
        raise ValueError("compression needs at least one coding: 'zstd', 'gzip' or both")
    if min_length < 0:
        raise ValueError(f"min_length must be >= 0, not {min_length}")
    if not 1 <= gzip_level <= 9:
        raise ValueError(f"gzip_level must be 1 to 9, not {gzip_level}")
    if not 1 <= zstd_level <= 19:
        raise ValueError(f"zstd_level must be 1 to 19, not {zstd_level}")
    if types is None:
        types = _DEFAULT_COMPRESS_TYPES
    elif isinstance(types, str):
        raise TypeError("types must be a list of MIME types, not one str")
    cdef list entries = []
    for entry in types:
        if not isinstance(entry, str) or not entry or not entry.isascii() or " " in entry \
                or ";" in entry or ("/" not in entry and not entry.startswith("+")):
            raise ValueError(f"compression types are MIME types ('application/json'), "
                             f"prefixes ('text/') or suffixes ('+json'), not {entry!r}")
        entries.append(entry.lower().encode("ascii") + b"\0")
    m._gil.compress = NULL  # nothing reads the old while the new is put in place
    m._compress_types = b"".join(entries) + b"\0"
    m._compress.offered = offered
    m._compress.min_length = <size_t>min_length
    m._compress.gzip_level = gzip_level
    m._compress.zstd_level = zstd_level
    m._compress.types = PyBytes_AS_STRING(m._compress_types)
    m._gil.compress = &m._compress
    return 0


cdef object _compression_dict(Manager m):
    """Manager.compression: the settings as set_compression() took them, or None."""
    if m._gil.compress == NULL:
        return None
    cdef int offered = m._compress.offered
    return {
        "codings": tuple(n for n, bit in (("zstd", CODING_ZSTD), ("gzip", CODING_GZIP))
                         if offered & bit),
        "min_length": m._compress.min_length,
        "gzip_level": m._compress.gzip_level,
        "zstd_level": m._compress.zstd_level,
        "types": tuple(t.decode("ascii") for t in m._compress_types.split(b"\0") if t),
    }


cdef void _free_compression(Manager m) noexcept:
    m._gil.compress = NULL
    while m._gil.stream_encoders_n > 0:
        m._gil.stream_encoders_n -= 1
        mg.cym_encoder_free(<mg.cym_encoder *>m._gil.stream_encoders[m._gil.stream_encoders_n])
        free(m._gil.stream_encoders[m._gil.stream_encoders_n])
    mg.cym_encoder_free(&m._whole_gzip)
    mg.cym_encoder_free(&m._whole_zstd)
    mg.cym_out_free(&m._whole_out)


cdef inline void _note_coding(mg.mg_connection *c, HttpGuard *g, const char *ae,
                              size_t ae_len) noexcept nogil:
    """The guard, as a request head is taken: the coding its response may use (0: none)."""
    cdef const CompressConf *conf = (<GilSlot *>c.mgr.userdata).compress
    g.coding = _pick_coding(ae, ae_len, conf.offered) if conf != NULL else 0


cdef bint _type_compressible(const CompressConf *conf, const char *p,
                             Py_ssize_t n) noexcept nogil:
    """Whether Content-Type p[:n] is on the allow-list (its parameters ignored)."""
    cdef Py_ssize_t end = 0, k
    cdef size_t elen
    cdef const char *e = conf.types
    while end < n and p[end] != 59:  # ";"
        end += 1
    while end > 0 and (p[end - 1] == 32 or p[end - 1] == 9):
        end -= 1
    k = 0
    while k < end and (p[k] == 32 or p[k] == 9):
        k += 1
    p += k
    end -= k
    while e[0] != 0:
        elen = strlen(e)
        if e[0] == 43:  # "+json": the subtype's suffix
            if <size_t>end > elen and _ascii_casecmp(p + end - elen, e, elen):
                return True
        elif e[elen - 1] == 47:  # "text/": the whole top-level type
            if <size_t>end > elen and _ascii_casecmp(p, e, elen):
                return True
        elif <size_t>end == elen and _ascii_casecmp(p, e, elen):
            return True
        e += elen + 1
    return False


cdef bint _has_token(const char *p, Py_ssize_t n, const char *token, size_t tlen) noexcept:
    """Whether the comma-separated list p[:n] holds `token` (lower-case), case-insensitive;
    a member's parameters (`no-cache="x"`) end it."""
    cdef Py_ssize_t i = 0, start, end
    while i < n:
        while i < n and (p[i] == 32 or p[i] == 9 or p[i] == 44):
            i += 1
        start = i
        while i < n and p[i] != 44 and p[i] != 61 and p[i] != 59 and p[i] != 32 \
                and p[i] != 9:
            i += 1
        end = i
        if <size_t>(end - start) == tlen and _ascii_casecmp(p + start, token, tlen):
            return True
        while i < n and p[i] != 44:
            i += 1
    return False


cdef int _scan_for_compression(object headers, const CompressConf *conf, int *seen,
                               long long *declared) except -1:
    """One pass over a response's (name, value) pairs for what decides its compression."""
    cdef Py_ssize_t nlen, vlen, k
    cdef const char *nptr
    cdef const char *vptr
    for pair in headers:
        name, value = pair
        nptr = _field_bytes(name, &nlen, "names")
        if nlen == 12 and _ascii_casecmp(nptr, b"content-type", 12):
            vptr = _field_bytes(value, &vlen, "values")
            seen[0] |= 1 if _type_compressible(conf, vptr, vlen) else 0
            seen[0] |= 2
        elif nlen == 16 and _ascii_casecmp(nptr, b"content-encoding", 16):
            vptr = _field_bytes(value, &vlen, "values")
            seen[0] |= 8 if vlen == 8 and _ascii_casecmp(vptr, b"identity", 8) else 4
        elif nlen == 13 and _ascii_casecmp(nptr, b"cache-control", 13):
            vptr = _field_bytes(value, &vlen, "values")
            if _has_token(vptr, vlen, b"no-transform", 12):
                seen[0] |= 16
        elif nlen == 4 and _ascii_casecmp(nptr, b"vary", 4):
            vptr = _field_bytes(value, &vlen, "values")
            if _has_token(vptr, vlen, b"accept-encoding", 15) or \
                    _has_token(vptr, vlen, b"*", 1):
                seen[0] |= 32
        elif nlen == 14 and _ascii_casecmp(nptr, b"content-length", 14):
            vptr = _field_bytes(value, &vlen, "values")
            if 0 < vlen <= 18:
                declared[0] = 0
                for k in range(vlen):
                    if not 48 <= <unsigned char>vptr[k] <= 57:
                        declared[0] = -1  # http_begin() says what is wrong with it
                        break
                    declared[0] = declared[0] * 10 + (vptr[k] - 48)
    return 0


cdef int _compress_plan(Connection conn, object headers, object more_headers,
                        int status_code, Py_ssize_t body_len,
                        long long *declared_out) except -1:
    """What compression does to the response starting now: _CP_* bits. `body_len`: the
    whole body's length (http_respond), or -1 (streamed). `declared_out` (or NULL): the
    app's Content-Length, -1 for none."""
    cdef const CompressConf *conf = (<GilSlot *>conn._c.mgr.userdata).compress
    cdef HttpGuard *g = &conn._guard
    cdef int seen = 0
    cdef long long declared = -1
    if conf == NULL or status_code == 206 or status_code < 200:
        return _CP_NONE
    if headers is not None:
        _scan_for_compression(headers, conf, &seen, &declared)
    if more_headers is not None:
        _scan_for_compression(more_headers if type(more_headers) is not HeaderBlock
                              else (<HeaderBlock>more_headers).pairs, conf, &seen,
                              &declared)
    if declared_out != NULL:
        declared_out[0] = declared
    if seen & 8:  # the app's opt-out: nothing changes but that field
        return _CP_SKIP_IDENTITY
    if (seen & (4 | 16)) or not (seen & 1):
        return _CP_NONE
    cdef int vary = _CP_HAS_VARY if seen & 32 else _CP_VARY
    if (g.coding == 0 or (g.flags & _GF_HEAD) or status_code == 204 or status_code == 304):
        return vary
    if body_len < 0:
        body_len = declared
    if 0 <= body_len < <Py_ssize_t>conf.min_length:
        return vary
    return vary | _CP_ENCODE


cdef int _put_coding_fields(mg.mg_connection *c, int coding, int plan) except -1:
    """The fields compression adds to a head: Content-Encoding, then Vary (unless the app's
    own Vary names Accept-Encoding already)."""
    cdef bytes fields
    if plan & _CP_ENCODE:
        fields = _CE_ZSTD if coding == CODING_ZSTD else _CE_GZIP
        # Both lines, or Content-Encoding alone when the app's Vary covers it.
        _put(c, PyBytes_AS_STRING(fields), <size_t>(
            PyBytes_GET_SIZE(fields) - (PyBytes_GET_SIZE(_VARY_AE)
                                        if plan & _CP_HAS_VARY else 0)))
    elif (plan & _CP_VARY) and not (plan & _CP_HAS_VARY):
        _put(c, PyBytes_AS_STRING(_VARY_AE), <size_t>PyBytes_GET_SIZE(_VARY_AE))
    return 0


cdef int _encode_whole(Manager m, int coding, const void *data, size_t n) except -1:
    """Compress a whole body into m._whole_out (its len: the compressed size)."""
    cdef const CompressConf *conf = m._gil.compress
    cdef mg.cym_encoder *e = &m._whole_zstd if coding == CODING_ZSTD else &m._whole_gzip
    cdef int level = conf.zstd_level if coding == CODING_ZSTD else conf.gzip_level
    cdef int r
    m._whole_out.len = 0
    if n >= _COMPRESS_NOGIL_AT:
        with nogil:
            r = mg.cym_encoder_start(e, coding, level, 0)
            if r == 0:
                r = mg.cym_encode(e, data, n, mg.CYM_END, &m._whole_out)
    else:
        r = mg.cym_encoder_start(e, coding, level, 0)
        if r == 0:
            r = mg.cym_encode(e, data, n, mg.CYM_END, &m._whole_out)
    if r != 0:
        mg.cym_encoder_free(e)  # rebuilt from nothing next time
        raise MemoryError("out of memory compressing a response body")
    return 0


cdef void _trim_whole_out(Manager m) noexcept:
    # A large body leaves a large buffer: given back rather than kept for every response.
    if m._whole_out.size > 1 << 20:
        mg.cym_out_free(&m._whole_out)


DEF _STREAM_ENCODERS_KEPT = 8  # GilSlot.stream_encoders' size


cdef int _encoder_open(mg.mg_connection *c, HttpGuard *g) except -1:
    if _encoder_start(c, g) != 0:
        raise MemoryError("out of memory for a response's encoder")
    return 0


cdef int _encoder_start(mg.mg_connection *c, HttpGuard *g) noexcept nogil:
    """A streamed response starts compressed: an encoder of its own, with the smaller window;
    one a finished stream left, reset, when there is one (of its coding, if any). 0, or -1
    without memory (the guard's static answers call it without the GIL)."""
    cdef GilSlot *slot = <GilSlot *>c.mgr.userdata
    cdef const CompressConf *conf = slot.compress
    cdef mg.cym_encoder *e = NULL
    cdef int k, pick = slot.stream_encoders_n - 1
    for k in range(slot.stream_encoders_n):
        if (<mg.cym_encoder *>slot.stream_encoders[k]).coding == g.coding:
            pick = k
            break
    if pick >= 0:
        e = <mg.cym_encoder *>slot.stream_encoders[pick]
        slot.stream_encoders_n -= 1
        slot.stream_encoders[pick] = slot.stream_encoders[slot.stream_encoders_n]
    else:
        e = <mg.cym_encoder *>calloc(1, sizeof(mg.cym_encoder))
        if e == NULL:
            return -1
    if mg.cym_encoder_start(e, g.coding, conf.zstd_level if g.coding == CODING_ZSTD
                            else conf.gzip_level, 1) != 0:
        mg.cym_encoder_free(e)
        free(e)
        return -1
    g.encoder = e
    return 0


cdef void _encoder_close(mg.mg_connection *c, HttpGuard *g) noexcept nogil:
    """The response's encoder is done with: kept for the next stream while there is room
    (not once the Manager is being freed), else freed."""
    cdef mg.cym_encoder *e = g.encoder
    cdef GilSlot *slot = <GilSlot *>c.mgr.userdata if c != NULL and c.mgr != NULL else NULL
    if e == NULL:
        return
    g.encoder = NULL
    if slot != NULL and not slot.finalizing and e.ready and \
            slot.stream_encoders_n < _STREAM_ENCODERS_KEPT:
        slot.stream_encoders[slot.stream_encoders_n] = <void *>e
        slot.stream_encoders_n += 1
        return
    mg.cym_encoder_free(e)
    free(e)


cdef int _encode_piece(mg.mg_connection *c, HttpGuard *g, const void *data, size_t n,
                       int mode) noexcept nogil:
    """Compress data[:n] with the response's encoder and queue what comes out, as one chunk
    when the body is chunked; `mode` CYM_KEEP, CYM_FLUSH or CYM_END (cym_compress.h). 0,
    or -1 (no memory: the caller closes the connection, the body being unfinishable)."""
    cdef mg.cym_out out
    cdef int r
    out.buf = NULL
    out.len = out.size = 0
    r = mg.cym_encode(g.encoder, data, n, mode, &out)
    if r == 0 and out.len:
        if g.resp_framing == _RF_CHUNKED:
            r = _queue_chunk(c, out.buf, out.len)
        elif not mg.mg_send(c, out.buf, out.len):
            r = -1
    mg.cym_out_free(&out)
    return r


cdef int _queue_chunk(mg.mg_connection *c, const void *data, size_t n) noexcept nogil:
    cdef char line[24]
    cdef int k = _chunk_size_line(line, n)
    if not mg.mg_send(c, &line[k], <size_t>(23 - k)) or not mg.mg_send(c, data, n) \
            or not mg.mg_send(c, b"\r\n", 2):
        return -1
    return 0


def _compression_libraries():
    """The zlib and libzstd versions linked in (None: built without zstd)."""
    cdef const char *zstd = mg.cym_zstd_version()
    return {"zlib": mg.cym_zlib_version().decode("ascii"),
            "zstd": None if zstd == NULL else zstd.decode("ascii")}
