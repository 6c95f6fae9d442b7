# Manager: owns one mg_mgr; poll loop (GIL released while waiting), lifecycle, listen/connect,
# lossless cross-thread wakeup.

# Largest payload wakeup() accepts. Payloads travel in an in-process queue, not through the
# datagram pipe (which 0.2.5 silently truncated), so this bound only keeps a runaway
# producer from queueing unbounded single messages.
WAKEUP_MAX_PAYLOAD = 64 * 1024 * 1024

# Default cap on what a raw TCP/UDP or MQTT connection may hold unconsumed in its receive
# buffer. Mongoose's own compile-time cap (3 MiB) is raised in CMakeLists.txt so that HTTP
# bodies obey the runtime max_body_size instead; this keeps the other protocols bounded too.
DEFAULT_MAX_RECV_SIZE = 16 * 1024 * 1024

# Right after traffic, poll() waits up to Manager.linger_ms (default _LINGER_MS) for the next
# request *holding* the GIL (epoll_wait sleeps, it does not spin) for _LINGER_POLLS quiet
# polls before it gives the GIL up to block. With a CPU-busy Python thread in the process,
# giving the GIL up costs a whole switch interval (5 ms) to get it back, so a client that
# answers within a millisecond would otherwise pay 5 ms per round trip. On a truly idle
# server this holds the GIL for at most _LINGER_POLLS x linger_ms after the last request.
# App servers whose threads need the GIL while the loop waits set linger_ms to 0.
# With the GIL off (free threading) there is no switch interval to save, and a thread that
# waits attached holds up every stop-the-world pause (the cyclic GC) of the process: the
# default is 0 there (_default_linger_ms).
DEF _LINGER_MS = 1
DEF _LINGER_POLLS = 2
DEF _MAX_LINGER_MS = 100

cdef tuple _HTTP_SCHEMES = ("http://", "https://", "ws://", "wss://")

cdef int _nofile_raised = 0  # exchanged to 1 by the first listener of any loop


cdef void _raise_open_file_limit() noexcept:
    # A server holds one descriptor per client: raise the soft RLIMIT_NOFILE to the hard
    # limit once, when the first listener opens (Go's runtime does the same at start-up).
    # The soft default (often 1024) would otherwise refuse the 1,021st client with EMFILE.
    if mg.cym_exchange_int_sc(&_nofile_raised, 1):
        return
    try:
        import_resource()
        soft, hard = resource_getrlimit(resource_RLIMIT_NOFILE)
        target = hard
        if hard == resource_RLIM_INFINITY or hard > 1 << 20:
            target = 1 << 20  # Linux refuses more than fs.nr_open (1 Mi by default)
        if soft != resource_RLIM_INFINITY and soft < target:
            resource_setrlimit(resource_RLIMIT_NOFILE, (target, hard))
    except (ImportError, ValueError, OSError) as exc:
        _log.debug("could not raise the open-file limit: %s", exc)


cdef void _on_accept_paused(mg.mg_connection *lsn, int err) noexcept nogil:
    # build_fixes.py calls this from inside mg_mgr_poll() once per EMFILE episode; the
    # GIL may be parked in the slot like for any event.
    _take_gil_back(<GilSlot *>lsn.mgr.userdata)
    _log_accept_paused(lsn, err)


cdef void _log_accept_paused(mg.mg_connection *lsn, int err) noexcept with gil:
    try:
        _log.warning(
            "accept() failed on listener %d: %s; not accepting new connections for 100 ms "
            "(clients wait in the backlog); raise the open-file limit (ulimit -n) to serve "
            "more clients at once", lsn.id, os_strerror(err))
    except BaseException:
        pass


mg.cym_accept_paused_hook = _on_accept_paused


cdef extern from "Python.h":
    int PyErr_CheckSignals() except -1


cdef class Manager:
    """Owns one Mongoose event manager and every connection made through it."""

    def __cinit__(self, *args, **kwargs):
        mg.mg_mgr_init(&self._mgr)
        self._gil.saved = NULL
        self._gil.manager = <void *>self
        self._gil.finalizing = False
        self._gil.linger_ms = _default_linger_ms()
        self._mgr.userdata = <void *>&self._gil
        self._gil.metrics = &self._metrics  # zeroed with the object
        self._closed = False
        self._polling = False
        self._timers = set()
        self._wakeup_queue = collections_deque()
        self._retired_recv = []
        self._caches = LoopCaches()
        self._limits = _DEFAULT_LIMITS
        self._max_recv_size = DEFAULT_MAX_RECV_SIZE

    def __init__(self, handler=None, enable_wakeup=False, error_handler=None):
        self._handler = _check_handler(handler, "handler")
        if error_handler is not None and not callable(error_handler):
            raise TypeError(
                "error_handler must be a callable error_handler(exc) or None, "
                f"not {type(error_handler).__name__}")
        self._error_handler = error_handler
        if enable_wakeup:
            if not mg.mg_wakeup_init(&self._mgr):
                raise RuntimeError("could not create the wakeup socket pair")
            self._wakeup_enabled = True
            # mg_wakeup_init() adds its pipe connection at the head of the list.
            self._wakeup_id = self._mgr.conns.id

    def __dealloc__(self):
        _free_loop_sockets(self)
        _free_compression(self)
        if self._closed:
            return
        # Dropped without close(): free everything, but run no Python handler on an object
        # being destroyed (uvloop's loud rule: warn, then clean up).
        self._gil.finalizing = True
        # Warn only when something was left running (a Manager whose __init__ failed, or
        # that never opened anything, just gives its epoll descriptor back quietly).
        if self._mgr.conns != NULL or self._timers:
            try:
                warnings_warn(
                    "unclosed cymongoose.Manager: call close() or use it as a context manager",
                    ResourceWarning)
            except BaseException:
                pass
        self._release_timers()
        mg.mg_mgr_free(&self._mgr)
        self._closed = True
        _unshare_metrics(self, False)  # after the last MG_EV_CLOSE counted into it
        if self._retired_recv is not None:
            _free_retired_recv(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
        return False

    cdef int _ensure_open(self) except -1:
        if self._closed:
            raise RuntimeError(_MANAGER_CLOSED_MSG)
        return 0

    cdef void _report(self, BaseException exc) noexcept:
        if self._error_handler is None:
            _default_error_handler(exc)
            return
        try:
            self._error_handler(exc)
        except BaseException as handler_exc:
            _default_error_handler(handler_exc)

    @property
    def connections(self):
        cdef list out = []
        cdef mg.mg_connection *c = self._mgr.conns if not self._closed else NULL
        cdef size_t parked = 0
        while c != NULL:
            _add_bound(out, c)
            c = c.next
        # Then the idle ones parked off the list (build_fixes.py PARKING), whose c.next is
        # stale.
        c = mg.cym_parked_at(&self._mgr, 0) if not self._closed else NULL
        while c != NULL:
            _add_bound(out, c)
            parked += 1
            c = mg.cym_parked_at(&self._mgr, parked)
        if not self._closed:
            _add_h2_streams(out, &self._mgr)  # http2.pxi: each stream is a connection too
        out.sort(key=_connection_id)  # creation order: ids only grow
        return tuple(out)

    def _parked(self):
        """How many idle connections wait off the loop's list (build_fixes.py PARKING); for
        the tests."""
        return 0 if self._closed else self._gil.parked.len

    def _skipped(self):
        """How many connections on the loop's list its MG_EV_POLL walk skips for now without
        parking them (build_fixes.py QUIET_SKIP: a response owed, a proxied exchange waiting);
        for the tests."""
        cdef mg.mg_connection *c
        cdef uint64_t now = mg.mg_millis()
        cdef int count = 0
        if self._closed:
            return 0
        c = self._mgr.conns
        while c != NULL:
            if (c.pfn == mg.cym_quiet_pfn and c.pfn_data != NULL and
                    (<mg.cym_quiet *>c.pfn_data).until > now and
                    not (<mg.cym_quiet *>c.pfn_data).park):
                count += 1
            c = c.next
        return count

    @property
    def max_recv_size(self):
        return self._max_recv_size

    @max_recv_size.setter
    def max_recv_size(self, value):
        if type(value) is bool or not isinstance(value, int):
            raise TypeError(f"max_recv_size must be an int, not {type(value).__name__}")
        if value < 1024:
            raise ValueError("max_recv_size must be at least 1024 bytes")
        self._max_recv_size = value

    @property
    def linger_ms(self):
        return self._gil.linger_ms

    @linger_ms.setter
    def linger_ms(self, value):
        if type(value) is bool or not isinstance(value, int):
            raise TypeError(f"linger_ms must be an int, not {type(value).__name__}")
        if not 0 <= value <= _MAX_LINGER_MS:
            raise ValueError(
                f"linger_ms must be between 0 (never wait holding the GIL) and "
                f"{_MAX_LINGER_MS}, not {value}")
        self._gil.linger_ms = value

    @property
    def refusal_handler(self):
        return self._refusal_handler

    @refusal_handler.setter
    def refusal_handler(self, value):
        if value is not None and not callable(value):
            raise TypeError(
                "refusal_handler must be a callable refusal_handler(conn, status, reason, "
                f"request_line, body_size) or None, not {type(value).__name__}")
        self._refusal_handler = value
        self._gil.refusal_hook = value is not None

    @property
    def proxy_log_handler(self):
        return self._proxy_log_handler

    @proxy_log_handler.setter
    def proxy_log_handler(self, value):
        if value is not None and not callable(value):
            raise TypeError(
                "proxy_log_handler must be a callable proxy_log_handler(conn, status, "
                "request_line, body_size, duration_s, referer, user_agent) or None, not "
                f"{type(value).__name__}")
        self._proxy_log_handler = value
        self._gil.proxy_log_hook = value is not None

    @property
    def proxy(self):
        return self._proxy

    @proxy.setter
    def proxy(self, value):
        cdef ProxyTable table
        if value is not None and not isinstance(value, ProxyTable):
            raise TypeError("Manager.proxy takes a ProxyTable (cymongoose.proxy.ReverseProxy "
                            f"builds one) or None, not {type(value).__name__}")
        if value is self._proxy:
            return
        if value is not None:
            table = <ProxyTable>value
            # Claimed by compare-and-set: loops on two threads may be given one table at once.
            if not mg.cym_cas_int(<int *>&table._attached, 0, 1):
                raise ValueError("this ProxyTable serves another Manager: its connection "
                                 "pools belong to one loop")
        if self._proxy is not None:
            # Requests in flight still point into the old table: it lives as long as we do.
            if self._proxy_retired is None:
                self._proxy_retired = []
            self._proxy_retired.append(self._proxy)
        self._proxy = value
        self._gil.proxy = <void *>&(<ProxyTable>value)._conf if value is not None else NULL

    def metrics(self):
        return _manager_metrics(self)

    def share_metrics(self, buffer):
        self._ensure_open()
        _share_metrics(self, buffer)

    def add_metric(self, str name not None, long long delta):
        _add_metric(self, name, delta)

    @property
    def limit_concurrency(self):
        return <long long>self._gil.limit_concurrency

    @limit_concurrency.setter
    def limit_concurrency(self, value):
        if type(value) is bool or not isinstance(value, int):
            raise TypeError(f"limit_concurrency must be an int, not {type(value).__name__}")
        if value < 0:
            raise ValueError(f"limit_concurrency must be 0 (no limit) or more, not {value}")
        self._gil.limit_concurrency = <uint64_t>value

    def set_compression(self, codings="on", *, Py_ssize_t min_length=512,
                        int gzip_level=3, int zstd_level=3, types=None):
        _set_compression(self, codings, min_length, gzip_level, zstd_level, types)

    @property
    def compression(self):
        return _compression_dict(self)

    def set_static_mounts(self, mounts, *, headers=None):
        _set_static_mounts(self, mounts, headers)

    @property
    def static_mounts(self):
        return _static_mounts_of(self)

    @property
    def health_path(self):
        return None if self._health_path is None else self._health_path.decode("latin-1")

    @health_path.setter
    def health_path(self, value):
        cdef bytes raw
        if value is None:
            self._gil.health_path = NULL
            self._gil.health_len = 0
            self._health_path = None
            return
        if not isinstance(value, str):
            raise TypeError(f"health_path must be a str or None, not {type(value).__name__}")
        if not value.startswith("/") or any(ch in value for ch in " ?#\r\n\t\0"):
            raise ValueError(f"health_path must be a path starting with '/' without spaces, "
                             f"'?' or '#', not {value!r}")
        raw = value.encode("latin-1")  # compared with the raw request target
        self._health_path = raw
        self._gil.health_path = <const char *>self._health_path
        self._gil.health_len = <size_t>len(raw)

    @property
    def ready(self):
        return mg.cym_load_int(&self._gil.health_state) == _HEALTH_READY

    @ready.setter
    def ready(self, bint value):
        # Set from any thread (a server's stop()), read by the guard on the loop: atomic.
        # READY -> DRAINING by compare-and-set, so a concurrent ready = True is not undone.
        if value:
            mg.cym_store_int(&self._gil.health_state, _HEALTH_READY)
        else:
            mg.cym_cas_int(&self._gil.health_state, _HEALTH_READY, _HEALTH_DRAINING)

    @property
    def wakeup_id(self):
        return self._wakeup_id if self._wakeup_enabled and not self._closed else 0

    @property
    def dns_server(self):
        if self._closed or self._mgr.dns4.url == NULL:
            return ""  # neutral value once closed, like connections and wakeup_id
        return self._mgr.dns4.url.decode("utf-8", "surrogateescape")

    @dns_server.setter
    def dns_server(self, str url):
        self._ensure_open()
        cdef bytes burl = _utf8_no_nul(url, "dns_server")
        if not url.startswith("udp://"):
            raise ValueError(f"dns_server must be a udp://host:port URL, not {url!r}")
        # Mongoose keeps only the pointer: the bytes live on the Manager. Both the IPv4 and
        # the IPv6 resolver use it, since Mongoose retries a failed A lookup as AAAA via
        # dns6 (which would otherwise still go to its default public server).
        self._dns_url = burl
        self._mgr.dns4.url = <const char *>self._dns_url
        self._mgr.dns6.url = <const char *>self._dns_url
        # Resolver sockets already open keep talking to the old server (dns_sntp.pxi).
        _dns_retire(&self._mgr)

    def poll(self, int timeout_ms=0):
        self._ensure_open()
        # Taken by compare-and-set, before anything else: two threads polling one Manager by
        # mistake (no GIL orders them under free threading) get the error, not a shared loop.
        if not mg.cym_cas_int(<int *>&self._polling, 0, 1):
            # "not reentrant" is the 0.2.x wording, kept so code matching on it still works.
            raise RuntimeError(
                "poll() is not reentrant: it is already running on this Manager (a call from "
                "a handler, or a second thread); only one thread may poll a Manager")
        try:
            self._reap_timers()
            _free_retired_recv(self)  # recv_views.pxi: pinned buffers no view uses any more
            _dns_wrap(&self._mgr)  # dns_sntp.pxi: resolver sockets opened since last poll
        except BaseException:
            mg.cym_store_int_sc(<int *>&self._polling, 0)
            raise
        self._stop_dispatch = False
        cdef bint flowing = self._gil.io_events > 0 or bool(self._wakeup_queue)
        if flowing:
            self._gil.quiet_polls = 0
        elif self._gil.quiet_polls < 1000:
            if self._gil.quiet_polls == 0:
                self._gil.quiet_since_ms = mg.mg_millis()
            self._gil.quiet_polls += 1
        self._gil.io_events = 0
        cdef int wait_ms
        try:
            if (timeout_ms == 0 or flowing or
                    _ready_soon(&self._mgr, self._gil.linger_ms
                                if self._gil.quiet_polls <= _LINGER_POLLS else 0)):
                # Work is at hand: run the iteration holding the GIL. Releasing it here
                # would let a CPU-busy Python thread take it and cost this loop a whole
                # switch interval (5 ms) per iteration: the GIL ping-pong that dropped
                # 0.2.5 to under 100 req/s.
                mg.mg_mgr_poll(&self._mgr, 0)
            else:
                wait_ms = _wait_budget(&self._mgr, timeout_ms)
                self._gil.saved = PyEval_SaveThread()
                if _heap_release_due(&self._gil):
                    _release_heap(&self._gil)
                mg.mg_mgr_poll(&self._mgr, wait_ms)
                if self._gil.saved != NULL:  # no callback ran, so nobody took the GIL back
                    PyEval_RestoreThread(self._gil.saved)
                    self._gil.saved = NULL
            self._deliver_wakeups()
        finally:
            mg.cym_store_int_sc(<int *>&self._polling, 0)
        if self._fatal is not None:
            exc, self._fatal = self._fatal, None
            raise exc
        PyErr_CheckSignals()

    def run(self, int poll_ms=100):
        self._ensure_open()
        stop = []
        previous = {}

        def _request_stop(signum, frame):
            stop.append(signum)

        # Signal handlers can only be set from the main thread; elsewhere run() relies on
        # KeyboardInterrupt raised out of poll().
        if threading_current_thread() is threading_main_thread():
            for signum in (signal_SIGINT, signal_SIGTERM):
                previous[signum] = signal_signal(signum, _request_stop)
        try:
            while not stop and not self._closed:
                self.poll(poll_ms)
        finally:
            for signum, old in previous.items():
                signal_signal(signum, old)
            self.close()

    def close(self):
        if self._closed:
            return
        # Claimed like poll() claims it: handlers run by MG_EV_CLOSE must not poll or close
        # again, and another thread's poll() must not start while the loop is freed.
        if not mg.cym_cas_int(<int *>&self._polling, 0, 1):
            raise RuntimeError(
                "cannot close a Manager while poll() is running; close it after poll() "
                "returns (a handler can call conn.close() or stop the loop instead)")
        # Before mg_mgr_free() closes the wakeup pipe: from here no thread sends into its
        # descriptor, whose number a new socket may take at once.
        with self._wake_lock:
            self._wake_closed = 1
        try:
            self._release_timers()
            mg.mg_mgr_free(&self._mgr)
        finally:
            mg.cym_store_int(<int *>&self._closed, 1)
            mg.cym_store_int_sc(<int *>&self._polling, 0)
            self._wakeup_queue.clear()
            self._http_view = None
            _free_retired_recv(self)
            # Every MG_EV_CLOSE has been counted: the shared buffer may go, and metrics()
            # goes on reading the final counts.
            _unshare_metrics(self, True)
        if self._fatal is not None:
            exc, self._fatal = self._fatal, None
            raise exc

    def listen(self, str url not None, handler=None, *, http=None, stream_body=False,
               http2=None, **limits):
        cdef HttpLimits lim = self._limits
        cdef Connection conn
        cdef bint is_http = url.startswith(_HTTP_SCHEMES) if http is None else bool(http)
        if type(stream_body) is not bool:
            raise TypeError(f"stream_body must be True or False, not {stream_body!r}")
        if stream_body and not is_http:
            raise ValueError("stream_body applies to HTTP listeners only (http://, https://, "
                             "or http=True)")
        lim.stream_body = stream_body
        if http2 is not None:  # else set_http_limits()'s (on by default)
            lim.http2 = _http2_flag(http2)
        if limits:
            # Checked before the socket opens, so a bad value leaves nothing behind.
            _update_limits(&lim, limits)
            if not is_http:
                raise ValueError(
                    "HTTP limits apply to HTTP listeners only (http://, https://, ws://, "
                    "wss://, or http=True)")
        conn = _open(self, url, handler, http, True)
        conn._limits = lim
        return conn

    def set_http_limits(self, **limits):
        self._ensure_open()
        _update_limits(&self._limits, limits)

    @property
    def http_limits(self):
        return _limits_dict(&self._limits)

    def connect(self, str url not None, handler=None, *, http=None):
        return _open(self, url, handler, http, False)

    def ws_connect(self, str url not None, handler=None):
        return _ws_connect(self, url, handler)

    def mqtt_connect(self, str url not None, handler=None, client_id="", username="",
                     password="", clean_session=True, keepalive=60, **kwargs):
        return _mqtt_connect(self, url, handler, client_id, username, password,
                             clean_session, keepalive, kwargs)

    def mqtt_listen(self, str url not None, handler=None):
        return _mqtt_listen(self, url, handler)

    def sntp_connect(self, str url not None, handler=None):
        return _sntp_connect(self, url, handler)

    def timer_add(self, milliseconds, callback, *, repeat=False, run_now=False):
        cdef long long ms = _int_arg(milliseconds, "milliseconds")
        if not -2147483648 <= ms <= 2147483647:
            raise OverflowError(f"milliseconds out of range: {ms}")
        return _timer_add(self, <int>ms, callback, repeat, run_now)

    def wakeup(self, unsigned long connection_id, bytes data=b""):
        if mg.cym_load_int(<int *>&self._closed):  # any thread: see the class comment
            raise RuntimeError(_MANAGER_CLOSED_MSG)
        if not self._wakeup_enabled:
            # False is 0.2.x's answer (API.md), kept; but a wake that can never arrive is a
            # bug to tell: once per calling line, as Python shows a RuntimeWarning.
            warnings_warn("Manager.wakeup() does nothing on this Manager: create it with "
                          "Manager(enable_wakeup=True)", RuntimeWarning, stacklevel=2)
            return False
        if connection_id == 0:
            return False
        if len(data) > WAKEUP_MAX_PAYLOAD:
            raise ValueError(
                f"wakeup payload is {len(data)} bytes; the limit is {WAKEUP_MAX_PAYLOAD}. "
                "Pass large data through your own queue and wake with a small token.")
        self._wakeup_queue.append((connection_id, data))
        return self._send_wake()

    def fileno(self):
        return _loop_fileno(self)  # loop_integration.pxi

    def next_poll_ms(self, int limit_ms=100):
        return _loop_next_poll_ms(self, limit_ms)

    def watch_changes(self):
        return _loop_watch_changes(self)  # loop_sockets.pxi

    def unwatch_all(self):
        return _loop_unwatch_all(self)

    def call_soon_threadsafe(self, callback, *args):
        # The same queue and the same single wake datagram as wakeup(): a burst of calls
        # from app threads costs the loop one wake, and runs in order after the iteration.
        # Connection id 0 is never a connection's, so it marks a callable.
        if not callable(callback):
            raise TypeError(f"callback must be callable, not {type(callback).__name__}")
        if mg.cym_load_int(<int *>&self._closed):
            raise RuntimeError(_MANAGER_CLOSED_MSG)
        if not self._wakeup_enabled:
            raise RuntimeError(
                "call_soon_threadsafe() needs the wakeup channel: create the Manager with "
                "enable_wakeup=True")
        self._wakeup_queue.append((0, (callback, args)))
        self._send_wake()

    def _wake(self):
        # Internal (cymongoose.wsgi's outbox): end the poll wait, delivering nothing; one
        # datagram per burst, like wakeup(). RuntimeError when closed or without wakeup.
        if mg.cym_load_int(<int *>&self._closed):
            raise RuntimeError(_MANAGER_CLOSED_MSG)
        if not self._wakeup_enabled:
            raise RuntimeError("the Manager has no wakeup channel (enable_wakeup=True)")
        self._send_wake()

    cdef bint _send_wake(self) except -1:
        # One datagram wakes the poll; the queue carries the payloads. The flag is set and
        # cleared by seq_cst exchanges (the poll clears it *before* it drains): either this
        # exchange comes first, and the drain that follows the poll's sees the item appended
        # before it, or the poll's comes first, this one reads 0 and sends a fresh datagram.
        # Only the thread that turns it from 0 to 1 sends: a burst costs the loop one wake.
        if mg.cym_exchange_int_sc(&self._wake_pending, 1):
            return True
        with self._wake_lock:
            if self._wake_closed:
                raise RuntimeError(_MANAGER_CLOSED_MSG)
            mg.mg_wakeup(&self._mgr, self._wakeup_id, b"w", 1)
        return True

    cdef void _deliver_wakeups(self) noexcept:
        if not mg.cym_load_int_sc(&self._wake_pending) and not self._wakeup_queue:
            return
        mg.cym_exchange_int_sc(&self._wake_pending, 0)
        queue = self._wakeup_queue
        cdef Connection conn
        while queue and not self._stop_dispatch:
            connection_id, data = queue.popleft()
            if connection_id == 0:
                try:
                    data[0](*data[1])
                except BaseException as exc:
                    _route_exception(self, exc)
                continue
            conn = self._find(connection_id)
            if conn is not None:
                _deliver_synthetic(self, conn, mg.MG_EV_WAKEUP, data)

    cdef Connection _find(self, unsigned long conn_id):
        cdef mg.mg_connection *c = self._mgr.conns
        while c != NULL and c.id != conn_id:
            c = c.next
        if c == NULL:  # not in the loop's list: parked while idle (build_fixes.py PARKING)
            c = mg.cym_parked_find(&self._mgr, conn_id)
        if c == NULL and self._gil.h2_sessions != NULL:  # or an HTTP/2 stream (http2.pxi)
            c = mg.cym_h2_find(self._gil.h2_sessions, conn_id)
        if c != NULL and c.fn == _on_event and c.fn_data != NULL:
            return <Connection>c.fn_data
        return None

    cdef void _release_timers(self) noexcept:
        cdef Timer t
        self._mgr.timers = NULL  # mg_mgr_free would mg_free() them: they are ours
        for t in self._timers:
            _timer_detach(t)
        self._timers.clear()

    cdef void _reap_timers(self) noexcept:
        cdef Timer t
        if not self._timers:
            return
        for t in [t for t in self._timers if not _timer_live(t)]:
            mg.mg_timer_free(&self._mgr.timers, &t._box.timer)
            _timer_detach(t)
            self._timers.discard(t)


cdef int _default_linger_ms() noexcept:
    # Asked per Manager, not once at import: a free-threaded interpreter turns the GIL back
    # on when a module that has not declared itself safe is imported, at any time.
    try:
        if not sys_is_gil_enabled():
            return 0
    except BaseException:
        pass
    return _LINGER_MS


cdef bint _ready_soon(mg.mg_mgr *mgr, int linger_ms) noexcept nogil:
    # Non-consuming readiness probe: Mongoose's epoll set is level-triggered, so an
    # epoll_wait() here leaves every event for mg_mgr_poll() to see again. It does not walk
    # the connections (10,000 of them cost more than the request): a connection marked
    # closing or holding decrypted-but-unread TLS bytes makes Mongoose's own wait 1 ms.
    cdef mg.epoll_event ev
    if mgr.epoll_fd < 0:
        return False
    return mg.epoll_wait(mgr.epoll_fd, &ev, 1, linger_ms) > 0


# glibc's malloc keeps the heap a burst of connections freed (OpenSSL's state per
# connection, buffers) for reuse. After 1,000 stalled TLS clients left, a server's RSS stayed
# 10 MB above its level before them; further bursts reused it, so it was held, not leaked,
# but a server that never shrinks after a flood looks like one that leaks, and the memory is
# another process's. malloc_trim() gives it back, but it walks every free chunk with a
# madvise() each: tens of ms on a fragmented 100 MB heap, during which the loop answers
# nobody. So it runs only after the loop has seen no traffic for _RELEASE_QUIET_MS and at
# least _RELEASE_AFTER_CLOSES connections closed since the last time: once per burst, never
# under load.
DEF _RELEASE_AFTER_CLOSES = 256
DEF _RELEASE_QUIET_MS = 1000


cdef inline bint _heap_release_due(GilSlot *gil) noexcept nogil:
    return (gil.quiet_polls > 0 and
            gil.closes - gil.closes_at_release >= _RELEASE_AFTER_CLOSES and
            mg.mg_millis() - gil.quiet_since_ms >= _RELEASE_QUIET_MS)


cdef void _release_heap(GilSlot *gil) noexcept nogil:
    gil.closes_at_release = gil.closes
    mg.cym_release_free_heap()


def _connection_id(Connection conn):
    return conn._c.id


cdef inline void _add_bound(list out, mg.mg_connection *c):
    # Only connections that run our callback and are bound: never Mongoose's own wakeup
    # pipe or DNS sockets.
    if c.fn == _on_event and c.fn_data != NULL and (<Connection>c.fn_data)._c == c:
        out.append(<Connection>c.fn_data)


cdef int _wait_budget(mg.mg_mgr *mgr, int timeout_ms) noexcept nogil:
    # Mongoose fires timers only after its I/O wait; cap the wait at the next expiry so a
    # 10 ms timer is not late by a whole poll(100).
    cdef uint64_t now = mg.mg_millis()
    cdef mg.mg_timer *t = mgr.timers
    cdef int64_t due
    cdef int budget = mg.cym_parked_wait_ms(mgr, timeout_ms)  # the first parked deadline
    if _h2_wants_poll(mgr):
        return 0
    while t != NULL:
        if t.expire == 0:
            due = <int64_t>t.period_ms if not (t.flags & mg.MG_TIMER_RUN_NOW) else 0
        else:
            due = <int64_t>t.expire - <int64_t>now
        if (t.flags & mg.MG_TIMER_REPEAT) or not (t.flags & mg.MG_TIMER_CALLED):
            if due < 0:
                due = 0
            if budget < 0 or due < budget:
                budget = <int>due
        t = t.next
    return budget


# The schemes Mongoose gives a meaning to (mg_listen/mg_connect: udp:// is UDP, everything
# else TCP; mg_url_is_ssl: https, wss, mqtts, ssl, tls, tcps mark TLS; mg_url_port: the
# default ports). Mongoose reads any other text as TCP, so "htp://" became a raw listener.
cdef frozenset _URL_SCHEMES = frozenset((
    "tcp", "udp", "http", "https", "ws", "wss", "mqtt", "mqtts", "ssl", "tls", "tcps"))
cdef str _URL_SCHEMES_TEXT = ("tcp://, udp://, http://, https://, ws://, wss://, mqtt://, "
                              "mqtts://, ssl://, tls://, tcps://")


cdef int _check_url(str url, bint listen) except -1:
    """Refuse a URL Mongoose would misread: an unknown (or missing) scheme, and a listening
    HTTP/WebSocket URL without a port, which would bind the scheme's default (80, 443)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        # A bare host:port is TCP, as in 0.2.x (drop-in compatible); anything else without
        # "://" ("http//host:80") is a typo that Mongoose would also have taken as TCP.
        if "/" not in url:
            return 0
        raise ValueError(f"url {url!r} has no scheme: write one of {_URL_SCHEMES_TEXT}")
    if scheme not in _URL_SCHEMES:
        if scheme.lower() in _URL_SCHEMES:
            raise ValueError(f"url {url!r}: write the scheme in lower case ({scheme.lower()}://)")
        raise ValueError(f"url {url!r} has an unknown scheme {scheme + '://'!r}: use one of "
                         f"{_URL_SCHEMES_TEXT}")
    if listen and url.startswith(_HTTP_SCHEMES):
        hostport = rest.partition("/")[0]
        if hostport.startswith("["):  # [IPv6]:port
            port = hostport.partition("]")[2][1:] if "]:" in hostport else ""
        else:
            port = hostport.rpartition(":")[2] if ":" in hostport else ""
        if not port.isdigit():
            raise ValueError(f"url {url!r} has no port: write the one to listen on "
                             f"({scheme}://host:8000, or :0 for a free one)")
    return 0


cdef Connection _open(Manager manager, str url, object handler, object http, bint listen):
    manager._ensure_open()
    _check_handler(handler, "handler")
    _check_url(url, listen)
    cdef bytes burl = _utf8_no_nul(url, "url")
    cdef bint use_http = (url.startswith(_HTTP_SCHEMES) if http is None else bool(http))
    cdef Connection conn = Connection.__new__(Connection)
    conn._handler = handler
    conn._manager = <void *>manager
    conn._limits = manager._limits
    conn._recv_capped = not use_http
    cdef mg.mg_connection *c
    if listen:
        _raise_open_file_limit()
    Py_INCREF(conn)  # the reference c->fn_data will own until MG_EV_CLOSE
    if listen:
        if use_http:
            c = mg.mg_http_listen(&manager._mgr, burl, _on_event, <void *>conn)
        else:
            c = mg.mg_listen(&manager._mgr, burl, _on_event, <void *>conn)
    else:
        if use_http:
            c = mg.mg_http_connect(&manager._mgr, burl, _on_event, <void *>conn)
        else:
            c = mg.mg_connect(&manager._mgr, burl, _on_event, <void *>conn)
    if c == NULL:
        Py_DECREF(conn)
        what = "listen on" if listen else "connect to"
        # "Failed to listen"/"Failed to connect": 0.2.x's words, which callers match on.
        raise RuntimeError(
            f"Failed to {what} {url!r}: check the scheme (tcp://, udp://, http://, https://, "
            "ws://, wss://), host and port, and that the address is free")
    if not conn._bound:  # no handler saw MG_EV_OPEN (none set): bind now
        conn._c = c
        conn._bound = True
    if listen and use_http:
        _install_http_guard(c)
    _raise_pending(manager)
    return conn


cdef int _raise_pending(Manager manager) except -1:
    # A KeyboardInterrupt/SystemExit raised by a handler that ran synchronously inside an
    # API call (MG_EV_OPEN in listen(), for example) surfaces from that call.
    if manager._fatal is not None and not manager._polling:
        exc, manager._fatal = manager._fatal, None
        manager._stop_dispatch = False
        raise exc
    return 0
