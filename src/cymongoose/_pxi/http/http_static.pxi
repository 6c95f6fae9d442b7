# Static files, the HTTP half: given a file already found (by Mongoose's URI mapping for
# serve_dir/serve_file, by static_files.py's lookup for --static) and the request's
# conditional and range fields, what to answer. Both paths call static_file_response(), so
# they agree on every status and field; the raw path sends its answer here (_static_send),
# the middlewares through wsgi.file_wrapper and http.response.pathsend. Bodies are never
# read: the answer names a descriptor, an offset and a count for sendfile(2).
#
# Choices (docs/server-behaviour.md, "Static files"):
# - Precompressed siblings x.zst, x.br, x.gz are picked by Accept-Encoding (_pick_coding);
#   every answer about a file that has one carries Vary: Accept-Encoding (nginx gzip_static
#   with gzip_vary on). The sibling is a representation of its own: its own strong ETag
#   ("<mtime>-<size>-<coding>"), Last-Modified and ranges.
# - One range (first-last, first-, -suffix) gets a 206; several get the whole file (200):
#   a multipart body cannot leave through one sendfile(2), browsers and download tools ask
#   for one range at a time, and a many-range request is the classic amplification.
# - ETag as nginx writes it: "<mtime hex>-<size hex>".

DEF _STATIC_RANGE_FIELD_MAX = 1024  # a longer Range field is ignored (the file is sent)

cdef tuple _SIBLINGS = ((CODING_ZSTD, ".zst", "zstd"), (CODING_BR, ".br", "br"),
                        (CODING_GZIP, ".gz", "gzip"))


@cython.final
@cython.auto_pickle(False)
cdef class StaticFileResponse:
    """The answer to a static-file request: status and fields, then either `body` or `count`
    bytes of descriptor `fd` from `offset` (fd -1: no file). The caller owns `fd`."""

    cdef readonly int status
    cdef readonly list headers  # (name, value) str pairs, Date included
    cdef readonly bytes body
    cdef readonly int fd
    cdef readonly long long offset
    cdef readonly long long count
    cdef readonly str path  # the file sent (a precompressed sibling's), or None

    def __repr__(self):
        return (f"StaticFileResponse(status={self.status}, path={self.path!r}, "
                f"offset={self.offset}, count={self.count})")

    def close(self):
        """Close the descriptor (once the file was sent, or when it will not be)."""
        if self.fd >= 0:
            os_close(self.fd)
            self.fd = -1


cdef str _http_date(long long t):
    """IMF-fixdate of `t` (RFC 9110 5.6.7), made in C (no cache: loop threads share none)."""
    cdef char w[32]
    cdef size_t n = _imf_fixdate(w, <_c_time_t>t)
    if n == 0:
        return "Thu, 01 Jan 1970 00:00:00 GMT"
    return w[:n].decode("ascii")


cdef str _date_now():
    return _http_date(_time_now())


cdef str _MONTH_NAMES = "JanFebMarAprMayJunJulAugSepOctNovDec"


cdef object _parse_http_date(str value):
    """Seconds since the epoch of an IMF-fixdate, or None for anything else (the obsolete
    RFC 850 and asctime forms too: a conditional then does not apply, which is safe)."""
    parts = value.split()
    if len(parts) != 6 or parts[5] != "GMT" or len(parts[2]) != 3:
        return None
    month = _MONTH_NAMES.find(parts[2])
    clock = parts[4].split(":")
    if month < 0 or month % 3 or len(clock) != 3:
        return None
    try:
        day, year = int(parts[1]), int(parts[3])
        hh, mm, ss = int(clock[0]), int(clock[1]), int(clock[2])
    except ValueError:
        return None
    if not (1 <= day <= 31 and 1900 <= year <= 9999 and 0 <= hh < 24 and 0 <= mm < 60
            and 0 <= ss <= 60):
        return None
    # Days from 1970-01-01 to the civil date (Howard Hinnant's days_from_civil).
    m = month // 3 + 1
    y = year - (m <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    days = era * 146097 + doe - 719468
    return days * 86400 + hh * 3600 + mm * 60 + ss


cdef str _field_text(object value):
    if value is None:
        return None
    if isinstance(value, bytes):
        return (<bytes>value).decode("latin-1")
    return str(value)


cdef list _entity_tags(str field):
    """The opaque tags of an If-None-Match list, weak ones with their W/ prefix; None when
    the field is malformed (then it is ignored)."""
    cdef list tags = []
    cdef Py_ssize_t i = 0, n = len(field), end
    while i < n:
        while i < n and field[i] in " \t,":
            i += 1
        if i >= n:
            break
        start = i
        if field.startswith("W/", i):
            i += 2
        if i >= n or field[i] != '"':
            return None
        end = field.find('"', i + 1)
        if end < 0:
            return None
        tags.append(field[start:end + 1])
        i = end + 1
    return tags


cdef bint _none_match(str field, str etag):
    """If-None-Match against the current tag: weak comparison (W/ ignored on both), `*`
    matches any current representation."""
    field = field.strip()
    if field == "*":
        return True
    tags = _entity_tags(field)
    if not tags:
        return False
    for tag in tags:
        if (tag[2:] if tag.startswith("W/") else tag) == etag:
            return True
    return False


cdef tuple _one_range(str field, long long size):
    """(first, count) of a single satisfiable byte range; (-1, 0): unsatisfiable (416);
    None: no usable Range (malformed, another unit, several ranges): send the whole file."""
    if len(field) > _STATIC_RANGE_FIELD_MAX:
        return None
    unit, eq, spec = field.partition("=")
    if not eq or unit.strip().lower() != "bytes":
        return None
    specs = [s.strip() for s in spec.split(",")]
    specs = [s for s in specs if s]
    if len(specs) != 1:
        return None
    first_text, dash, last_text = specs[0].partition("-")
    first_text = first_text.strip()
    last_text = last_text.strip()
    if not dash or not (first_text.isdigit() or first_text == "") \
            or not (last_text.isdigit() or last_text == "") \
            or not first_text.isascii() or not last_text.isascii():
        return None
    if first_text == "":
        if last_text == "":
            return None
        suffix = int(last_text)
        if suffix == 0 or size == 0:
            return (-1, 0)
        suffix = min(suffix, size)
        return (size - suffix, suffix)
    first = int(first_text)
    if last_text and int(last_text) < first:
        return None  # RFC 9110 14.1.1: invalid, the field is ignored
    if first >= size:
        return (-1, 0)
    last = int(last_text) if last_text else size - 1
    last = min(last, size - 1)
    return (first, last - first + 1)


cdef bint _if_range_holds(str field, str etag, double mtime):
    """If-Range: the range applies only while the representation is the one the client
    holds: its strong ETag, or exactly its Last-Modified date."""
    field = field.strip()
    if field.startswith('"'):
        return field == etag
    if field.startswith("W/"):
        return False  # a weak tag never validates a range (RFC 9110 13.1.5)
    since = _parse_http_date(field)
    return since is not None and <long long>since == <long long>mtime


cdef StaticFileResponse _static_text(int status, str body, list extra=None):
    cdef StaticFileResponse r = StaticFileResponse.__new__(StaticFileResponse)
    cdef bytes b = body.encode("utf-8")
    r.status = status
    r.headers = [("Content-Type", "text/plain; charset=utf-8"),
                 ("Content-Length", str(len(b)))]
    if extra:
        r.headers.extend(extra)
    r.headers.append(("Date", _date_now()))
    r.body = b
    r.fd = -1
    r.path = None
    return r


cdef long long _time_now():
    return <long long>time_time()


def static_file_response(method, path, content_type, *, range=None, if_range=None,
                         if_none_match=None, if_modified_since=None, accept_encoding=None,
                         within=None):
    cdef str m = _field_text(method)
    if m != "GET" and m != "HEAD":
        return _static_text(405, "Method Not Allowed\n", [("Allow", "GET, HEAD")])
    cdef str fpath = _field_text(path)
    cdef str root = _field_text(within)
    cdef mg.file_stat st
    cdef mg.file_stat sst
    cdef bytes bpath = _path_bytes(fpath)
    cdef int fd = _open_regular(bpath, &st)
    if fd < 0:
        return _static_text(404, "Not Found\n")
    # The siblings that exist (and, under `within`, stay inside it once resolved).
    cdef int offered = 0
    cdef dict siblings = {}
    cdef bytes bcandidate
    for bit, suffix, name in _SIBLINGS:
        bcandidate = bpath + (<str>suffix).encode("ascii")
        if mg.stat_path(bcandidate, &sst) != 0 or not mg.S_ISREG(sst.st_mode):
            continue
        candidate = fpath + suffix
        if root is not None:
            real = os_path_realpath(candidate)
            if not (real == root or real.startswith(root.rstrip(os_sep) + os_sep)):
                continue
        offered |= bit
        siblings[bit] = (candidate, name)
    cdef int coding = CODING_IDENTITY
    cdef bytes ae
    if offered:
        ae = accept_encoding if isinstance(accept_encoding, bytes) else (
            None if accept_encoding is None else str(accept_encoding).encode("latin-1"))
        if ae is not None:
            coding = _pick_coding(<const char *>ae, <size_t>len(ae), offered)
    cdef str sent_path = fpath
    cdef str coding_name = None
    cdef int variant
    if coding != CODING_IDENTITY:
        variant = _open_regular(_path_bytes(siblings[coding][0]), &sst)
        if variant < 0:
            coding = CODING_IDENTITY  # gone between the stat and the open
        else:
            mg.close(fd)
            fd = variant
            st = sst
            sent_path, coding_name = siblings[coding]
    cdef long long size = st.st_size
    cdef double mtime = st.st_mtime
    cdef str etag = (f'"{<long long>mtime:x}-{size:x}-{coding_name}"' if coding_name
                     else f'"{<long long>mtime:x}-{size:x}"')
    cdef str last_modified = _http_date(<long long>mtime)
    cdef long long now = _time_now()
    cdef list validators = [("ETag", etag), ("Last-Modified", last_modified)]
    if offered:
        validators.insert(0, ("Vary", "Accept-Encoding"))
    cdef StaticFileResponse r = StaticFileResponse.__new__(StaticFileResponse)
    r.path = sent_path
    r.body = b""
    r.fd = -1
    cdef str inm = _field_text(if_none_match)
    cdef str ims = _field_text(if_modified_since)
    cdef bint not_modified = False
    if inm is not None:
        not_modified = _none_match(inm, etag)
    elif ims is not None:
        since = _parse_http_date(ims)
        # A date in the future is no validator (RFC 9110 13.1.3).
        not_modified = since is not None and since <= now and <long long>mtime <= since
    if not_modified:
        mg.close(fd)
        r.status = 304
        r.headers = validators + [("Date", _date_now())]
        return r
    cdef str rng = _field_text(range)
    cdef str ifr = _field_text(if_range)
    picked = None
    if rng is not None and (ifr is None or _if_range_holds(ifr, etag, mtime)):
        picked = _one_range(rng, size)
    cdef list head = [("Content-Type", _field_text(content_type))]
    if picked is not None and picked[0] < 0:
        mg.close(fd)
        r.status = 416
        r.headers = [("Content-Type", "text/plain; charset=utf-8"),
                     ("Content-Length", "0"), ("Content-Range", f"bytes */{size}"),
                     *validators, ("Date", _date_now())]
        return r
    if picked is not None:
        r.status = 206
        r.offset, r.count = picked
        head.append(("Content-Length", str(r.count)))
        head.append(("Content-Range", f"bytes {r.offset}-{r.offset + r.count - 1}/{size}"))
    else:
        r.status = 200
        r.offset = 0
        r.count = size
        head.append(("Content-Length", str(size)))
    if coding_name is not None:
        head.append(("Content-Encoding", coding_name))
    head.extend(validators)
    head.append(("Accept-Ranges", "bytes"))
    head.append(("Date", _date_now()))
    r.headers = head
    r.fd = fd
    return r


cdef bytes _path_bytes(str path):
    """A path as the file system takes it (os.fsencode's rule); None with a NUL in it."""
    if path is None or "\0" in path:
        return None
    return path.encode("utf-8", "surrogateescape")


cdef int _open_regular(bytes path, mg.file_stat *st) except -2:
    """A regular file opened for reading, its stat in `st`; -1 when it is not one."""
    cdef int fd
    if path is None:
        return -1
    fd = mg.open_read(path, mg.O_RDONLY | mg.O_CLOEXEC)
    if fd < 0:
        return -1
    if mg.fstat(fd, st) != 0 or not mg.S_ISREG(st.st_mode):
        mg.close(fd)
        return -1
    return fd


cdef object _hm_field(mg.mg_http_message *hm, const char *name):
    cdef mg.mg_str *v = mg.mg_http_get_header(hm, name)
    if v == NULL:
        return None
    return v.buf[:v.len]


cdef list _header_block_pairs(bytes block):
    """serve_dir's extra_headers ("Name: value\r\n" lines, already checked) as pairs."""
    cdef list pairs = []
    for line in block.split(b"\r\n"):
        if line:
            name, _, value = line.partition(b":")
            pairs.append((name.strip(), value.strip()))
    return pairs


cdef StaticFileResponse _static_answer(HttpMessage message, str path, bytes mimes):
    cdef mg.mg_http_message *hm = message._hm
    cdef bytes bpath = path.encode("utf-8", "surrogateescape")
    cdef mg.mg_str ct = mg.cym_guess_content_type(
        mg.mg_str_n(<const char *>bpath, <size_t>len(bpath)),
        <const char *>mimes if len(mimes) else NULL)
    return static_file_response(
        hm.method.buf[:hm.method.len].decode("latin-1"), path,
        ct.buf[:ct.len].decode("latin-1"),
        range=_hm_field(hm, "Range"), if_range=_hm_field(hm, "If-Range"),
        if_none_match=_hm_field(hm, "If-None-Match"),
        if_modified_since=_hm_field(hm, "If-Modified-Since"),
        accept_encoding=_hm_field(hm, "Accept-Encoding"))


cdef int _static_send(Connection conn, StaticFileResponse r, list extra,
                      str what) except -1:
    """Send a static answer on the streamed-response path: sendfile(2) for the file's
    bytes, none for HEAD, 304 and 416 (_http_begin frames them)."""
    try:
        _http_begin(conn, r.status, r.headers, None, extra, -1, what)
        if r.fd >= 0 and r.count > 0:
            _http_sendfile(conn, r.fd, r.offset, r.count)  # takes its own descriptor
        elif r.body:
            _http_write(conn, r.body)
        _http_end(conn)
    finally:
        r.close()
    return 0


cdef int _static_serve_raw(Connection conn, HttpMessage message, str path, bytes extra,
                           bytes mimes, bytes page404, bint found, str what) except -1:
    cdef list extra_pairs = _header_block_pairs(extra)
    cdef StaticFileResponse r
    if found:
        r = _static_answer(message, path, mimes)
        if r.status != 404:
            return _static_send(conn, r, extra_pairs, what)
        r.close()
    if len(page404):
        # The page stands in for the missing file, as a 404 (nginx's error_page keeps it too;
        # Mongoose 7.23 sent it as a 200). Conditionals and ranges do not apply to it.
        r = _static_answer_plain(message, page404.decode("utf-8", "surrogateescape"), mimes)
        if r.status == 200:
            r.status = 404
            return _static_send(conn, r, extra_pairs, what)
        r.close()
    return _static_send(conn, _static_text(404, "Not Found\n"), extra_pairs, what)


cdef StaticFileResponse _static_answer_plain(HttpMessage message, str path, bytes mimes):
    cdef mg.mg_http_message *hm = message._hm
    cdef bytes bpath = path.encode("utf-8", "surrogateescape")
    cdef mg.mg_str ct = mg.cym_guess_content_type(
        mg.mg_str_n(<const char *>bpath, <size_t>len(bpath)),
        <const char *>mimes if len(mimes) else NULL)
    return static_file_response(hm.method.buf[:hm.method.len].decode("latin-1"), path,
                                ct.buf[:ct.len].decode("latin-1"))
