# The state of one WSGI request/response and PEP 3333's start_response, for cymongoose.wsgi.
# Per request the Python version cost more than the app it served (a raw WSGI hello runs in
# under 1 us): making the object and checking the app's headers are done here in C, and
# the server's Python subclass adds the rarer paths (streaming, waiting, errors).

# Status line -> (code, None), for the lines whose reason is the core's own. start_response()
# runs on app threads: read with a strong reference (_status_cached), and only ever
# inserted, never replaced, so an entry another thread is reading stays alive.
cdef dict _WSGI_STATUS_CACHE = {}
DEF _WSGI_STATUS_CACHE_MAX = 256

# The app_state word of WSGIExchange: the phase in the low bits, and the timed-out bit.
DEF _APP_QUEUED = 0
DEF _APP_RUNNING = 1
DEF _APP_RETURNED = 2
DEF _APP_PHASE = 3
DEF _APP_TIMED_OUT = 4


cdef object _wsgi_parse_status(object status):
    """(code, reason) of a status line such as "200 OK"; reason None when the core's prebuilt
    status line (http.pxi's _REASONS) says exactly that, so that it is used as it is."""
    if type(status) is not str:
        raise TypeError(f"status must be a str such as '200 OK', not {status!r}")
    cdef str text = <str>status
    if (len(text) < 4 or text[3] != " " or not text[:3].isdigit() or not text[:3].isascii()
            or text[0] == "0"):
        raise ValueError(f"status must be 'NNN Reason', not {status!r}")
    cdef int code = int(text[:3])
    cdef str reason = text[4:]
    if _REASONS.get(code) == reason:
        parsed = (code, None)
        if len(_WSGI_STATUS_CACHE) < _WSGI_STATUS_CACHE_MAX:
            _WSGI_STATUS_CACHE.setdefault(text, parsed)
        return parsed
    return (code, reason)


cdef class WSGIExchange:
    """One request and its response, shared by the loop and the thread running the app.
    Calling it is the app's start_response(); see cymongoose.wsgi. Fields and hooks are
    declared in _mongoose.pxd."""

    __init_subclass__ = classmethod(_check_server_hooks)

    def __cinit__(self, state, Connection conn, dict environ, bint is_head, *args,
                  **kwargs):
        self.state = state
        self.conn = conn
        self.environ = environ
        self.is_head = is_head
        self.declared = -1
        self.stock = DEFAULT_DATE | DEFAULT_SERVER
        self.headers = []

    def __call__(self, status, headers, exc_info=None):
        if exc_info is not None:
            try:
                if self.head_sent:
                    raise exc_info[1].with_traceback(exc_info[2])
            finally:
                exc_info = None
        elif self.status is not None:
            raise AssertionError(
                "start_response() was already called; call it again only with exc_info")
        parsed = None
        if type(status) is str:
            parsed = _WSGI_STATUS_CACHE.get(status)  # a strong reference (see the cache)
        if parsed is None:
            parsed = _wsgi_parse_status(status)
        if type(headers) is not list:
            raise TypeError(f"headers must be a list of (name, value) tuples, not "
                            f"{type(headers).__name__}")
        cdef long long declared = -1
        cdef int stock = DEFAULT_DATE | DEFAULT_SERVER  # _missing_default_headers(), fused
        cdef Py_ssize_t n, k
        cdef const char *p
        for item in <list>headers:
            if type(item) is not tuple or len(<tuple>item) != 2:
                raise TypeError(f"headers must be (name, value) tuples, not {item!r}")
            name = (<tuple>item)[0]
            value = (<tuple>item)[1]
            if type(name) is not str or type(value) is not str:
                raise TypeError(f"header names and values must be str, not {item!r}")
            n = PyUnicode_GET_LENGTH(name)
            if (n != 14 and n != 4 and n != 6) or PyUnicode_KIND(name) != PyUnicode_1BYTE_KIND:
                continue
            p = <const char *>PyUnicode_1BYTE_DATA(name)
            if _is_named(p, n, b"content-length", 14):
                if (PyUnicode_KIND(value) != PyUnicode_1BYTE_KIND
                        or not 0 < PyUnicode_GET_LENGTH(value) <= 18):
                    raise ValueError(f"invalid Content-Length {value!r}")
                p = <const char *>PyUnicode_1BYTE_DATA(value)
                declared = 0
                for k in range(PyUnicode_GET_LENGTH(value)):
                    if not 48 <= <unsigned char>p[k] <= 57:
                        raise ValueError(f"invalid Content-Length {value!r}")
                    declared = declared * 10 + (p[k] - 48)
            else:
                stock &= ~_default_header_bit(p, n)
        self.status = parsed
        self.headers = headers
        self.declared = declared
        self.stock = stock
        return self.write

    def write(self, data):
        """PEP 3333's write() callable: one piece of the body, sent before the app returns."""
        if self.status is None:
            raise AssertionError("write() called before start_response()")
        self.stream(data)

    cpdef stream(self, data):
        raise NotImplementedError("WSGIExchange.stream(): the server's subclass sends the body")

    cpdef feed_input(self):
        raise NotImplementedError(
            "WSGIExchange.feed_input(): the server's subclass feeds wsgi.input")

    cpdef gone(self):
        raise NotImplementedError("WSGIExchange.gone(): the server's subclass ends the exchange")

    def time_out(self):
        """Loop side: mark the exchange timed out (the server answers 504 for it) unless its
        app has returned; the app's phase then: 0 (queued: it will never run), 1 (running:
        its thread is abandoned) or 2 (returned: nothing done). By compare-and-set on the
        word run_batch() moves the phase in, so the answer is the phase the mark went in
        with: a queued app marked here is never started, a returned one never marked."""
        cdef int seen
        while True:
            seen = mg.cym_load_int_sc(&self.app_state)
            if seen & _APP_PHASE == _APP_RETURNED:
                return _APP_RETURNED
            if mg.cym_cas_int(&self.app_state, seen, seen | _APP_TIMED_OUT):
                return seen & _APP_PHASE

    @property
    def app_phase(self):
        return mg.cym_load_int_sc(&self.app_state) & _APP_PHASE

    @property
    def timed_out(self):
        return bool(mg.cym_load_int_sc(&self.app_state) & _APP_TIMED_OUT)

    @property
    def closed(self):
        """The client is gone (set by the loop, read by either side)."""
        return bool(mg.cym_load_int(&self.closed_flag))

    # Flow control (the .pxd's flow_lock): each a few statements under the lock, with no
    # Python call inside. The loop's return whether the app waits (then notify it).
    def flow_ahead(self, long long posted=0):
        """Either side: the body bytes posted and not yet read by the client (queued, and
        the connection's send buffer as the loop saw it last), once the app side has added
        the `posted` bytes it just handed to the loop."""
        cdef long long ahead
        mg.cym_ft_lock(&self.flow_lock)
        self.queued += posted
        ahead = self.queued + self.backlog
        mg.cym_ft_unlock(&self.flow_lock)
        return ahead

    def flow_wrote(self, long long n, long long backlog):
        cdef bint waiting
        mg.cym_ft_lock(&self.flow_lock)
        self.queued -= n
        self.backlog = backlog
        waiting = self.waiting
        mg.cym_ft_unlock(&self.flow_lock)
        return waiting

    def flow_closed(self):
        cdef bint waiting
        mg.cym_ft_lock(&self.flow_lock)
        mg.cym_store_int(&self.closed_flag, 1)
        waiting = self.waiting
        mg.cym_ft_unlock(&self.flow_lock)
        return waiting

    def flow_wait_begin(self, long long low):
        """App side, holding `cond`: whether to wait (the client is behind by more than
        `low` bytes and still there); if so, from now on the loop's flow_wrote() and
        flow_closed() say so, and it notifies `cond`."""
        cdef bint wait
        mg.cym_ft_lock(&self.flow_lock)
        wait = not self.closed_flag and self.queued + self.backlog > low
        self.waiting = wait
        mg.cym_ft_unlock(&self.flow_lock)
        return wait

    def flow_wait_end(self):
        mg.cym_ft_lock(&self.flow_lock)
        self.waiting = False
        mg.cym_ft_unlock(&self.flow_lock)


_SERVER_HOOKS[WSGIExchange] = ("stream", "feed_input", "gone")


@cython.auto_pickle(False)  # threads and locks: nothing to pickle
cdef class WSGITurns:
    """Who owns the loop among the WSGI server's threads: the fields run_batch() reads and
    writes per app; cymongoose.wsgi's subclass (wsgi/turns.py) takes the turns."""

    __init_subclass__ = classmethod(_check_server_hooks)

    cpdef wake_standby(self):
        raise NotImplementedError(
            "WSGITurns.wake_standby(): the server's subclass wakes its standby thread")

    cpdef apps_wait(self):
        raise NotImplementedError(
            "WSGITurns.apps_wait(): the server's subclass starts running apps on threads")


_SERVER_HOOKS[WSGITurns] = ("wake_standby", "apps_wait")

# The owner's inline apps waited when, since the batch started (or the last check), its
# thread slept on its own and spent at least this long and this share of the wall time off
# its CPU, in two such stretches in a row: a database round trip on loopback is 50-200 us.
DEF _WAITED_NS = 40000
DEF _WAITED_SHARE = 8  # off-CPU >= wall / this
# Each look of the standby (every stall_s while apps run) takes the GIL, maybe from the owner
# mid-app: the owner's wait for it back is no app's. A few us on a quiet machine, up to a
# scheduler slice on a busy one: a stretch is judged on its off-CPU time less this much per
# look. Skipping such stretches instead lost apps that wait most of a stall_s: a look fell
# in nearly every one, too short to be taken over, they ran one at a time for good.
DEF _LOOK_NS = 500000
# Checked after the app that ends this long after the last check: a batch of apps that wait
# runs at most about this long on the owner alone before the rest go to the threads. Reading
# the thread's usage is a system call; the clock is not.
DEF _CHECK_EVERY_NS = 150000
# With apps_in_parallel: an inline app that ran this long (with as much CPU time spent
# since the last check), twice in a row, starts the blocking mode, so apps run on the app
# threads at once. Handing a request to an app thread
# costs about 16 us here (WSGI hello, 3.13t GIL off: 115k req/s inline, 41k on the threads);
# a 1.6 ms app ran at 1.9x the requests per second on 2 CPUs (the threads benchmark phase).
DEF _LONG_APP_NS = 100000


cdef inline bint _apps_waited(mg.cym_thread_usage *since, int64_t now_ns,
                              unsigned long standby_looks) noexcept nogil:
    """Whether the owner's thread waited off CPU since `since` (then restarted from now),
    beyond what the standby's `standby_looks` looks meanwhile can explain."""
    cdef mg.cym_thread_usage u
    mg.cym_thread_usage_now(&u)
    cdef int64_t wall = now_ns - since.wall_ns
    cdef int64_t off_cpu = wall - (u.cpu_ns - since.cpu_ns) - <int64_t>standby_looks * _LOOK_NS
    cdef bint waited = (u.sleeps != since.sleeps and off_cpu >= _WAITED_NS
                        and off_cpu * _WAITED_SHARE >= wall)
    since[0] = u
    since.wall_ns = now_ns
    return waited


# The owner's side of WSGITurns, under the object's critical section: the standby thread
# (wsgi/turns.py) sets standby_asleep and then reads current through the fields' accessors,
# which Cython runs under the same critical section when the GIL is off. One lock orders the
# two: the owner sees the standby asleep, or the standby sees the owner's app. With the GIL
# a critical section does nothing, and the GIL keeps these statements whole.
cdef bint _watch_inline(WSGITurns turns, object ex):
    """Set the owner's inline app (None: none); whether the standby sleeps."""
    with cython.critical_section(turns):
        turns.current = ex
        return ex is not None and turns.standby_asleep


cdef bint _owned_by(WSGITurns turns, object me):
    with cython.critical_section(turns):
        return turns.owner is me


cdef unsigned long _standby_looks(WSGITurns turns):
    with cython.critical_section(turns):
        return turns.standby_looks


cdef inline bint _app_start(WSGIExchange ex) noexcept:
    """Queued (or returned and parked, for a resumed response) to running, unless timed out."""
    cdef int seen
    while True:
        seen = mg.cym_load_int_sc(&ex.app_state)
        if seen & _APP_TIMED_OUT:
            return False
        if mg.cym_cas_int(&ex.app_state, seen, _APP_RUNNING):
            return True


cdef inline int _app_returned(WSGIExchange ex) noexcept:
    """Move the app's phase to returned, keeping the timed-out bit; the word as it was."""
    cdef int seen
    while True:
        seen = mg.cym_load_int_sc(&ex.app_state)
        if mg.cym_cas_int(&ex.app_state, seen, (seen & _APP_TIMED_OUT) | _APP_RETURNED):
            return seen


cpdef enum OutboxOp:
    # The steps of a response that app threads queue for the loop (cymongoose.wsgi.state's
    # outbox): drain() writes OUTBOX_WHOLE itself and closes an OUTBOX_FILE's descriptor
    # for a finished exchange; the server's write_step() does the rest.
    OUTBOX_WHOLE = 0  # a whole response: arg is its body
    OUTBOX_BEGIN = 1  # the head of a streamed one
    OUTBOX_WRITE = 2  # a piece of its body
    OUTBOX_FILE = 3  # (descriptor, offset, count) to send; the descriptor is the step's
    OUTBOX_END = 4  # the streamed response is complete
    OUTBOX_ABORT = 5  # it cannot be completed: close the connection
    # The app's iterable is parked until its client drains: arg is (iterable, iterator,
    # context).
    # Passed to write_step() also for a closed exchange, whose iterable must be closed.
    OUTBOX_PARK = 6


@cython.auto_pickle(False)  # a server's live state: nothing to pickle
cdef class WSGILoop(_LoopHandler):
    """The WSGI server's per-request work on the loop thread, in C, because per request the
    Python frames and attribute look-ups it took cost more than a raw WSGI app: calling it is
    the handler of a connection waiting for a request head (it builds the environ and the
    exchange and queues it for the app threads; MG_EV_CLOSE tells the exchange its client
    left), run_batch() runs the queued apps inline on the loop's owner, and drain() writes
    the responses the apps queued. cymongoose.wsgi fills in the fields and keeps the rarer
    paths by overriding the hooks (see _mongoose.pxd)."""

    cymongoose_events = frozenset((MG_EV_HTTP_HDRS, MG_EV_CLOSE))  # @handles() equivalent
    # The hooks are split between mixins (wsgi/responses.py, results.py), declared with
    # `partial=True`: the class combining them is checked.
    __init_subclass__ = classmethod(_check_server_hooks)

    cdef int on_event(self, Connection conn, int ev, object msg) except -1:
        if ev == mg.MG_EV_HTTP_HDRS:
            self._admit(conn, <HttpMessage?>msg)
            return 0
        ex = conn.userdata
        if ex is not None:
            self.live.discard(ex)
            (<WSGIExchange?>ex).gone()
        return 0

    def __call__(self, Connection conn, int ev, msg):
        self.on_event(conn, ev, msg)

    cdef _admit(self, Connection conn, HttpMessage msg):
        cdef dict base = self.base_default
        if len(self.bases) > 1:  # several listeners: the one this client came in on
            local = conn.local_addr
            if local is not None:
                base = self.bases.get(local[1], base)
        cdef dict environ = _wsgi_environ(msg, base, conn, self.root_path)
        cdef WSGIExchange ex = self.exchange_type(self.state, conn, environ,
                                                  environ["REQUEST_METHOD"] == "HEAD")
        if self.clock_requests:
            # The access log's duration and the request deadline start at the head.
            ex.started = time_perf_counter()
        if conn.body_complete:
            environ["wsgi.input"] = (io_BytesIO(conn.body_read()) if conn.body_pending
                                     else self.no_body)
        else:
            ex.input = self.stream_input_type(ex)
            environ["wsgi.input"] = ex.input
            ex.busy = True
            conn.set_handler(self.busy_handler)
            ex.feed_input()
        conn.userdata = ex
        self.live.add(ex)
        self.pending.append(ex)

    def drain(self, outbox, list stock):
        """Write the queued response steps: whole responses here, the rest through
        write_step(); a response the core refuses goes to protocol_error(). `stock` is the
        server's current Date/Server header blocks, indexed by WSGIExchange.stock."""
        cdef WSGIExchange ex
        cdef Connection conn
        cdef int op
        while outbox:
            ex, op, arg = outbox.popleft()
            if mg.cym_load_int(&ex.closed_flag) or ex.finished:
                if op == OUTBOX_FILE:
                    os_close(arg[0])
                elif op == OUTBOX_PARK:
                    self.write_step(ex, op, arg)
                continue
            conn = ex.conn
            try:
                if op != OUTBOX_WHOLE:
                    self.write_step(ex, op, arg)
                    continue
                status = ex.status
                _http_respond(conn, status[0], ex.headers, arg, status[1], stock[ex.stock])
            except Exception as exc:
                self.protocol_error(ex, exc)
                continue
            ex.finished = True
            self.live.discard(ex)
            if self.access_log_on:
                self.log_access(ex)
            if conn.userdata is ex:
                conn.userdata = None
                if ex.busy and not conn.is_closing:
                    conn.set_handler(self.quiet_handler)

    def run_batch(self, WSGITurns turns not None, me, app, slots, bint once=False):
        """The loop's owner `me` runs the queued apps one after another while it owns the
        loop and an app slot is free (see cymongoose.wsgi.turns, _LoopTurns.run_pending);
        `once`: a thread that does not own the loop runs one queued app (apps that block are
        run that way, several at once). The common answer, start_response() and a one-item
        list, is queued whole here; any other result goes to finish_app(), an app that
        raised to app_failed(); a parked response whose client drained (ex.resumed) goes
        to resume_app()."""
        cdef WSGIExchange ex
        cdef mg.cym_thread_usage since
        cdef int64_t now_ns
        cdef int64_t app_started_ns = 0
        cdef int64_t cpu_before_ns
        cdef bint waited
        cdef unsigned long looks = _standby_looks(turns)
        cdef unsigned long looked
        pending = self.pending
        outbox = self.outbox
        if not once:
            mg.cym_thread_usage_now(&since)
        while pending and (once or _owned_by(turns, me)):
            try:
                slots.pop()
            except IndexError:
                break  # every app thread is busy: the rest wait for a free one
            try:
                ex = pending.popleft()
            except IndexError:  # a thread that took the loop over took it
                slots.append(None)
                break
            # To running by compare-and-set: it fails when time_out() marked it first
            # (answered 504 while it waited for a slot, or while parked): never run.
            if not _app_start(ex):
                slots.append(None)
                continue
            if not once and _watch_inline(turns, ex):  # the standby sleeps: must watch it
                turns.wake_standby()
            if self.apps_in_parallel:
                app_started_ns = mg.cym_monotonic_ns()
            try:
                if ex.resumed is not None:  # a parked response whose client drained
                    self.resume_app(ex)
                else:
                    result = app(ex.environ, ex)
                    if (type(result) is list and len(<list>result) == 1
                            and ex.status is not None and not ex.head_queued):
                        body = (<list>result)[0]
                        ex.sent = len(body)
                        ex.head_sent = ex.head_queued = True
                        outbox.append((ex, <int>OUTBOX_WHOLE, body))  # an int, not a member
                    else:
                        self.finish_app(ex, result)
            except BaseException as exc:
                self.app_failed(ex, exc)
            finally:
                if not once:
                    _watch_inline(turns, None)
                if _app_returned(ex) & _APP_TIMED_OUT:
                    self.timed_out_app_returned(ex, slots)
                else:
                    slots.append(None)
            if once:
                break
            now_ns = mg.cym_monotonic_ns()
            if now_ns - since.wall_ns < _CHECK_EVERY_NS and pending:
                continue
            looked = _standby_looks(turns) - looks  # wraps as the field does
            looks = looked + looks
            cpu_before_ns = since.cpu_ns
            waited = _apps_waited(&since, now_ns, looked)
            if self.apps_in_parallel:
                # The last app ran long, and the owner spent as long on its CPU since the
                # last check: it computed (an app preempted on a busy machine runs long
                # too, off CPU, and is not one).
                if (now_ns - app_started_ns < _LONG_APP_NS
                        or since.cpu_ns - cpu_before_ns < _LONG_APP_NS):
                    self.long_before = False
                elif self.long_before:
                    # Twice in a row, with CPUs to spare: the rest of the queue, and what
                    # comes next, run on the app threads, several at once.
                    self.long_before = False
                    turns.apps_wait()
                    break
                else:
                    self.long_before = True
            if not waited:
                self.waited_before = False
            elif self.waited_before:
                # The owner ran apps that wait (a database, a service), twice in a row: the
                # rest of the queue, and what comes next, run on threads, several at once.
                self.waited_before = False
                turns.apps_wait()
                break
            else:
                self.waited_before = True

    cpdef write_step(self, WSGIExchange ex, int op, arg):
        raise NotImplementedError(
            "WSGILoop.write_step(): the server's subclass writes streamed responses")

    cpdef protocol_error(self, WSGIExchange ex, BaseException exc):
        raise NotImplementedError(
            "WSGILoop.protocol_error(): the server's subclass answers a refused response")

    cpdef log_access(self, WSGIExchange ex):
        raise NotImplementedError(
            "WSGILoop.log_access(): the server's subclass writes the access log")

    cpdef finish_app(self, WSGIExchange ex, result):
        raise NotImplementedError(
            "WSGILoop.finish_app(): the server's subclass sends what the app returned")

    cpdef app_failed(self, WSGIExchange ex, BaseException exc):
        raise NotImplementedError(
            "WSGILoop.app_failed(): the server's subclass answers an app that failed")

    cpdef timed_out_app_returned(self, WSGIExchange ex, slots):
        raise NotImplementedError("WSGILoop.timed_out_app_returned(): the server's subclass "
                                  "accounts for abandoned threads")

    cpdef resume_app(self, WSGIExchange ex):
        raise NotImplementedError(
            "WSGILoop.resume_app(): the server's subclass resumes a parked response")


_SERVER_HOOKS[WSGILoop] = ("write_step", "protocol_error", "log_access", "finish_app",
                           "app_failed", "timed_out_app_returned", "resume_app")
