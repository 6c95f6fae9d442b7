# Every cdef class of cymongoose._mongoose with its C-level fields and cdef methods.
# Ownership rules (docs/internals.md):
# - Manager embeds the mg_mgr. Connections and Timers point back at it with a *borrowed*
#   pointer, never a reference, so dropping an unclosed Manager frees it.
# - A live mg_connection holds one strong reference to its Connection in c->fn_data,
#   taken when the connection opens and released at MG_EV_CLOSE, when _c becomes NULL.
# - Views (HttpMessage, WsMessage, MqttMessage) point into Mongoose's buffers only while
#   their event handler runs; the pointer is cleared when it returns. Their *_view
#   memoryviews come from the Connection's _RecvSpan and are released when the
#   connection's outermost event returns (recv_views.pxi).

cimport cython
from cpython.pystate cimport PyThreadState
from libc.stdint cimport int64_t, uint32_t, uint64_t

from .includes cimport mongoose as mg


cdef struct Metrics:
    # A Manager's counters (metrics.pxi), in C so counting costs a few adds and no Python
    # call. Fixed layout, uint64_t and double only, no pointers: it may live in a buffer
    # another process maps (Manager.share_metrics), which reads it with read_metrics().
    # Finished requests by status (0: ended without one), HTTP/1.x and HTTP/2 apart; the
    # snapshot's `requests` is their sum. Apart, not HTTP/2 as a subset of all: a reader in
    # another process may copy the struct between two additions, and a share computed as
    # all minus HTTP/2 would then step back, which Prometheus takes for a counter reset.
    uint64_t requests_http1[1000]
    uint64_t requests_http2[1000]
    uint64_t refused[1000]  # the subset the guard answered itself (4xx, 503 of the limit)
    uint64_t duration_buckets[16]  # delivery to response end; non-cumulative, last is +Inf
    double duration_sum  # seconds
    uint64_t in_flight  # gauge: delivered, not finished
    uint64_t connections_open  # gauge: accepted HTTP-server connections
    uint64_t connections_total
    uint64_t bytes_received
    uint64_t bytes_sent
    uint64_t websockets_open  # gauge: server-side WebSocket upgrades
    uint64_t websockets_total
    uint64_t http2_connections_open  # gauge: accepted connections that switched to HTTP/2
    uint64_t http2_connections_total
    uint64_t request_timeouts  # set from Python (Manager.add_metric)
    uint64_t threads_abandoned  # gauge, set from Python


cdef struct CompressConf:
    # Manager.set_compression() (http_compress.pxi), read by the guard without the GIL.
    int offered  # CODING_* bits the server makes
    size_t min_length  # smaller bodies go out as they are
    int gzip_level
    int zstd_level
    # The MIME allow-list: lower-case entries, each ended by NUL, the list by an empty one;
    # "text/" matches every text type, "+json" every type with that suffix.
    const char *types


cdef struct GilSlot:
    # The poll thread's saved state while mg_mgr_poll() runs without the GIL. The first
    # callback of an iteration restores it and sets it to NULL, so the rest of the iteration
    # dispatches with the GIL held (one acquisition per poll, not one per event).
    # First member, used by mongoose.c (build_fixes.py PARKING): the heap of idle
    # connections taken off mgr->conns until their deadline.
    mg.cym_parking parked
    PyThreadState *saved
    void *manager  # borrowed Manager that embeds this slot
    bint finalizing  # the Manager is being deallocated: bookkeeping only, no Python calls
    unsigned long io_events  # non-POLL events seen since the last poll(): "traffic is flowing"
    unsigned quiet_polls  # consecutive poll() calls that saw no such event
    uint64_t quiet_since_ms  # mg_millis() at the first of the quiet polls
    uint64_t closes  # connections closed, all kinds: the turnover that leaves freed heap
    uint64_t closes_at_release  # `closes` when freed heap was last given back
    int linger_ms  # Manager.linger_ms: GIL-held wait for the next request after traffic
    # Read by the guard without the GIL (metrics.pxi, http_health.pxi):
    Metrics *metrics  # the Manager's own _metrics, or the buffer given to share_metrics()
    uint64_t limit_concurrency  # Manager.limit_concurrency (0: no limit)
    const char *health_path  # Manager.health_path's bytes (NULL: no health answer)
    size_t health_len
    int health_state  # _HEALTH_STARTING, _HEALTH_READY or _HEALTH_DRAINING (Manager.ready)
    void *proxy  # the ProxyConf of Manager.proxy (NULL: no reverse proxy), proxy_table.pxi
    bint refusal_hook  # Manager.refusal_handler is set: proxied requests are reported too
    bint proxy_log_hook  # Manager.proxy_log_handler is set: it gets them instead
    void *h2_sessions  # the HTTP/2 connections' sessions (includes/cym_h2.h), for poll()
    const CompressConf *compress  # Manager.set_compression()'s (NULL: compression off)
    # Manager.set_static_mounts()'s table (a StaticMounts, http_static_mounts.pxi; NULL:
    # none), owned by Manager._static_table.
    void *static_mounts
    # Streamed responses' encoders, kept when their response ends for the next one to reset
    # rather than build (http_compress.pxi): building costs a first event ~0.2 ms.
    void *stream_encoders[8]
    int stream_encoders_n


cdef struct HttpLimits:
    # Per-listener HTTP limits, copied onto accepted connections (http_limits.pxi).
    size_t max_header_count
    size_t max_header_size
    size_t max_uri_size
    size_t max_body_size
    uint64_t header_timeout_ms
    uint64_t body_timeout_ms
    uint64_t keepalive_timeout_ms
    uint64_t tls_handshake_timeout_ms
    uint64_t send_timeout_ms  # a response must make write progress within this (0: never)
    # Lingering close (http_guard.pxi): after a refusal or a response that ends the
    # connection, input is read and discarded until the client has been quiet this long, for
    # this long at most in all (0: close at once); after a refusal, or a failed WebSocket,
    # linger_timeout_ms at most in all.
    uint64_t linger_timeout_ms
    uint64_t linger_time_ms
    # Not a limit but a listener setting carried the same way: deliver each request's head
    # as MG_EV_HTTP_HDRS and hand its body out as it arrives (http_stream.pxi).
    bint stream_body
    # HTTP/2 (http2.pxi): whether a connection may turn to it (listen(http2=...)), and, on
    # a stream connection's own copy only, that it is one (its request line says HTTP/2.0).
    bint http2
    bint h2_stream


cdef struct HttpGuard:
    # Per-connection state of the HTTP guard (http_guard.pxi). It lives inside the Connection
    # and c->pfn_data points at it while the guard is the connection's protocol handler, so
    # the guard runs without the GIL. Valid until MG_EV_CLOSE, which unbinds the Connection
    # only after the guard's last call (mg_call runs pfn before fn).
    # First member, used by mongoose.c (build_fixes.py QUIET_SKIP and PARKING): until when
    # the loop may skip this connection's MG_EV_POLL (0: never), only set while it needs
    # nothing, and whether it may wait off the loop's list (parked) meanwhile.
    mg.cym_quiet quiet
    const HttpLimits *limits  # the Connection's own _limits
    uint64_t started_ms  # accept time: first-request and TLS handshake clocks
    uint64_t deadline_ms  # when the current phase times out (0: never)
    uint64_t linger_until_ms  # refused: hard end of the discard-and-close phase
    size_t requests_seen
    size_t seen_len  # recv.len when last looked at: growth is new body data
    size_t progress_mark  # recv.len when the current body_timeout window began
    size_t head_len  # front request's head, once complete and valid (else 0)
    size_t frame_len  # head + body on the wire, once known (else 0)
    size_t content_length
    size_t chunk_pos  # chunked body: wire bytes after the head already validated
    size_t decoded  # chunked body: data bytes in the validated chunks
    int body_refused  # the streamed body went over max_body_size: 413 answered, 1 closed
    int phase
    int body_kind
    int flags
    mg.mg_event_handler_t inner  # Mongoose's file sender, run by the guard while it serves
    void *inner_data  # its c->pfn_data (the open file)
    # Streamed request body (http_stream.pxi): c->recv holds body_ready decoded bytes at its
    # front, then wire bytes not decoded yet.
    size_t body_ready
    size_t body_base  # the head's length while MG_EV_HTTP_HDRS runs (it is still in front)
    size_t body_left  # Content-Length bytes still due, or the current chunk's data left
    size_t wire_total  # body bytes read from the socket so far (progress clock)
    int chunk_state
    # Response written piecewise (http_response.pxi): http_begin/http_write/http_end.
    int resp_state
    int resp_framing
    size_t resp_left  # Content-Length bytes still due
    # http_sendfile(): our dup of the file, where to read next and how much is left.
    int file_fd
    int64_t file_off
    size_t file_left
    # Slow readers (http_guard.pxi): when output last made progress (0: at the next poll), and
    # whether the client half-closed (its reads are paused; we finish what is owed).
    uint64_t send_since_ms
    bint peer_eof
    # Metrics (metrics.pxi): what this connection is counted as (_MT_* bits), when its
    # request was delivered (CLOCK_MONOTONIC, ns) and the status of its response so far.
    int meter
    uint64_t req_start_ns
    int resp_status
    # send.len + 1 where reply() wrote a whole response head (0: none), status and Connection
    # field already as the request requires: _fix_response() need not scan it again.
    size_t core_head_at
    # Reverse proxy (proxy_exchange.pxi): the _Exchange this connection's request is in.
    void *proxy
    # An HTTP/2 stream (http2.pxi): the connection it travels on (its TLS is the stream's),
    # valid while the stream is: a connection closes its streams first.
    mg.mg_connection *h2_parent
    # Response compression (http_compress.pxi): the coding the request's Accept-Encoding
    # takes among the offered (0: none), and a streamed response's own encoder (NULL: the
    # body goes out as written), with the uncompressed bytes its Content-Length still owes
    # when the app gave one (plain_counted).
    int coding
    mg.cym_encoder *encoder
    size_t plain_left
    bint plain_counted
    # Static mounts (http_static_mounts.pxi): the last request head the guard took was
    # answered from a mount, so the handler gets no MG_EV_READ/WRITE for it (dispatch.pxi).
    bint static_quiet


# What an outer event loop watches of one socket, for a Manager driven without an epoll
# descriptor (loop_sockets.pxi): indexed by descriptor number, an entry is in use while
# conn_id is not 0.
cdef struct LoopSocket:
    unsigned long conn_id  # the connection the watch was made for (a number may be reused)
    unsigned char events  # LOOP_READ | LOOP_WRITE, as the outer loop has it
    unsigned int mark  # the sync that last saw the connection open


cdef struct LoopSockets:
    LoopSocket *by_fd  # malloc'ed, len entries; freed with the Manager
    int len
    int in_use  # entries with conn_id != 0
    unsigned int mark


cdef struct TimerBox:
    mg.mg_timer timer
    GilSlot *gil
    void *owner  # borrowed Timer; the Manager keeps the Timer alive while it is linked


cdef class LoopCaches:
    # What one loop remembers from request to request to skip repeated work (loop_caches.pxi).
    # One per Manager, used only by the thread polling it: no lock. They were module globals
    # until free threading (issue 37), where two loops' threads would mix one another's
    # entries up (a request given another client's address or another header's name).
    cdef uint32_t ip4  # the last IPv4 address formatted, packed, and its text
    cdef str ip4_text
    cdef list environ_raw  # per header position: the name seen last there, as received,
    cdef list environ_key  # and its WSGI environ key (None: the header is dropped)
    cdef dict environ_keys  # name as received -> environ key, capped
    cdef list asgi_raw  # per header position: the name seen last there, and lower-cased
    cdef list asgi_lower
    cdef dict asgi_names  # name as received -> lower-cased, capped


cdef class Manager:
    # Without the GIL (free threading) a Manager is still driven by one thread at a time;
    # other threads may only call wakeup(), call_soon_threadsafe() and read metrics(). What
    # they touch: _closed (atomic loads; stored by close()), _polling (taken by
    # compare-and-set), _wake_pending (seq_cst exchanges on both sides), _wake_closed (under
    # _wake_lock, with the send of the wake datagram, so no send can reach the wakeup pipe's
    # descriptor after close() frees it and the number is reused).
    cdef mg.mg_mgr _mgr
    cdef GilSlot _gil
    cdef bint _closed
    cdef bint _polling
    cdef bint _stop_dispatch
    cdef object _handler
    cdef object _error_handler
    cdef object _refusal_handler  # see Manager.refusal_handler in the .pyi
    cdef object _proxy_log_handler  # see Manager.proxy_log_handler in the .pyi
    cdef object _fatal
    cdef set _timers
    cdef bint _wakeup_enabled
    cdef int _wake_pending  # a wake datagram is on its way and the poll has not cleared it
    cdef int _wake_closed  # close() has begun: no more wake datagrams (under _wake_lock)
    cdef cython.pymutex _wake_lock
    cdef unsigned long _wakeup_id
    cdef object _wakeup_queue
    cdef HttpMessage _http_view
    cdef HttpLimits _limits
    cdef size_t _max_recv_size
    cdef bytes _dns_url  # keeps mgr.dns4.url / dns6.url alive once dns_server is set
    cdef list _retired_recv  # pinned receive buffers to free before the next poll (addresses)
    cdef cython.pymutex _retired_lock  # over _retired_recv and _retired_closed: app threads add
    cdef bint _retired_closed  # close() freed the last ones: a later retire frees its own
    cdef Metrics _metrics  # counted here until share_metrics() moves them (_gil.metrics)
    cdef Py_buffer _shared  # share_metrics()'s buffer, held until close
    cdef bint _sharing
    cdef cython.pymutex _metrics_lock  # held to follow _gil.metrics off the loop, or repoint it
    cdef bytes _health_path  # owns the bytes _gil.health_path points at
    cdef object _proxy  # the ProxyTable _gil.proxy points into (None: none)
    cdef list _proxy_retired  # tables replaced while exchanges may still point into them
    cdef LoopCaches _caches
    cdef object _static_table  # the _StaticTable _gil.static_mounts points into (None: none)
    cdef LoopSockets _loop_sockets  # loop_sockets.pxi: the per-socket watches
    # Response compression (http_compress.pxi): the settings _gil.compress points at, the
    # bytes its `types` point into, and the encoders and output buffer whole bodies share.
    cdef CompressConf _compress
    cdef bytes _compress_types
    cdef mg.cym_encoder _whole_gzip
    cdef mg.cym_encoder _whole_zstd
    cdef mg.cym_out _whole_out
    cdef object __weakref__

    cdef int _ensure_open(self) except -1
    cdef void _report(self, BaseException exc) noexcept
    cdef void _release_timers(self) noexcept
    cdef void _reap_timers(self) noexcept
    cdef bint _send_wake(self) except -1
    cdef void _deliver_wakeups(self) noexcept
    cdef Connection _find(self, unsigned long conn_id)


cdef class Connection:
    cdef mg.mg_connection *_c
    cdef void *_manager  # borrowed Manager, valid while _c is not NULL
    cdef object _handler
    cdef public object userdata
    cdef object _mask_handler  # the handler _mask was computed for (see handles())
    cdef bint _recv_capped  # raw TCP/UDP and MQTT: Manager.max_recv_size applies
    cdef uint64_t _mask
    # The handler's mask leaves MG_EV_POLL out: _on_event skips the event without the GIL.
    # Cleared when the handler changes, set again by _deliver() once it read the new mask.
    cdef bint _skip_poll
    cdef bint _head_request
    cdef bint _bound
    cdef bint _quiet_errors  # Connection.log_errors is False: its owner reports failures
    cdef bint _close_called  # close() was called: no response may start any more (http.pxi)
    cdef HttpLimits _limits
    cdef HttpGuard _guard
    # WebSocket close handshake (ws.pxi): the peer's close code (0 = no close frame yet)
    # and reason, and whether we sent a close frame ourselves.
    cdef int _ws_close_code
    cdef str _ws_close_reason
    cdef bint _ws_close_sent
    # permessage-deflate (ws_deflate.pxi): a malloc'd _WsDeflate once negotiated, else NULL;
    # owned by the connection, freed at MG_EV_CLOSE (_unbind).
    cdef void *_ws_deflate
    cdef tuple _peer  # (REMOTE_ADDR, REMOTE_PORT) strings, made once per connection
    cdef tuple _client  # the ASGI scope's (host, port), made once per connection
    cdef dict _tls_info  # Connection.tls_info once the handshake is done (tls_peer.pxi)
    # Zero-copy views (recv_views.pxi): handler calls running for this connection (nested
    # when ws_upgrade() fires MG_EV_WS_OPEN), and the exporter of this event's views.
    cdef int _event_depth
    cdef _RecvSpan _span

    cdef int _ensure_open(self) except -1
    cdef void _unpark(self) noexcept


cdef class _LoopHandler:
    # A handler the core calls in C (dispatch.pxi): the WSGI and ASGI servers' loop objects.
    cdef int on_event(self, Connection conn, int ev, object data) except -1


cdef class HttpMessage:
    cdef mg.mg_http_message *_hm
    cdef Connection _conn  # the event's connection, for *_view accessors; None after it

    cdef int _ensure_valid(self) except -1


cdef class WsMessage:
    cdef mg.mg_ws_message *_wm
    cdef Connection _conn

    cdef int _ensure_valid(self) except -1


cdef class MqttMessage:
    cdef mg.mg_mqtt_message *_mm
    cdef Connection _conn

    cdef int _ensure_valid(self) except -1


cdef class _RecvSpan:
    # Buffer exporter over a connection's receive buffer for one event (recv_views.pxi).
    cdef const char *_buf  # c->recv.buf when the span was made
    cdef Py_ssize_t _len  # c->recv.size then: every view lies inside the allocation
    cdef Py_ssize_t _exports  # buffers given out by __getbuffer__ and not released yet
    # Held over _exports and the retiring of _pinned: an app thread may release the last
    # buffer (free threading: nothing else orders it against the loop's exports).
    cdef mg.cym_ft_mutex _lock
    cdef char *_pinned  # Mongoose's old buffer, owned once the event ended with exports
    cdef bint _valid  # False once the event ended: no new exports
    cdef object _base  # memoryview over the whole span; views are slices of it
    cdef list _handed  # every memoryview given to Python code during the event
    cdef Manager _manager  # where to defer freeing _pinned while it polls


cdef class Timer:
    cdef TimerBox *_box
    cdef object _callback
    cdef bint _repeat
    cdef bint _active
    cdef bint _cancelled
    cdef void *_manager  # borrowed Manager, valid while _box is not NULL


cdef class TlsOpts:
    cdef public bytes ca
    cdef public bytes cert
    cdef public bytes key
    cdef public bytes name
    cdef public bint skip_verification
    cdef public bytes ciphers  # TLS 1.2 cipher list (OpenSSL syntax); b"": the default
    # tls.pxi _tls_prepared(): the field objects last validated, and what they became.
    cdef tuple _checked_fields
    cdef tuple _prepared
    # OpenSSL engine: the SSL_CTX made from _prepared for servers / clients (NULL until
    # first used), shared by every connection; each holds its own reference.
    cdef void *_ctx_server
    cdef void *_ctx_client
    # Held over validating, making, dropping and attaching those: one TlsOpts may serve the
    # listeners of several loops on several threads, whose first connections race to make a
    # context (or to drop it when a field changed) while another attaches it.
    cdef cython.pymutex _lock


# The servers' per-request work in C (servers/*.pxi: the WSGI* and ASGI* classes below) and
# its contract with the Python of cymongoose.wsgi and cymongoose.asgi, which subclass each of
# them (picows' WSListener pattern). The C code calls up into Python only through the cpdef
# hooks declared here, on objects whose type is declared here: each base's hook raises
# NotImplementedError naming itself, and the class statement of a Python subclass that
# leaves a hook to its base fails with TypeError (server_hooks.pxi), so a hook renamed on one
# side is a build error (the C side) or an import error (the Python side), never a request
# that fails at run time. Every other object field is data the C code reads, stores or
# passes on; the few that hold callables are called with fixed arguments and filled in once,
# when the server starts: ASGIServerState.kick, the *_handler fields (given to
# Connection.set_handler) and the *_type fields (the classes the core instantiates).

# The WSGI server (wsgi_exchange.pxi).
cdef class WSGIExchange:
    # One request and its response, shared by the loop and the thread running the app.
    cdef public object state  # the server's shared state (wsgi/state.py), for the subclass
    cdef public Connection conn
    cdef public dict environ
    cdef public object input  # the streaming wsgi.input, or None
    cdef public object status  # (code, reason or None) once start_response() was called
    cdef public object headers  # the app's header list, as given
    cdef public long long declared  # the app's Content-Length, or -1
    cdef public long long sent  # body bytes the app produced so far
    cdef public bint head_sent  # the head left the app's hands: no 500 possible any more
    cdef public bint head_queued
    # Flow control of a streamed response, between the app's thread and the loop: changed
    # only through the flow_*() methods, under flow_lock (a mutex without the GIL, nothing
    # with it: each method is a few C statements that call no Python); the app's side reads
    # queued + backlog through flow_ahead(), and `closed` (a property) atomically.
    cdef int closed_flag  # the client is gone: the `closed` property
    cdef readonly long long queued  # body bytes posted to the loop, not yet written out
    cdef readonly long long backlog  # the connection's send buffer, as the loop saw it last
    cdef public object cond  # made when a streamed response has to wait for the client
    cdef readonly bint waiting
    cdef mg.cym_ft_mutex flow_lock
    cdef public bint is_head
    cdef public bint finished
    cdef public int stock  # DefaultHeader bits still to add to the app's headers
    cdef public bint busy  # the connection has the server's handler for READ/WRITE events
    cdef public double started  # perf_counter() at the head, when WSGILoop.clock_requests
    # The request deadline, one word changed by compare-and-set from both threads (the
    # app_phase and timed_out properties read it): run_batch() moves the phase from 0
    # (queued) to 1 (running) to 2 (returned); time_out() adds the timed-out bit unless the
    # app returned. So the two threads agree, GIL or not, on which happened first.
    cdef int app_state
    # A streamed response parked while its client is behind (wsgi/parking.py): its
    # (iterable, iterator, context). `parked` is the loop's while it waits for the client to drain;
    # `resumed` is set by the loop when it queues the exchange again, and taken by the
    # thread that run_batch() gives it to (resume_app()).
    cdef public object parked
    cdef public object resumed

    # Hooks. App side: write() sends each piece of the body through stream(). Loop side:
    # WSGILoop admits a request whose body is still arriving with feed_input(), and tells
    # the exchange its client left (MG_EV_CLOSE) with gone().
    cpdef stream(self, data)
    cpdef feed_input(self)
    cpdef gone(self)


cdef class WSGITurns:
    # Who owns the loop among the server's threads (wsgi/turns.py): what run_batch() reads
    # and writes per app it runs inline.
    cdef public object owner  # the thread that owns the loop (None: none)
    cdef public object current  # the exchange whose app the owner runs inline, or None
    # The standby thread sleeps (idle): the owner must wake it when it starts an app.
    cdef public bint standby_asleep
    # Counts the standby's looks at the owner: a stretch of inline apps during which it
    # took the GIL is not judged for waiting (run_batch()).
    cdef public unsigned long standby_looks

    # Hook, from run_batch(): the owner set `current` while the standby sleeps.
    cpdef wake_standby(self)
    # Hook, from run_batch(): the owner's inline apps waited (off CPU, asleep): run apps on
    # the other threads from now on.
    cpdef apps_wait(self)


cdef class WSGILoop(_LoopHandler):
    # The handler of a connection waiting for a request head, the owner's batch of apps and
    # the writing of the whole responses they queued.
    cdef public object state  # handed to each new exchange
    cdef public object exchange_type  # the server's WSGIExchange subclass
    cdef public object stream_input_type  # wsgi.input for a body still arriving
    cdef public object no_body  # wsgi.input for a request without one
    cdef public object busy_handler  # the handler that also takes READ/WRITE events
    cdef public object pending  # deque of exchanges for the app threads
    cdef public set live
    cdef public dict bases  # listener port -> environ base
    cdef public dict base_default
    cdef public str root_path
    cdef public object outbox  # deque of (exchange, op, arg) for the loop to write
    cdef public object quiet_handler  # this, or the server's Python admission
    cdef public bint access_log_on  # drain() calls log_access() once per response
    cdef public bint clock_requests  # stamp each exchange's `started` (access log, deadline)
    # run_batch() saw the owner's apps wait in its last judged stretch: a second one in a row
    # starts the blocking mode (one alone may be the owner held up by another thread).
    cdef bint waited_before
    # Free threading with the GIL off and more than one CPU to run on (wsgi/server.py sets it
    # at run()): an app that computes for long runs on the app threads too, several at once.
    cdef public bint apps_in_parallel
    cdef bint long_before  # as waited_before, for an inline app that ran _LONG_APP_NS

    cdef _admit(self, Connection conn, HttpMessage msg)

    # Hooks. Loop side, from drain(): write_step() writes a queued response step that is not
    # a whole response, protocol_error() handles a response the core refused, log_access()
    # logs a finished one. App side, from run_batch(): finish_app() sends what an app
    # returned when it is not the one-item list handled here, app_failed() answers an app
    # that raised.
    cpdef write_step(self, WSGIExchange ex, int op, arg)
    cpdef protocol_error(self, WSGIExchange ex, BaseException exc)
    cpdef log_access(self, WSGIExchange ex)
    cpdef finish_app(self, WSGIExchange ex, result)
    cpdef app_failed(self, WSGIExchange ex, BaseException exc)
    # App side, from run_batch(): the app of an exchange that timed out returned (or raised);
    # the hook gives its slot back or not.
    cpdef timed_out_app_returned(self, WSGIExchange ex, slots)
    # App side, from run_batch(): take the next items of a parked response (ex.resumed).
    cpdef resume_app(self, WSGIExchange ex)


cdef class RpcReq:
    cdef mg.mg_rpc_req *_req
    cdef bint _answered
    cdef str _frame

    cdef int _begin_answer(self) except -1


cdef class Rpc:
    cdef mg.mg_rpc *_head
    cdef dict _handlers
    cdef list _patterns


# The ASGI server (asgi_exchange.pxi). The core never holds the server: it reads the typed
# fields below, which the server fills in (asgi/state.py: ServerState, asgi/admission.py:
# Admission, asgi/http.py and websocket.py: the cycles, asgi/shared.py: the waiter).

cdef class ASGIServerState:
    # What the per-request objects share (uvicorn's ServerState): each HTTP exchange and each
    # WebSocket cycle gets this object, never the server.
    # Date/Server (and, when stopping, Connection: close) blocks, indexed by
    # missing_default_headers(); updated in place once a second (serving/default_headers.py).
    cdef public list default_headers
    cdef public object kick  # the LoopDriver's kick(): poll soon (a no-op before start)
    cdef public bint access_log_on  # log_access() is called for each response
    cdef public bint clock_requests  # stamp each exchange's `started` (access log, deadline)
    cdef public object quiet_handler  # a connection waiting for its next request head
    cdef public object busy_handler  # ... that also takes READ/WRITE for its exchange
    cdef public object websocket_handler  # an accepted WebSocket

    # Hook: one access-log line for a finished exchange or an answered handshake.
    cpdef log_access(self, exchange)


cdef class ASGIWaiter:
    # Where an exchange's coroutines wait for the loop (asgi/shared.py); the core only wakes.
    # Hook: wake every coroutine waiting on it.
    cpdef wake(self)


cdef class ASGICycle:
    # What the core runs an app for: an HTTP exchange or a WebSocket. ASGILoop.run_app()
    # awaits app(scope, receive, send), where receive() and send() are async methods of the
    # subclass (Python attributes: the app is given them; the base's raise
    # NotImplementedError and the subclass check requires them too).
    cdef public object task  # the app's task, set by ASGILoop
    cdef public ASGIServerState server_state
    cdef public Connection conn
    cdef public dict scope

    # Hooks. Loop side: gone(), the client left (MG_EV_CLOSE). From run_app(): app_done()
    # with the exception the app raised, or None when it returned without completing its
    # exchange; cancelled(), its task was cancelled (the server stops).
    cpdef gone(self)
    cpdef app_done(self, exc)
    cpdef cancelled(self)


cdef class ASGIHTTPExchange(ASGICycle):
    cdef public object body  # the whole request body, when it came with the head
    cdef public bint streaming  # the request body is still arriving
    cdef public int status  # from http.response.start (0: not yet)
    cdef public object headers
    cdef public bint head_sent
    cdef public bint complete
    cdef public bint closed  # the client went away
    cdef public bint failed  # a protocol error was logged
    # The http.response.trailers extension: None unless http.response.start said
    # trailers=True; then the fields gathered so far, sent once the last part comes.
    cdef public object trailers
    cdef public bint body_done  # the last body part is out, the trailers still to come
    # Made when a coroutine first waits: most requests never do.
    cdef public ASGIWaiter rx
    cdef public ASGIWaiter tx
    cdef public bint busy  # the connection's handler wants MG_EV_READ/WRITE for us
    cdef public long long sent  # body bytes sent (the access log's)
    cdef public double started  # perf_counter() at the head, when clock_requests is set

    cdef bint _respond_whole(self, bytes body) except -1
    cpdef _finish(self)

    # Hooks: receive() and send() past their paths in C (a body still arriving, waiting for
    # the client, a streamed, file or refused response). Each returns the awaitable that
    # receive() or send() awaits (the subclass's are async methods).
    cpdef receive_slow(self)
    cpdef send_slow(self, message)


cdef class ASGILoop(_LoopHandler):
    cdef public ASGIServerState server_state
    cdef public object app
    cdef public object loop  # the asyncio loop the app's tasks run on
    cdef public set tasks  # the running apps' tasks (the loop keeps only weak references)
    cdef public object exchange_type  # the server's ASGIHTTPExchange subclass
    cdef public dict bases  # listener port -> scope base
    cdef public dict base_default
    cdef public dict lifespan_state  # copied into each scope
    cdef public set unix_conns  # ids of connections accepted on a Unix socket
    cdef public bint python_admission  # every request goes to admit_request()

    cdef _admit(self, Connection conn, HttpMessage msg)
    # start() and spawn() for the C paths: no override lookup per request.
    cdef _start(self, Connection conn, ASGIHTTPExchange exchange)
    cdef _spawn(self, ASGICycle cycle, bint eager=*)

    # Hooks. admit_request: a request head when python_admission is set (proxy headers,
    # Unix-socket clients, max_requests). admit_websocket: a GET asking for a WebSocket,
    # with the scope built so far; the subclass answers or holds the handshake.
    cpdef admit_request(self, Connection conn, HttpMessage msg)
    cpdef admit_websocket(self, Connection conn, HttpMessage msg, dict scope)
