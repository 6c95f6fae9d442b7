# Cutting a request head the guard validated into Mongoose's mg_http_message: for streamed
# bodies (http_stream.pxi, which hands it out itself), and for http_cb, which would otherwise
# parse every head a second time with mg_http_parse() (about 2,300 instructions of a hello
# request: UTF-8 checks per character, a 4 KiB memset, five case-insensitive compares per
# field). build_fixes.py lets cymongoose answer http_cb's parse (cym_http_parse_hook) with
# exactly what mg_http_parse() gives; a head where Mongoose does more than split (bytes above
# 0x7F, which it checks as UTF-8; the repeated fields it refuses; a Content-Length it reads
# otherwise; more fields than the message holds) still goes to mg_http_parse().
# tests/core/test_http_split.py compares the two.

cdef struct HeadFacts:
    # What _split_head() saw that mg_http_parse() would judge: filled when asked for.
    unsigned char high  # every byte of the fields OR-ed: >= 0x80 if any is not ASCII
    int content_length  # times each field came
    int transfer_encoding
    int authorization
    int cookie
    int connection
    const char *cl_value  # the (last) Content-Length value
    size_t cl_len
    bint truncated  # more fields than hm.headers holds


cdef void _split_head(char *p, size_t n, mg.mg_http_message *hm,
                      HeadFacts *facts) noexcept nogil:
    # The guard's _parse_head() has validated p[:n], so this only cuts it into fields (with
    # the request line's single spaces and 8-byte version). Only what is read is written:
    # the rest of hm.headers stays as it was, behind the empty entry that ends the list.
    cdef size_t i = 0, s, k = 0, nlen
    cdef unsigned char high = 0
    hm.message.buf = p
    hm.message.len = n
    hm.head.buf = p
    hm.head.len = n
    hm.body.buf = p + n
    hm.body.len = 0
    while p[i] != 32:
        high |= <unsigned char>p[i]
        i += 1
    hm.method.buf = p
    hm.method.len = i
    s = i + 1
    i = s
    while p[i] != 32:
        i += 1
    hm.uri.buf = p + s
    hm.uri.len = i - s
    hm.query.buf = NULL
    hm.query.len = 0
    for k in range(s, i):
        if p[k] == c'?':
            hm.query.buf = p + k + 1
            hm.query.len = i - k - 1
            hm.uri.len = k - s
            break
    hm.proto.buf = p + i + 1
    hm.proto.len = 8
    i += 11  # " HTTP/x.y\r\n"
    k = 0
    while i + 1 < n and p[i] != 13:
        if k == <size_t>mg.MG_MAX_HTTP_HEADERS:
            if facts != NULL:
                facts.truncated = True
            return
        s = i
        while p[i] != c':':
            high |= <unsigned char>p[i]
            i += 1
        nlen = i - s
        hm.headers[k].name.buf = p + s
        hm.headers[k].name.len = nlen
        i += 1
        while p[i] == 32 or p[i] == 9:
            i += 1
        s = i
        while p[i] != 13:
            high |= <unsigned char>p[i]
            i += 1
        hm.headers[k].value.buf = p + s
        hm.headers[k].value.len = i - s
        while hm.headers[k].value.len and (p[s + hm.headers[k].value.len - 1] == 32 or
                                           p[s + hm.headers[k].value.len - 1] == 9):
            hm.headers[k].value.len -= 1
        if facts != NULL and nlen >= 6 and nlen <= 17:
            _note_field(facts, &hm.headers[k])
        i += 2
        k += 1
    if k < <size_t>mg.MG_MAX_HTTP_HEADERS:
        hm.headers[k].name.buf = NULL
        hm.headers[k].name.len = 0
        hm.headers[k].value.buf = NULL
        hm.headers[k].value.len = 0
    if facts != NULL:
        facts.high = high


cdef inline void _note_field(HeadFacts *facts, const mg.mg_http_header *h) noexcept nogil:
    cdef const unsigned char *name = <const unsigned char *>h.name.buf
    cdef size_t n = h.name.len
    if n == 14 and _ieq(name, n, b"content-length"):
        facts.content_length += 1
        facts.cl_value = h.value.buf
        facts.cl_len = h.value.len
    elif n == 17 and _ieq(name, n, b"transfer-encoding"):
        facts.transfer_encoding += 1
    elif n == 13 and _ieq(name, n, b"authorization"):
        facts.authorization += 1
    elif n == 6 and _ieq(name, n, b"cookie"):
        facts.cookie += 1
    elif n == 10 and _ieq(name, n, b"connection"):
        facts.connection += 1


cdef bint _digits(const char *p, size_t n, size_t *out) noexcept nogil:
    # 1 to 18 digits: read as mg_to_size_t() reads them, with no overflow possible.
    cdef size_t i, v = 0
    if n == 0 or n > 18:
        return False
    for i in range(n):
        if not (c'0' <= p[i] <= c'9'):
            return False
        v = v * 10 + <size_t>(p[i] - c'0')
    out[0] = v
    return True


cdef int _split_as_mongoose(char *p, size_t head_len, mg.mg_http_message *hm) noexcept nogil:
    """mg_http_parse(p, ..., hm) for a head of head_len bytes the guard validated: head_len,
    with hm as mg_http_parse() fills it; -2 when that is for mg_http_parse() to say."""
    cdef HeadFacts facts
    cdef size_t body = 0
    memset(&facts, 0, sizeof(HeadFacts))
    _split_head(p, head_len, hm, &facts)
    if (facts.high >= 0x80 or facts.truncated or facts.content_length > 1
            or facts.transfer_encoding > 1 or facts.authorization > 1 or facts.cookie > 1
            or facts.connection > 1 or (facts.content_length and facts.transfer_encoding)
            or (facts.content_length and not _digits(facts.cl_value, facts.cl_len, &body))
            or hm.uri.len == 0):
        return -2
    hm.body.len = body
    hm.message.len = head_len + body
    return <int>head_len


cdef int _parse_for_http_cb(mg.mg_connection *c, const char *s, size_t len,
                            mg.mg_http_message *hm) noexcept nogil:
    # Only for the request the guard has just validated and handed to http_cb: it sets
    # _GF_IN_PARSER around the call, with the receive buffer cut to that request.
    cdef HttpGuard *g
    cdef int n
    if (c.pfn == <mg.mg_event_handler_t>_http_guard and c.pfn_data != NULL
            and s == <const char *>c.recv.buf):
        g = <HttpGuard *>c.pfn_data
        if (g.flags & _GF_IN_PARSER) and g.head_len and g.head_len <= len:
            n = _split_as_mongoose(<char *>s, g.head_len, hm)
            if n != -2:
                return n
    return mg.mg_http_parse(s, len, hm)


mg.cym_http_parse_hook = _parse_for_http_cb


def _split_agrees(bytes head):
    """For the tests: (whether the split answers for `head`, a whole head the guard
    accepted, and whether it then gives exactly what mg_http_parse() gives)."""
    cdef mg.mg_http_message ours
    cdef mg.mg_http_message theirs
    cdef char *s = PyBytes_AS_STRING(head)
    cdef Py_ssize_t end = head.find(b"\r\n\r\n")
    if end < 0:
        raise ValueError("not a whole head")
    memset(&ours, 0, sizeof(ours))
    cdef int a = _split_as_mongoose(s, <size_t>(end + 4), &ours)
    cdef int b = mg.mg_http_parse(s, <size_t>PyBytes_GET_SIZE(head), &theirs)
    if a == -2:
        return False, True
    return True, a == b and memcmp(&ours, &theirs, sizeof(ours)) == 0
