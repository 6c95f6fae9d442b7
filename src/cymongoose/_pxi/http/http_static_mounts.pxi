# Static mounts (Manager.set_static_mounts, the servers' --static): the guard answers a
# request whose path is under a mount itself, in C and without the GIL, as it answers the
# health path (http_health.pxi): after the head is validated, before the reverse proxy and
# limit_concurrency look (a file takes no app slot). What it answers is what
# static_file_response() (http_static.pxi) answers, field for field, and the lookup is the
# one static_files.py does for its middlewares:
# - the path is percent-decoded (an invalid escape stays as it is, as urllib's unquote);
#   the longest mount prefix wins; only GET and HEAD (405 with Allow otherwise);
# - the file is opened beneath the mount's directory (openat2 RESOLVE_BENEATH: the kernel
#   refuses `..` and symlinks that lead out); what it refuses is resolved with realpath(3)
#   and checked to be inside (an absolute symlink may land inside): else 404, index files
#   and precompressed siblings included;
# - a directory URL without its slash is 301 to it (the query kept), one with it serves its
#   index.html (404 without one: never a listing), a file URL with a slash is 404;
# - Content-Type is Mongoose's guess from the extension, as serve_dir's; an extension its
#   small table does not know (wasm, woff2, xml...) is looked up in Python's mimetypes
#   table, copied when the mounts are set (what the --static middleware used), and is
#   application/octet-stream when neither knows it (nginx's default_type).
# On plain TCP with nothing queued, the head goes to the socket at once (MSG_MORE) and the
# body follows by sendfile(2), pumped as http_sendfile()'s (http_response.pxi _pump_file,
# which ends the response when the file is out). Otherwise (TLS, HTTP/2, answers queued
# before it) the head goes into c->send and a body up to _SM_INLINE bytes is read in behind
# it; a larger one is pumped. With compression on (http_compress.pxi), a file without a
# chosen sibling whose type is on the list is compressed as the Python path compresses it:
# chunked, weak ETag, encoded piece by piece by the pump.

cdef enum:
    _SM_PATH_MAX = 4096
    _SM_HEAD_BUF = 2048
    _SM_INLINE = 65536  # bodies up to this size go out from c->send, copied once
    _SM_RANGE_FIELD_MAX = 1024  # as _STATIC_RANGE_FIELD_MAX: a longer Range is ignored


cdef struct StaticMount:
    const char *prefix  # the URL prefix, decoded, without its trailing slash ("" for "/")
    size_t prefix_len
    const char *dir  # the directory, resolved; no trailing slash unless it is "/"
    size_t dir_len
    int dirfd  # the directory, open: paths are opened beneath it (cym_open_beneath)


cdef struct StaticType:
    const char *ext  # lower-case, without the dot
    size_t ext_len
    const char *ctype
    size_t ctype_len


cdef struct StaticMounts:
    StaticMount *mounts  # longest prefix first
    int n
    const char *extra  # "Name: value\r\n" lines added to every answer (Server)
    size_t extra_len
    StaticType *types  # Python's mimetypes table, sorted by extension (_sm_content_type)
    int n_types


@cython.final
@cython.auto_pickle(False)
cdef class _StaticTable:
    """Owns a StaticMounts and the bytes it points into; GilSlot.static_mounts points at
    `t` while the Manager holds it (Manager._static_table)."""

    cdef StaticMounts t
    cdef list keep
    cdef tuple pairs  # (url prefix, directory) as set, for Manager.static_mounts
    cdef bytes extra

    def __dealloc__(self):
        cdef int i
        if self.t.mounts != NULL:
            for i in range(self.t.n):
                if self.t.mounts[i].dirfd >= 0:
                    mg.close(self.t.mounts[i].dirfd)
            free(self.t.mounts)
        free(self.t.types)


cdef int _set_static_mounts(Manager m, object mounts, object headers) except -1:
    """Manager.set_static_mounts(): check everything, then switch in one step."""
    cdef list entries = []
    cdef set seen = set()
    cdef HeaderBlock block
    cdef _StaticTable table
    cdef int i
    if mounts is None:
        m._gil.static_mounts = NULL
        m._static_table = None
        return 0
    if isinstance(mounts, (str, bytes)):
        raise TypeError("mounts must be a list of (url_prefix, directory) pairs, not a "
                        f"{type(mounts).__name__}")
    for item in mounts:
        try:
            prefix, directory = item
        except (TypeError, ValueError):
            raise TypeError(f"each static mount is a (url_prefix, directory) pair, not "
                            f"{item!r}") from None
        if not isinstance(prefix, str):
            raise TypeError(f"a static mount's url_prefix must be a str, not "
                            f"{type(prefix).__name__}")
        if not prefix.startswith("/") or any(ch in prefix for ch in "?#%\0") or \
                any(ord(ch) <= 32 or ord(ch) == 127 for ch in prefix):
            raise ValueError(f"a static mount's url_prefix must be a path starting with "
                             f"'/', without spaces, '?', '#' or '%', not {prefix!r}")
        try:
            path = os_fspath(directory)
        except TypeError:
            raise TypeError(f"static mount {prefix!r}: the directory must be a str or a "
                            f"path, not {type(directory).__name__}") from None
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        real = os_path_realpath(path)
        if not os.path.isdir(real):
            raise ValueError(f"static mount {prefix!r}: {path!r} is not a directory")
        prefix = prefix.rstrip("/") or "/"
        if prefix in seen:
            raise ValueError(f"static mount {prefix!r} is given twice")
        seen.add(prefix)
        entries.append((prefix, real))
    if headers is None:
        headers = ()
    block = headers if type(headers) is HeaderBlock else HeaderBlock(headers)
    if block.has_connection:
        raise ValueError("static answers' headers cannot hold Connection: the guard sets it "
                         "for each request")
    if not entries:
        m._gil.static_mounts = NULL
        m._static_table = None
        return 0
    table = _StaticTable.__new__(_StaticTable)
    table.keep = []
    table.pairs = tuple(entries)
    table.extra = block.lines
    table.t.mounts = <StaticMount *>calloc(len(entries), sizeof(StaticMount))
    if table.t.mounts == NULL:
        raise MemoryError("out of memory for the static mounts")
    for i in range(len(entries)):
        table.t.mounts[i].dirfd = -1
    table.t.n = len(entries)
    table.t.extra = PyBytes_AS_STRING(table.extra)
    table.t.extra_len = <size_t>PyBytes_GET_SIZE(table.extra)
    _sm_copy_types(table)
    i = 0
    for prefix, real in sorted(entries, key=lambda e: len(e[0].encode("utf-8")),
                               reverse=True):
        bprefix = b"" if prefix == "/" else prefix.encode("utf-8")
        bdir = os.fsencode(real)
        table.keep.append(bprefix)
        table.keep.append(bdir)
        table.t.mounts[i].prefix = PyBytes_AS_STRING(bprefix)
        table.t.mounts[i].prefix_len = <size_t>len(bprefix)
        table.t.mounts[i].dir = PyBytes_AS_STRING(bdir)
        table.t.mounts[i].dir_len = <size_t>len(bdir)
        table.t.mounts[i].dirfd = mg.open_read(bdir, mg.O_RDONLY | mg.O_DIRECTORY | mg.O_CLOEXEC)
        if table.t.mounts[i].dirfd < 0:
            raise OSError(errno, f"static mount {prefix!r}: cannot open {real!r}: "
                          f"{os_strerror(errno)}")
        i += 1
    # Switched between two polls (the loop's own thread, or before it runs): the guard reads
    # the table only while it answers, and calls no Python code until it is done with it.
    m._gil.static_mounts = <void *>&table.t
    m._static_table = table
    return 0


cdef int _sm_copy_types(_StaticTable table) except -1:
    """Python's mimetypes table, as the --static middleware read it (text types with
    "; charset=utf-8"), for the extensions Mongoose's own table does not know."""
    import mimetypes
    mimetypes.init()
    cdef list rows = []
    cdef int i
    for ext, ctype in mimetypes.types_map.items():
        key = ext.lstrip(".").lower().encode("ascii", "ignore")
        if not key or len(key) > 15:
            continue
        if ctype.startswith("text/"):
            ctype += "; charset=utf-8"
        rows.append((key, ctype.encode("ascii", "ignore")))
    rows = sorted(dict(rows).items())
    table.t.types = <StaticType *>calloc(len(rows) + 1, sizeof(StaticType))
    if table.t.types == NULL:
        raise MemoryError("out of memory for the static mounts' types")
    for i, (key, ctype) in enumerate(rows):
        table.keep.append(key)
        table.keep.append(ctype)
        table.t.types[i].ext = PyBytes_AS_STRING(key)
        table.t.types[i].ext_len = <size_t>len(key)
        table.t.types[i].ctype = PyBytes_AS_STRING(ctype)
        table.t.types[i].ctype_len = <size_t>len(ctype)
    table.t.n_types = len(rows)
    return 0


cdef mg.mg_str _sm_content_type(const StaticMounts *t, const char *name,
                                size_t n) noexcept nogil:
    """Content-Type for the file name[:n]: see the top of this file."""
    cdef mg.mg_str ct = mg.cym_guess_content_type(mg.mg_str_n(name, n), NULL)
    cdef size_t i = n, k
    cdef char ext[16]
    cdef int lo = 0, hi = t.n_types - 1, mid, r
    while i > 0 and name[i - 1] != c'.' and name[i - 1] != c'/':
        i -= 1
    # Mongoose answers "text/plain; charset=utf-8" for .txt and for what it does not know.
    if ct.len != 25 or memcmp(ct.buf, b"text/plain; charset=utf-8", 25) != 0 or \
            (i > 0 and name[i - 1] == c'.' and n - i == 3 and memcmp(name + i, b"txt", 3) == 0):
        return ct
    ct = mg.mg_str_n(b"application/octet-stream", 24)
    if i == 0 or name[i - 1] != c'.' or n - i == 0 or n - i > 15:
        return ct
    for k in range(n - i):
        ext[k] = name[i + k] + 32 if 65 <= name[i + k] <= 90 else name[i + k]
    while lo <= hi:
        mid = (lo + hi) // 2
        r = memcmp(t.types[mid].ext, ext, t.types[mid].ext_len if t.types[mid].ext_len < n - i
                   else n - i)
        if r == 0:
            r = (t.types[mid].ext_len > n - i) - (t.types[mid].ext_len < n - i)
        if r == 0:
            return mg.mg_str_n(t.types[mid].ctype, t.types[mid].ctype_len)
        if r < 0:
            lo = mid + 1
        else:
            hi = mid - 1
    return ct


cdef tuple _static_mounts_of(Manager m):
    if m._static_table is None:
        return ()
    return (<_StaticTable>m._static_table).pairs


# The answer's head, gathered on the stack and queued with as few mg_send() calls as fit.
cdef struct _SmHead:
    mg.mg_connection *c
    size_t len
    bint oom
    bint flushed  # part of it is in c->send already
    char buf[_SM_HEAD_BUF]


cdef void _sh_flush(_SmHead *h) noexcept nogil:
    if h.len and not mg.mg_send(h.c, h.buf, h.len):
        h.oom = True
    h.len = 0
    h.flushed = True


cdef void _sh_put(_SmHead *h, const void *p, size_t n) noexcept nogil:
    if h.len + n > _SM_HEAD_BUF:
        _sh_flush(h)
        if n > _SM_HEAD_BUF:
            if not mg.mg_send(h.c, p, n):
                h.oom = True
            return
    memcpy(h.buf + h.len, p, n)
    h.len += n


cdef inline void _sh_str(_SmHead *h, const char *s) noexcept nogil:
    _sh_put(h, s, strlen(s))


cdef void _sh_num(_SmHead *h, unsigned long long v, int base) noexcept nogil:
    cdef char w[24]
    cdef int k = 23
    while True:
        w[k] = b"0123456789abcdef"[v % base]
        v //= base
        if v == 0:
            break
        k -= 1
    _sh_put(h, &w[k], <size_t>(24 - k))


cdef const char *_sm_status_line(int status) noexcept nogil:
    if status == 200:
        return b"HTTP/1.1 200 OK\r\n"
    if status == 206:
        return b"HTTP/1.1 206 Partial Content\r\n"
    if status == 301:
        return b"HTTP/1.1 301 Moved Permanently\r\n"
    if status == 304:
        return b"HTTP/1.1 304 Not Modified\r\n"
    if status == 400:
        return b"HTTP/1.1 400 Bad Request\r\n"
    if status == 405:
        return b"HTTP/1.1 405 Method Not Allowed\r\n"
    if status == 416:
        return b"HTTP/1.1 416 Range Not Satisfiable\r\n"
    return b"HTTP/1.1 404 Not Found\r\n"


cdef void _sh_tail(_SmHead *h, HttpGuard *g, const StaticMounts *t) noexcept nogil:
    """Date, the mounts' own fields, Connection as the request requires, the blank line."""
    cdef char date[_DATE_LINE_SIZE]
    _sh_put(h, date, _date_line(date))
    if t.extra_len:
        _sh_put(h, t.extra, t.extra_len)
    if g.flags & _GF_CLOSE:
        _sh_put(h, b"Connection: close\r\n", 19)
    elif g.flags & _GF_KEEPALIVE:
        _sh_put(h, b"Connection: keep-alive\r\n", 24)
    _sh_put(h, b"\r\n", 2)


# Fields of the request the answer reads; found in one pass over the validated head.
cdef struct _SmFields:
    const unsigned char *rng
    size_t rng_len
    const unsigned char *if_range
    size_t if_range_len
    const unsigned char *inm
    size_t inm_len
    const unsigned char *ims
    size_t ims_len
    const unsigned char *ae
    size_t ae_len


cdef inline bint _sm_ows(unsigned char ch) noexcept nogil:
    return ch == 32 or ch == 9


cdef void _sm_trim(const unsigned char **p, size_t *n) noexcept nogil:
    while n[0] and _sm_ows(p[0][0]):
        p[0] += 1
        n[0] -= 1
    while n[0] and _sm_ows(p[0][n[0] - 1]):
        n[0] -= 1


cdef void _sm_read_fields(const unsigned char *p, size_t head_len, _SmFields *f) noexcept nogil:
    """The first of each field (the parser checked the head: CRLF line ends, no folding)."""
    cdef size_t i = 0, s, e, c, vn
    cdef const unsigned char *v
    memset(f, 0, sizeof(_SmFields))
    while i < head_len and p[i] != 10:
        i += 1
    i += 1
    while i < head_len:
        s = i
        e = i
        while e < head_len and p[e] != 13 and p[e] != 10:
            e += 1
        if e == s:
            break
        c = s
        while c < e and p[c] != c':':
            c += 1
        if c < e:
            v = p + c + 1
            vn = e - c - 1
            _sm_trim(&v, &vn)
            if f.rng == NULL and _ieq(p + s, c - s, b"range"):
                f.rng, f.rng_len = v, vn
            elif f.if_range == NULL and _ieq(p + s, c - s, b"if-range"):
                f.if_range, f.if_range_len = v, vn
            elif f.inm == NULL and _ieq(p + s, c - s, b"if-none-match"):
                f.inm, f.inm_len = v, vn
            elif f.ims == NULL and _ieq(p + s, c - s, b"if-modified-since"):
                f.ims, f.ims_len = v, vn
            elif f.ae == NULL and _ieq(p + s, c - s, b"accept-encoding"):
                f.ae, f.ae_len = v, vn
        i = e + 2 if e + 1 < head_len and p[e] == 13 else e + 1


cdef inline int _sm_hexval(unsigned char ch) noexcept nogil:
    if 48 <= ch <= 57:
        return ch - 48
    ch |= 32
    if 97 <= ch <= 102:
        return ch - 87
    return -1


cdef size_t _sm_decode(const unsigned char *p, size_t n, char *out) noexcept nogil:
    """Percent-decode p[:n] into out (n bytes at most); an invalid escape is kept as it is."""
    cdef size_t i = 0, w = 0
    cdef int hi, lo
    while i < n:
        if p[i] == c'%' and i + 2 < n:
            hi = _sm_hexval(p[i + 1])
            lo = _sm_hexval(p[i + 2])
            if hi >= 0 and lo >= 0:
                out[w] = <char>(hi * 16 + lo)
                w += 1
                i += 3
                continue
        out[w] = <char>p[i]
        w += 1
        i += 1
    return w


cdef long long _sm_number(const unsigned char *p, size_t n, bint *ok) noexcept nogil:
    """Decimal digits p[:n] (saturated at 2**62: a huge offset is just past any end)."""
    cdef long long v = 0
    cdef size_t i
    ok[0] = n > 0
    for i in range(n):
        if not 48 <= p[i] <= 57:
            ok[0] = False
            return 0
        if v < (1LL << 58):
            v = v * 10 + (p[i] - 48)
        else:
            v = 1LL << 62
    return v


cdef bint _sm_parse_date(const unsigned char *p, size_t n, long long *out) noexcept nogil:
    """Seconds since the epoch of an IMF-fixdate (_parse_http_date's rules)."""
    cdef const unsigned char *tok[7]
    cdef size_t tlen[7]
    cdef int k = 0, month = -1, m, y, era, yoe, doy, doe
    cdef size_t i = 0, s
    cdef long long day, year, hh, mm, ss
    cdef bint ok
    while i < n:
        while i < n and _sm_ows(p[i]):
            i += 1
        if i >= n:
            break
        s = i
        while i < n and not _sm_ows(p[i]):
            i += 1
        if k == 7:
            return False
        tok[k] = p + s
        tlen[k] = i - s
        k += 1
    if k != 6 or tlen[5] != 3 or memcmp(tok[5], b"GMT", 3) != 0 or tlen[2] != 3:
        return False
    for m in range(12):
        if memcmp(tok[2], _MONTHS + 3 * m, 3) == 0:
            month = m
            break
    # "hh:mm:ss": exactly two colons, three numbers
    if month < 0 or tlen[4] < 5:
        return False
    day = _sm_number(tok[1], tlen[1], &ok)
    if not ok:
        return False
    year = _sm_number(tok[3], tlen[3], &ok)
    if not ok:
        return False
    i = 0
    while i < tlen[4] and tok[4][i] != c':':
        i += 1
    s = i + 1
    while s < tlen[4] and tok[4][s] != c':':
        s += 1
    if i >= tlen[4] or s >= tlen[4]:
        return False
    hh = _sm_number(tok[4], i, &ok)
    if not ok:
        return False
    mm = _sm_number(tok[4] + i + 1, s - i - 1, &ok)
    if not ok:
        return False
    ss = _sm_number(tok[4] + s + 1, tlen[4] - s - 1, &ok)
    if not ok:
        return False
    if not (1 <= day <= 31 and 1900 <= year <= 9999 and 0 <= hh < 24 and 0 <= mm < 60
            and 0 <= ss <= 60):
        return False
    # Days from 1970-01-01 to the civil date (Howard Hinnant's days_from_civil).
    m = month + 1
    y = <int>year - (1 if m <= 2 else 0)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + <int>day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    out[0] = (<long long>era * 146097 + doe - 719468) * 86400 + hh * 3600 + mm * 60 + ss
    return True


cdef bint _sm_none_match(const unsigned char *f, size_t n, const char *etag,
                         size_t elen) noexcept nogil:
    """_none_match(): weak comparison; `*` matches; a malformed list matches nothing."""
    cdef size_t i = 0, start, end
    cdef bint matched = False
    if n == 1 and f[0] == c'*':
        return True
    while i < n:
        while i < n and (_sm_ows(f[i]) or f[i] == c','):
            i += 1
        if i >= n:
            break
        if i + 1 < n and f[i] == c'W' and f[i + 1] == c'/':
            i += 2
        if i >= n or f[i] != c'"':
            return False
        start = i
        end = i + 1
        while end < n and f[end] != c'"':
            end += 1
        if end >= n:
            return False
        if end + 1 - start == elen and memcmp(f + start, etag, elen) == 0:
            matched = True
        i = end + 1
    return matched


cdef int _sm_one_range(const unsigned char *f, size_t n, long long size, long long *first,
                       long long *count) noexcept nogil:
    """_one_range(): 1 and (first, count) for one satisfiable range; 0: unsatisfiable (416);
    -1: no usable Range (the whole file)."""
    cdef size_t eq = 0, i, s, found = 0, dash
    cdef const unsigned char *u
    cdef const unsigned char *spec = NULL
    cdef const unsigned char *a
    cdef const unsigned char *b
    cdef size_t un, spec_len = 0, an, bn, pn
    cdef long long lo, hi
    cdef bint ok_a, ok_b
    if n > _SM_RANGE_FIELD_MAX:
        return -1
    while eq < n and f[eq] != c'=':
        eq += 1
    if eq >= n:
        return -1
    u = f
    un = eq
    _sm_trim(&u, &un)
    if not _ieq(u, un, b"bytes"):
        return -1
    i = eq + 1
    while i <= n:
        s = i
        while i < n and f[i] != c',':
            i += 1
        a = f + s
        pn = i - s
        _sm_trim(&a, &pn)
        if pn:
            found += 1
            spec = a
            spec_len = pn
        i += 1
    if found != 1:
        return -1
    dash = 0
    while dash < spec_len and spec[dash] != c'-':
        dash += 1
    if dash >= spec_len:
        return -1
    a = spec
    an = dash
    _sm_trim(&a, &an)
    b = spec + dash + 1
    bn = spec_len - dash - 1
    _sm_trim(&b, &bn)
    lo = _sm_number(a, an, &ok_a)
    hi = _sm_number(b, bn, &ok_b)
    if (an and not ok_a) or (bn and not ok_b):
        return -1
    if an == 0:
        if bn == 0:
            return -1
        if hi == 0 or size == 0:
            return 0
        if hi > size:
            hi = size
        first[0] = size - hi
        count[0] = hi
        return 1
    if bn and hi < lo:
        return -1  # RFC 9110 14.1.1: invalid, the field is ignored
    if lo >= size:
        return 0
    if not bn or hi > size - 1:
        hi = size - 1
    first[0] = lo
    count[0] = hi - lo + 1
    return 1


cdef bint _sm_if_range_holds(const unsigned char *f, size_t n, const char *etag,
                             size_t elen, long long mtime) noexcept nogil:
    cdef long long since
    if n and f[0] == c'"':
        return n == elen and memcmp(f, etag, elen) == 0
    if n >= 2 and f[0] == c'W' and f[1] == c'/':
        return False  # a weak tag never validates a range (RFC 9110 13.1.5)
    return _sm_parse_date(f, n, &since) and since == mtime


cdef bint _sm_inside(const StaticMount *m, const char *real) noexcept nogil:
    cdef size_t n = strlen(real)
    if m.dir_len == 1:
        return real[0] == c'/'
    return (n >= m.dir_len and memcmp(real, m.dir, m.dir_len) == 0
            and (n == m.dir_len or real[m.dir_len] == c'/'))


cdef int _sm_open_regular(const char *path, mg.file_stat *st) noexcept nogil:
    cdef int fd = mg.open_read(path, mg.O_RDONLY | mg.O_CLOEXEC)
    if fd < 0:
        return -1
    if mg.fstat(fd, st) != 0 or not mg.S_ISREG(st.st_mode):
        mg.close(fd)
        return -1
    return fd


cdef inline bint _sm_safe(unsigned char ch) noexcept nogil:
    # RFC 3986 unreserved and the path's pchar delimiters: what a Location keeps as it is
    # (static_files.py's _PATH_SAFE).
    return ((48 <= ch <= 57) or (65 <= ch <= 90) or (97 <= ch <= 122)
            or memchr(b"/:@!$&'()*+,;=-._~", ch, 18) != NULL)


cdef size_t _sm_text(mg.mg_connection *c, HttpGuard *g, const StaticMounts *t, int status,
                     const char *path, size_t path_len, const unsigned char *query,
                     size_t query_len) noexcept nogil:
    """A short text answer (301, 400, 404, 405), as static_files.py's _text(); the size of
    the body sent. `path` (decoded) and `query` (as sent): a 301's Location."""
    cdef _SmHead h
    cdef const char *body = b"Not Found\n"
    cdef size_t n, i
    cdef char esc[3]
    cdef const CompressConf *conf = (<GilSlot *>c.mgr.userdata).compress
    if status == 301:
        body = b"Moved Permanently\n"
    elif status == 400:
        body = b"Bad Request\n"
    elif status == 405:
        body = b"Method Not Allowed\n"
    n = strlen(body)
    h.c = c
    h.len = 0
    h.oom = False
    h.flushed = False
    _sh_str(&h, _sm_status_line(status))
    _sh_str(&h, b"Content-Type: text/plain; charset=utf-8\r\nContent-Length: ")
    _sh_num(&h, n, 10)
    _sh_put(&h, b"\r\n", 2)
    if status == 405:
        _sh_put(&h, b"Allow: GET, HEAD\r\n", 18)
    elif status == 301:
        _sh_put(&h, b"Location: ", 10)
        esc[0] = c'%'
        for i in range(path_len):
            if _sm_safe(<unsigned char>path[i]):
                _sh_put(&h, path + i, 1)
            else:
                esc[1] = b"0123456789ABCDEF"[<unsigned char>path[i] >> 4]
                esc[2] = b"0123456789ABCDEF"[<unsigned char>path[i] & 15]
                _sh_put(&h, esc, 3)
        _sh_put(&h, b"/", 1)
        if query_len:
            _sh_put(&h, b"?", 1)
            _sh_put(&h, query, query_len)
        _sh_put(&h, b"\r\n", 2)
    if conf != NULL and _type_compressible(conf, b"text/plain", 10):
        # The Python path's plan for a text/plain answer this short: Vary only.
        _sh_put(&h, b"Vary: Accept-Encoding\r\n", 23)
    _sh_tail(&h, g, t)
    _sh_flush(&h)
    if g.flags & _GF_HEAD:
        return 0
    mg.mg_send(c, body, n)
    return n


cdef void _sm_etag(char *w, size_t *n, long long mtime, long long size,
                   const char *coding) noexcept nogil:
    """"<mtime hex>-<size hex>[-coding]" with its quotes, into w (64 bytes)."""
    cdef _SmHead h  # only its buffer: nothing is sent
    h.c = NULL
    h.len = 0
    h.oom = False
    h.flushed = False
    _sh_put(&h, b'"', 1)
    _sh_num(&h, <unsigned long long>mtime, 16)
    _sh_put(&h, b"-", 1)
    _sh_num(&h, <unsigned long long>size, 16)
    if coding != NULL:
        _sh_put(&h, b"-", 1)
        _sh_str(&h, coding)
    _sh_put(&h, b'"', 1)
    memcpy(w, h.buf, h.len)
    n[0] = h.len


cdef int _sm_inline_body(mg.mg_connection *c, int fd, long long offset,
                         size_t count) noexcept nogil:
    """Read count bytes of fd from offset straight into c->send. 0, or -1 (no memory: the
    caller pumps instead) or -2 (the file ended early or failed: the caller closes)."""
    cdef size_t done = 0
    cdef ssize_t r
    if c.send.size - c.send.len < count and \
            not mg.mg_iobuf_resize(&c.send, c.send.len + count):
        return -1
    while done < count:
        r = mg.pread(fd, c.send.buf + c.send.len + done, count - done,
                     <long>(offset + <long long>done))
        if r <= 0:
            if r < 0 and errno == EINTR:
                continue
            return -2
        done += <size_t>r
    c.send.len += count
    return 0


cdef extern from "<sys/socket.h>" nogil:
    ssize_t _sm_send "send"(int fd, const void *buf, size_t n, int flags)
    enum:
        MSG_NOSIGNAL
        MSG_MORE


cdef int _sm_open_in(const StaticMount *m, const char *rel) noexcept nogil:
    """Open `rel` (relative to the mount, NUL-terminated) if it resolves inside the mount:
    the kernel checks it (openat2 RESOLVE_BENEATH, one system call). What that refuses or
    cannot do (a symlink leading out, or an absolute one, which may still land inside;
    no openat2) is resolved with realpath(3) and the prefix checked, as static_files.py
    does. -1 (errno set) when it does not exist or lies outside."""
    cdef int fd = mg.cym_open_beneath(m.dirfd, rel, mg.O_RDONLY | mg.O_CLOEXEC)
    cdef size_t n = strlen(rel)
    cdef char full[_SM_PATH_MAX]
    cdef char real[_SM_PATH_MAX]
    if fd >= 0 or (errno != EXDEV and errno != ELOOP and errno != ENOSYS):
        return fd
    if m.dir_len + 1 + n >= _SM_PATH_MAX:
        return -1
    memcpy(full, m.dir, m.dir_len)
    full[m.dir_len] = c'/'
    memcpy(full + m.dir_len + 1, rel, n + 1)
    if mg.realpath(full, real) == NULL or not _sm_inside(m, real):
        return -1
    return mg.open_read(real, mg.O_RDONLY | mg.O_CLOEXEC)


cdef size_t _sm_file(mg.mg_connection *c, HttpGuard *g, const StaticMounts *t,
                     const StaticMount *m, int fd, mg.file_stat *fst, char *rel,
                     const _SmFields *f, int *status_out) noexcept nogil:
    """static_file_response() for the regular file `fd` (open, fstat'ed into fst), found as
    `rel` in mount m (NUL-terminated, with room for a suffix; its name gives Content-Type
    and its siblings'). Takes `fd`. The answer is queued, or pumping (g.file_fd), when this
    returns; the size of the body it sends."""
    cdef GilSlot *slot = <GilSlot *>c.mgr.userdata
    cdef const CompressConf *conf = slot.compress
    cdef mg.file_stat st = fst[0]
    cdef mg.file_stat sst[3]
    cdef int sfd[3]
    cdef const char *suffix[3]
    cdef const char *names[3]
    cdef int bits[3]
    cdef int k, chosen = -1, offered = 0, coding = CODING_IDENTITY, status, plan = _CP_NONE
    cdef size_t rlen = strlen(rel), elen, lm_len
    cdef const char *coding_name = NULL
    cdef char etag[64]
    cdef char lm[32]
    cdef long long size, mtime, first = 0, count = 0, since
    cdef ssize_t sent
    cdef int picked = -1
    cdef bint not_modified = False, head = (g.flags & _GF_HEAD) != 0
    cdef mg.mg_str ct
    cdef _SmHead h
    # The siblings in the order _SIBLINGS (http_static.pxi) has them. One that resolves
    # out of the mount (a symlink) is not offered.
    suffix[0] = b".zst"
    names[0] = b"zstd"
    bits[0] = CODING_ZSTD
    suffix[1] = b".br"
    names[1] = b"br"
    bits[1] = CODING_BR
    suffix[2] = b".gz"
    names[2] = b"gzip"
    bits[2] = CODING_GZIP
    for k in range(3):
        sfd[k] = -1
        strcpy(rel + rlen, suffix[k])
        # Opened rather than stat'ed: a missing one costs the same failed call, and the
        # one that exists is checked to be inside and to be a regular file on the way.
        sfd[k] = _sm_open_in(m, rel)
        if sfd[k] >= 0 and (mg.fstat(sfd[k], &sst[k]) != 0
                            or not mg.S_ISREG(sst[k].st_mode)):
            mg.close(sfd[k])
            sfd[k] = -1
        if sfd[k] >= 0:
            offered |= bits[k]
    rel[rlen] = 0
    if offered and f.ae != NULL:
        coding = _pick_coding(<const char *>f.ae, f.ae_len, offered)
    for k in range(3):
        if sfd[k] >= 0 and bits[k] == coding:
            chosen = k
        elif sfd[k] >= 0:
            mg.close(sfd[k])
    if chosen >= 0:
        mg.close(fd)
        fd = sfd[chosen]
        st = sst[chosen]
        coding_name = names[chosen]
    # From the extension of the name asked for (not the sibling's).
    ct = _sm_content_type(t, rel, rlen)
    size = st.st_size
    mtime = <long long>st.st_mtime
    _sm_etag(etag, &elen, mtime, size, coding_name)
    lm_len = _imf_fixdate(lm, <_c_time_t>mtime)
    if f.inm != NULL:
        not_modified = _sm_none_match(f.inm, f.inm_len, etag, elen)
    elif f.ims != NULL and _sm_parse_date(f.ims, f.ims_len, &since):
        # A date in the future is no validator (RFC 9110 13.1.3).
        not_modified = since <= <long long>_c_time(NULL) and mtime <= since
    if not_modified:
        status = 304
    else:
        if f.rng != NULL and (f.if_range == NULL or _sm_if_range_holds(
                f.if_range, f.if_range_len, etag, elen, mtime)):
            picked = _sm_one_range(f.rng, f.rng_len, size, &first, &count)
        if picked == 0:
            status = 416
        elif picked == 1:
            status = 206
        else:
            status = 200
            first = 0
            count = size
    # Compression as the Python path plans it (_compress_plan) for these fields: a 304
    # has no Content-Type, a 206 or a sibling's Content-Encoding is never recompressed.
    if conf != NULL and coding_name == NULL and (status == 200 or status == 416):
        if status == 416 or _type_compressible(conf, ct.buf, <Py_ssize_t>ct.len):
            plan = _CP_HAS_VARY if offered else _CP_VARY
            if (status == 200 and g.coding and not head
                    and <unsigned long long>size >= conf.min_length):
                plan |= _CP_ENCODE
    h.c = c
    h.len = 0
    h.oom = False
    h.flushed = False
    _sh_str(&h, _sm_status_line(status))
    if status == 416:
        _sh_str(&h, b"Content-Type: text/plain; charset=utf-8\r\nContent-Length: 0\r\n"
                b"Content-Range: bytes */")
        _sh_num(&h, <unsigned long long>size, 10)
        _sh_put(&h, b"\r\n", 2)
    elif status != 304:
        _sh_put(&h, b"Content-Type: ", 14)
        _sh_put(&h, ct.buf, ct.len)
        _sh_put(&h, b"\r\n", 2)
        if not (plan & _CP_ENCODE):
            _sh_put(&h, b"Content-Length: ", 16)
            _sh_num(&h, <unsigned long long>count, 10)
            _sh_put(&h, b"\r\n", 2)
        if status == 206:
            _sh_put(&h, b"Content-Range: bytes ", 21)
            _sh_num(&h, <unsigned long long>first, 10)
            _sh_put(&h, b"-", 1)
            _sh_num(&h, <unsigned long long>(first + count - 1), 10)
            _sh_put(&h, b"/", 1)
            _sh_num(&h, <unsigned long long>size, 10)
            _sh_put(&h, b"\r\n", 2)
        if coding_name != NULL:
            _sh_put(&h, b"Content-Encoding: ", 18)
            _sh_str(&h, coding_name)
            _sh_put(&h, b"\r\n", 2)
    if offered:
        _sh_put(&h, b"Vary: Accept-Encoding\r\n", 23)
    # Compressed here, the bytes are no longer the ones a strong tag names: weak, as
    # _put_headers makes it.
    if plan & _CP_ENCODE:
        _sh_put(&h, b"ETag: W/", 8)
    else:
        _sh_put(&h, b"ETag: ", 6)
    _sh_put(&h, etag, elen)
    _sh_put(&h, b"\r\nLast-Modified: ", 17)
    _sh_put(&h, lm, lm_len)
    _sh_put(&h, b"\r\n", 2)
    if status == 200 or status == 206:
        _sh_put(&h, b"Accept-Ranges: bytes\r\n", 22)
    if plan & _CP_ENCODE:
        _sh_put(&h, b"Content-Encoding: ", 18)
        _sh_put(&h, b"zstd" if g.coding == CODING_ZSTD else b"gzip", 4)
        _sh_put(&h, b"\r\n", 2)
    if (plan & (_CP_VARY | _CP_ENCODE)) and not (plan & _CP_HAS_VARY):
        _sh_put(&h, b"Vary: Accept-Encoding\r\n", 23)
    if plan & _CP_ENCODE:
        if g.flags & _GF_HTTP10:
            g.resp_framing = _RF_CLOSE  # the close ends the body
            g.flags = (g.flags | _GF_CLOSE) & ~_GF_KEEPALIVE
        else:
            g.resp_framing = _RF_CHUNKED
            _sh_put(&h, b"Transfer-Encoding: chunked\r\n", 28)
    _sh_tail(&h, g, t)
    status_out[0] = status
    if head or status == 304 or status == 416 or count == 0:
        _sh_flush(&h)
        mg.close(fd)
        if plan & _CP_ENCODE:  # an empty file, min_length 0: an empty compressed body
            if _encoder_start(c, g) == 0:
                _finish_response(c, g)
            else:
                c.is_closing = 1
        return 0
    if plan & _CP_ENCODE:
        _sh_flush(&h)
        if _encoder_start(c, g) != 0:
            mg.close(fd)
            _log_event(c, 0, b"out of memory for a static file's encoder")
            c.is_closing = 1
            return 0
    elif (not h.flushed and c.send.len == 0 and not c.is_tls
          and not mg.cym_h2_is_stream(c)):
        # Nothing queued before it: the head goes to the socket now, held back (MSG_MORE)
        # to leave in one segment with the start of the file, which sendfile(2) sends next
        # (_pump_file); what the socket does not take is queued as usual.
        sent = _sm_send(<int><size_t>c.fd, h.buf, h.len, MSG_NOSIGNAL | MSG_MORE)
        if sent < 0:
            sent = 0  # EAGAIN, or an error Mongoose meets on its own write
        _metrics_sent(c, g, <size_t>sent)
        if <size_t>sent < h.len:
            mg.mg_send(c, h.buf + sent, h.len - <size_t>sent)
        g.resp_framing = _RF_LENGTH
    else:
        _sh_flush(&h)
        if <unsigned long long>count <= _SM_INLINE:
            # TLS, HTTP/2, or behind queued answers: read into c->send after the head.
            k = _sm_inline_body(c, fd, first, <size_t>count)
            if k == 0:
                mg.close(fd)
                return <size_t>count
            if k == -2:
                mg.close(fd)
                _log_event(c, 0, b"static file ended early or failed")
                c.is_closing = 1
                return 0
        g.resp_framing = _RF_LENGTH
    # Pumped (http_response.pxi): sendfile(2) once the head is out, or encoded piece by
    # piece; the response ends (_finish_response) with the file's last byte.
    g.resp_left = 0
    g.plain_counted = False
    g.file_fd = fd
    g.file_off = first
    g.file_left = <size_t>count
    g.resp_state = _RS_END_AFTER_FILE
    c.is_resp = 1
    _pump_file(c, g)
    return <size_t>count


cdef bint _static_claim(mg.mg_connection *c, HttpGuard *g, uint64_t now) noexcept nogil:
    """Whether the validated head at the front of c->recv is under a static mount; if so
    it is answered (or its file is being sent) when this returns."""
    cdef GilSlot *slot = <GilSlot *>c.mgr.userdata
    cdef const StaticMounts *t = <const StaticMounts *>slot.static_mounts
    cdef const unsigned char *p = c.recv.buf
    cdef size_t i = 0, ts, te, pe, plen, rest_len, k, body = 0
    cdef char small[1024]
    cdef char *path = small
    cdef char rel[_SM_PATH_MAX]
    cdef const StaticMount *m = NULL
    cdef const char *rest
    cdef int method_ok, fd, status = 404
    cdef bint answered = False, slash
    cdef mg.file_stat st
    cdef _SmFields f
    g.static_quiet = False
    if t == NULL:
        return False
    while i < g.head_len and p[i] != c' ':
        i += 1
    ts = i + 1
    if ts >= g.head_len or p[ts] != c'/':
        return False  # origin-form only: absolute-form and * are the app's
    te = ts
    while te < g.head_len and p[te] != c' ':
        te += 1
    pe = ts
    while pe < te and p[pe] != c'?':
        pe += 1
    plen = pe - ts
    if plen > sizeof(small):
        path = <char *>malloc(plen)
        if path == NULL:
            return False
    plen = _sm_decode(p + ts, plen, path)
    for k in range(<size_t>t.n):
        m = &t.mounts[k]
        if m.prefix_len == 0 or (plen >= m.prefix_len
                                 and memcmp(path, m.prefix, m.prefix_len) == 0
                                 and (plen == m.prefix_len or path[m.prefix_len] == c'/')):
            break
        m = NULL
    if m == NULL:
        if path != small:
            free(path)
        return False
    method_ok = ((i == 3 and memcmp(p, b"GET", 3) == 0)
                 or (i == 4 and memcmp(p, b"HEAD", 4) == 0))
    _metrics_request_start(c, g)
    g.phase = _PH_RESP
    g.deadline_ms = 0
    g.static_quiet = True
    if g.body_kind != _BODY_NONE:
        # Its body is not read: the connection ends after the answer, lingering over it.
        g.flags = (g.flags | _GF_CLOSE) & ~_GF_KEEPALIVE
    rest = path + m.prefix_len
    rest_len = plen - m.prefix_len
    slash = plen > 0 and path[plen - 1] == c'/'
    if not method_ok:
        status = 405
        body = _sm_text(c, g, t, 405, NULL, 0, NULL, 0)
        answered = True
    elif memchr(path, 0, plen) != NULL:
        # The parser refuses "%00" in a path already; a decoded NUL would end the name.
        status = 400
        body = _sm_text(c, g, t, 400, NULL, 0, NULL, 0)
        answered = True
    else:
        while rest_len and rest[0] == c'/':
            rest += 1
            rest_len -= 1
        # Room for "/index.html" and a sibling's suffix after it.
        if rest_len + 16 < _SM_PATH_MAX:
            if rest_len == 0:
                rel[0] = c'.'
                rel[1] = 0
            else:
                memcpy(rel, rest, rest_len)
                rel[rest_len] = 0
            fd = _sm_open_in(m, rel)
            if fd >= 0 and mg.fstat(fd, &st) != 0:
                mg.close(fd)
                fd = -1
            if fd >= 0 and mg.S_ISDIR(st.st_mode):
                mg.close(fd)
                fd = -1
                if not slash:
                    # With the slash, the index page's relative links stay inside.
                    status = 301
                    body = _sm_text(c, g, t, 301, path, plen, p + pe + 1 if pe < te
                                    else NULL, te - pe - 1 if pe < te else 0)
                    answered = True
                else:
                    # Its index.html, resolved and checked like any path (it may be a
                    # symlink); never a listing.
                    if rest_len == 0:
                        strcpy(rel, b"index.html")
                    else:
                        strcpy(rel + rest_len, b"/index.html")
                    fd = _sm_open_in(m, rel)
                    if fd >= 0 and (mg.fstat(fd, &st) != 0 or not mg.S_ISREG(st.st_mode)):
                        mg.close(fd)
                        fd = -1
            elif fd >= 0 and (slash or not mg.S_ISREG(st.st_mode)):
                mg.close(fd)  # a file URL with a slash names no file (nginx)
                fd = -1
            if fd >= 0:
                _sm_read_fields(p, g.head_len, &f)
                body = _sm_file(c, g, t, m, fd, &st, rel, &f, &status)
                answered = True
    if not answered:
        status = 404
        body = _sm_text(c, g, t, 404, NULL, 0, NULL, 0)
    if path != small:
        free(path)
    g.resp_status = status
    if slot.refusal_hook and not slot.finalizing:
        # The access log's record, as for the health answer: the request line is still at
        # the front of c->recv. The GIL is taken back for the rest of the iteration.
        _take_gil_back(slot)
        _report_refusal(c, status, b"static file", 0 if g.flags & _GF_HEAD else body)
    _cut(c, 0, g.head_len)
    return True
