# Health probes (Manager.health_path, Manager.ready): the guard answers a GET or HEAD of the
# health path itself, without the GIL's handler round trip and before limit_concurrency
# looks, so a load balancer sees the server's state even when every app slot is busy.

cdef enum:
    _HEALTH_STARTING = 0  # never ready yet
    _HEALTH_READY = 1
    _HEALTH_DRAINING = 2  # was ready, is stopping

cdef const char *_HEALTH_BODY[3]
_HEALTH_BODY[_HEALTH_STARTING] = b"starting\n"
_HEALTH_BODY[_HEALTH_READY] = b"ok\n"
_HEALTH_BODY[_HEALTH_DRAINING] = b"draining\n"

# One "Content-Length: n\r\n" line per body, so an answer needs no formatting.
cdef const char *_HEALTH_HEAD[3]
_HEALTH_HEAD[_HEALTH_STARTING] = (b"HTTP/1.1 503 Service Unavailable\r\n"
                                  b"Content-Type: text/plain; charset=utf-8\r\n"
                                  b"Cache-Control: no-store\r\nContent-Length: 9\r\n")
_HEALTH_HEAD[_HEALTH_READY] = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n"
                               b"Cache-Control: no-store\r\nContent-Length: 3\r\n")
_HEALTH_HEAD[_HEALTH_DRAINING] = _HEALTH_HEAD[_HEALTH_STARTING]


cdef bint _is_health_probe(mg.mg_connection *c, HttpGuard *g) noexcept nogil:
    """Whether the validated head at the front of c->recv is a GET or HEAD, without a
    body, of exactly the health path (the target before any '?')."""
    cdef GilSlot *slot = <GilSlot *>c.mgr.userdata
    cdef const char *p = <const char *>c.recv.buf
    cdef size_t i, n = slot.health_len
    if slot.health_path == NULL or g.body_kind != _BODY_NONE:
        return False
    if memcmp(p, b"GET ", 4) == 0:
        i = 4
    elif memcmp(p, b"HEAD ", 5) == 0:
        i = 5
    else:
        return False
    # The head is whole and valid: a space ends the target before the head does.
    if i + n >= g.head_len or memcmp(p + i, slot.health_path, n) != 0:
        return False
    return p[i + n] == c' ' or p[i + n] == c'?'


cdef void _answer_health(mg.mg_connection *c, HttpGuard *g, uint64_t now) noexcept nogil:
    """A normal keep-alive response (the request's own Connection rules apply), counted in the
    requests by status but not as refused: a 503 here is the probe's correct answer, not work
    turned away, and counting it would make the refused rate rise whenever a server starts
    or drains. Reported to refusal_handler like the guard's other own answers, since that
    is how the access log sees requests no handler saw."""
    cdef GilSlot *slot = <GilSlot *>c.mgr.userdata
    cdef int state = mg.cym_load_int(&slot.health_state)
    cdef int status = 200 if state == _HEALTH_READY else 503
    cdef const char *body = _HEALTH_BODY[state]
    cdef bint head = (g.flags & _GF_HEAD) != 0
    cdef char date[_DATE_LINE_SIZE]
    mg.mg_send(c, _HEALTH_HEAD[state], strlen(_HEALTH_HEAD[state]))
    mg.mg_send(c, date, _date_line(date))
    if g.flags & _GF_CLOSE:
        mg.mg_send(c, b"Connection: close\r\n", 19)
    elif g.flags & _GF_KEEPALIVE:
        mg.mg_send(c, b"Connection: keep-alive\r\n", 24)
    mg.mg_send(c, b"\r\n", 2)
    if not head:
        mg.mg_send(c, body, strlen(body))
    _metrics_answered(c, g, status, False)
    _take_gil_back(slot)  # _report_refusal takes the GIL with it held: no switch
    _report_refusal(c, status, b"health check", 0 if head else strlen(body))
    _cut(c, 0, g.head_len)
    _response_done(c, g, now)
