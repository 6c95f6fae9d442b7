# C declarations of the Mongoose 7.23 API that cymongoose uses, in mongoose.h order. No logic.
# cimport as a module (`from .includes cimport mongoose as mg`) so every C call reads `mg.*`.
# Bit-fields of struct mg_connection are declared as plain members: Cython only emits
# `c->field` accesses, which C resolves against the real bit-field.

from libc.stdio cimport FILE
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t


cdef extern from "mongoose.h" nogil:
    const char *MG_VERSION

    struct mg_str:
        char *buf
        size_t len

    mg_str mg_str_n(const char *s, size_t n)
    bint mg_match(mg_str s, mg_str pattern, mg_str *caps)

    ctypedef void (*mg_pfn_t)(char, void *arg)
    void mg_pfn_iobuf(char ch, void *param)

    enum:
        MG_LL_NONE
        MG_LL_ERROR
        MG_LL_INFO
        MG_LL_DEBUG
        MG_LL_VERBOSE
    int mg_log_level
    void mg_log_set_fn(mg_pfn_t fn, void *param)

    struct mg_timer:
        uint64_t period_ms
        uint64_t expire
        unsigned flags
        void (*fn)(void *)
        void *arg
        mg_timer *next
    enum:
        MG_TIMER_ONCE
        MG_TIMER_REPEAT
        MG_TIMER_RUN_NOW
        MG_TIMER_CALLED
        MG_TIMER_AUTODELETE
    void mg_timer_init(mg_timer **head, mg_timer *timer, uint64_t milliseconds,
                       unsigned flags, void (*fn)(void *), void *arg)
    void mg_timer_free(mg_timer **head, mg_timer *timer)

    bint mg_random(void *buf, size_t len)
    char *mg_random_str(char *buf, size_t len)
    uint32_t mg_crc32(uint32_t crc, const char *buf, size_t len)

    unsigned short mg_url_port(const char *url)
    bint mg_url_is_ssl(const char *url)
    mg_str mg_url_host(const char *url)
    mg_str mg_url_user(const char *url)
    mg_str mg_url_pass(const char *url)
    const char *mg_url_uri(const char *url)

    struct mg_iobuf:
        unsigned char *buf
        size_t size
        size_t len
        size_t align
    bint mg_iobuf_resize(mg_iobuf *io, size_t new_size)
    size_t mg_iobuf_add(mg_iobuf *io, size_t ofs, const void *buf, size_t len)
    size_t mg_iobuf_del(mg_iobuf *io, size_t ofs, size_t len)
    void mg_iobuf_free(mg_iobuf *io)

    size_t mg_base64_encode(const unsigned char *p, size_t n, char *buf, size_t len)
    size_t mg_base64_decode(const char *src, size_t n, char *dst, size_t len)

    ctypedef struct mg_md5_ctx:
        pass
    void mg_md5_init(mg_md5_ctx *c)
    void mg_md5_update(mg_md5_ctx *c, const unsigned char *data, size_t len)
    void mg_md5_final(mg_md5_ctx *c, unsigned char *digest)
    ctypedef struct mg_sha1_ctx:
        pass
    void mg_sha1_init(mg_sha1_ctx *c)
    void mg_sha1_update(mg_sha1_ctx *c, const unsigned char *data, size_t len)
    void mg_sha1_final(unsigned char *digest, mg_sha1_ctx *c)
    ctypedef struct mg_sha256_ctx:
        pass
    void mg_sha256_init(mg_sha256_ctx *c)
    void mg_sha256_update(mg_sha256_ctx *c, const unsigned char *data, size_t len)
    void mg_sha256_final(unsigned char *digest, mg_sha256_ctx *c)
    void mg_sha256(uint8_t *dst, uint8_t *data, size_t datasz)
    void mg_hmac_sha256(uint8_t *dst, uint8_t *key, size_t keysz, uint8_t *data, size_t datasz)

    ctypedef void (*mg_event_handler_t)(mg_connection *c, int ev, void *ev_data)
    void mg_error(mg_connection *c, const char *fmt, ...)

    enum:
        MG_EV_ERROR
        MG_EV_OPEN
        MG_EV_POLL
        MG_EV_RESOLVE
        MG_EV_CONNECT
        MG_EV_ACCEPT
        MG_EV_TLS_HS
        MG_EV_READ
        MG_EV_WRITE
        MG_EV_CLOSE
        MG_EV_HTTP_HDRS
        MG_EV_HTTP_MSG
        MG_EV_WS_OPEN
        MG_EV_WS_MSG
        MG_EV_WS_CTL
        MG_EV_MQTT_CMD
        MG_EV_MQTT_MSG
        MG_EV_MQTT_OPEN
        MG_EV_SNTP_TIME
        MG_EV_WAKEUP
        MG_EV_MDNS_REQ
        MG_EV_MDNS_RESP
        MG_EV_MODBUS_REQ
        MG_EV_USER

    union mg_addr_ip:
        uint8_t ip[16]
        uint32_t ip4
    struct mg_addr:
        mg_addr_ip addr "addr"
        uint16_t port
        uint8_t scope_id
        bint is_ip6

    struct mg_dns:
        const char *url
        mg_connection *c

    struct mg_mgr:
        mg_connection *conns
        mg_dns dns4
        mg_dns dns6
        int dnstimeout
        bint use_dns6
        int epoll_fd
        void *userdata
        void *active_dns_requests
        mg_timer *timers

    struct mg_connection:
        mg_connection *next
        mg_mgr *mgr
        mg_addr loc
        mg_addr rem
        void *fd
        unsigned long id
        mg_iobuf recv
        mg_iobuf send
        mg_iobuf prof  # our build: the epoll interest registered (build_fixes.py)
        mg_iobuf rtls
        mg_event_handler_t fn
        void *fn_data
        mg_event_handler_t pfn
        void *pfn_data
        char data[32]
        void *tls
        unsigned is_listening
        unsigned is_client
        unsigned is_accepted
        unsigned is_resolving
        unsigned is_connecting
        unsigned is_tls
        unsigned is_tls_hs
        unsigned is_udp
        unsigned is_websocket
        unsigned is_mqtt5
        unsigned is_draining
        unsigned is_closing
        unsigned is_full
        unsigned is_resp
        unsigned is_readable
        unsigned is_writable

    void mg_mgr_poll(mg_mgr *mgr, int ms)
    void mg_mgr_init(mg_mgr *mgr)
    void mg_mgr_free(mg_mgr *mgr)
    mg_connection *mg_listen(mg_mgr *mgr, const char *url, mg_event_handler_t fn, void *fn_data)
    mg_connection *mg_wrapfd(mg_mgr *mgr, int fd, mg_event_handler_t fn, void *fn_data)
    mg_connection *mg_connect(mg_mgr *mgr, const char *url, mg_event_handler_t fn, void *fn_data)
    bint mg_send(mg_connection *c, const void *buf, size_t len)
    void mg_call(mg_connection *c, int ev, void *ev_data)
    bint mg_wakeup(mg_mgr *mgr, unsigned long id, const void *buf, size_t len)
    bint mg_wakeup_init(mg_mgr *mgr)

    enum:
        MG_MAX_HTTP_HEADERS
        MG_MAX_RECV_SIZE

    struct mg_http_header:
        mg_str name
        mg_str value

    struct mg_http_message:
        mg_str method
        mg_str uri
        mg_str query
        mg_str proto
        mg_http_header headers[128]
        mg_str body
        mg_str head
        mg_str message

    struct mg_fs:
        pass
    struct mg_fd:
        void *fd  # a FILE * for mg_fs_posix
        mg_fs *fs
    mg_fs mg_fs_posix

    struct mg_http_serve_opts:
        const char *root_dir
        const char *ssi_pattern
        const char *extra_headers
        const char *mime_types
        const char *page404
        void *fs

    struct mg_http_part:
        mg_str name
        mg_str filename
        mg_str body

    int mg_http_parse(const char *s, size_t len, mg_http_message *hm)
    int mg_http_get_request_len(const unsigned char *buf, size_t buf_len)
    void mg_http_write_chunk(mg_connection *c, const char *buf, size_t len)
    mg_connection *mg_http_listen(mg_mgr *mgr, const char *url, mg_event_handler_t fn,
                                  void *fn_data)
    mg_connection *mg_http_connect(mg_mgr *mgr, const char *url, mg_event_handler_t fn,
                                   void *fn_data)
    void mg_http_serve_dir(mg_connection *c, mg_http_message *hm,
                           const mg_http_serve_opts *opts)
    void mg_http_serve_file(mg_connection *c, mg_http_message *hm, const char *path,
                            const mg_http_serve_opts *opts)
    mg_str *mg_http_get_header(mg_http_message *hm, const char *name)
    mg_str mg_http_var(mg_str buf, mg_str name)
    int mg_url_decode(const char *s, size_t n, char *to, size_t to_len, int form)
    size_t mg_url_encode(const char *s, size_t n, char *buf, size_t len)
    mg_str mg_http_get_header_var(mg_str s, mg_str v)
    size_t mg_http_next_multipart(mg_str body, size_t ofs, mg_http_part *part)
    int mg_http_status(const mg_http_message *hm)

    struct mg_tls_opts:
        mg_str ca
        mg_str cert
        mg_str key
        mg_str name
        bint skip_verification
    void mg_tls_init(mg_connection *c, const mg_tls_opts *opts)
    void mg_tls_free(mg_connection *c)
    size_t mg_uecc_parse_private_key(mg_str key, uint8_t *buf, size_t len)

    struct mg_ws_message:
        mg_str data
        uint8_t flags
    enum:
        WEBSOCKET_OP_CONTINUE
        WEBSOCKET_OP_TEXT
        WEBSOCKET_OP_BINARY
        WEBSOCKET_OP_CLOSE
        WEBSOCKET_OP_PING
        WEBSOCKET_OP_PONG
    mg_connection *mg_ws_connect(mg_mgr *mgr, const char *url, mg_event_handler_t fn,
                                 void *fn_data, const char *fmt, ...)
    void mg_ws_upgrade(mg_connection *c, mg_http_message *hm, const char *fmt, ...)
    size_t mg_ws_send(mg_connection *c, const void *buf, size_t len, int op)

    uint64_t mg_millis()
    uint64_t mg_now()

    mg_connection *mg_sntp_connect(mg_mgr *mgr, const char *url, mg_event_handler_t fn,
                                   void *fn_data)
    void mg_sntp_request(mg_connection *c)

    enum:
        MQTT_CMD_CONNECT
        MQTT_CMD_CONNACK
        MQTT_CMD_PUBLISH
        MQTT_CMD_PUBACK
        MQTT_CMD_PUBREC
        MQTT_CMD_PUBREL
        MQTT_CMD_PUBCOMP
        MQTT_CMD_SUBSCRIBE
        MQTT_CMD_SUBACK
        MQTT_CMD_UNSUBSCRIBE
        MQTT_CMD_UNSUBACK
        MQTT_CMD_PINGREQ
        MQTT_CMD_PINGRESP
        MQTT_CMD_DISCONNECT
        MQTT_CMD_AUTH
    enum:
        MQTT_PROP_TYPE_BYTE
        MQTT_PROP_TYPE_STRING
        MQTT_PROP_TYPE_STRING_PAIR
        MQTT_PROP_TYPE_BINARY_DATA
        MQTT_PROP_TYPE_VARIABLE_INT
        MQTT_PROP_TYPE_INT
        MQTT_PROP_TYPE_SHORT
    enum:
        MQTT_OK
        MQTT_INCOMPLETE
        MQTT_MALFORMED
    struct mg_mqtt_prop:
        uint8_t id
        uint32_t iv
        mg_str key
        mg_str val
    struct mg_mqtt_opts:
        mg_str user
        mg_str pass_ "pass"
        mg_str client_id
        mg_str topic
        mg_str message
        uint8_t qos
        uint8_t version
        uint16_t keepalive
        uint16_t retransmit_id
        bint retain
        bint clean
        mg_mqtt_prop *props
        size_t num_props
        mg_mqtt_prop *will_props
        size_t num_will_props
    struct mg_mqtt_message:
        mg_str topic
        mg_str data
        mg_str dgram
        uint16_t id
        uint8_t cmd
        uint8_t qos
        uint8_t ack
        size_t props_start
        size_t props_size
    mg_connection *mg_mqtt_connect(mg_mgr *mgr, const char *url, const mg_mqtt_opts *opts,
                                   mg_event_handler_t fn, void *fn_data)
    mg_connection *mg_mqtt_listen(mg_mgr *mgr, const char *url, mg_event_handler_t fn,
                                  void *fn_data)
    void mg_mqtt_login(mg_connection *c, const mg_mqtt_opts *opts)
    uint16_t mg_mqtt_pub(mg_connection *c, const mg_mqtt_opts *opts)
    void mg_mqtt_sub(mg_connection *c, const mg_mqtt_opts *opts)
    void mg_mqtt_unsub(mg_connection *c, const mg_mqtt_opts *opts)
    int mg_mqtt_parse(const uint8_t *buf, size_t len, uint8_t version, mg_mqtt_message *m)
    void mg_mqtt_send_header(mg_connection *c, uint8_t cmd, uint8_t flags, uint32_t len)
    void mg_mqtt_ping(mg_connection *c)
    void mg_mqtt_pong(mg_connection *c)
    void mg_mqtt_disconnect(mg_connection *c, const mg_mqtt_opts *opts)
    size_t mg_mqtt_next_prop(mg_mqtt_message *m, mg_mqtt_prop *prop, size_t ofs)

    void mg_resolve(mg_connection *c, const char *url)
    void mg_resolve_cancel(mg_connection *c)

    int mg_json_get(mg_str json, const char *path, int *toklen)
    mg_str mg_json_get_tok(mg_str json, const char *path)
    bint mg_json_get_num(mg_str json, const char *path, double *v)
    # C99 bool, for out-parameters (a bint is an int: writing a bool through it is wrong).
    ctypedef bint mg_bool "bool"
    bint mg_json_get_bool(mg_str json, const char *path, mg_bool *v)
    long mg_json_get_long(mg_str json, const char *path, long dflt)
    char *mg_json_get_str(mg_str json, const char *path)

    struct mg_rpc
    struct mg_rpc_req:
        mg_rpc **head
        mg_rpc *rpc
        mg_pfn_t pfn
        void *pfn_data
        void *req_data
        mg_str frame
    struct mg_rpc:
        mg_rpc *next
        mg_str method
        void (*fn)(mg_rpc_req *)
        void *fn_data
    void mg_rpc_add(mg_rpc **head, mg_str method_pattern, void (*handler)(mg_rpc_req *),
                    void *handler_data)
    void mg_rpc_del(mg_rpc **head, void (*handler)(mg_rpc_req *))
    void mg_rpc_process(mg_rpc_req *r)
    void mg_rpc_ok(mg_rpc_req *r, const char *fmt, ...)
    void mg_rpc_err(mg_rpc_req *r, int code, const char *fmt, ...)

    void mg_free(void *ptr)


cdef extern from "cym_os.h" nogil:
    # <sys/epoll.h> on Linux, stand-ins never reached elsewhere (epoll_fd is -1 there).
    # poll()'s non-consuming readiness probe on Mongoose's (level-triggered) epoll set, and
    # pausing a connection's reads (http_stream.pxi: EPOLLIN off while c->is_full).
    union epoll_data_t "epoll_data":
        void *ptr
    struct epoll_event:
        uint32_t events
        epoll_data_t data
    int epoll_wait(int epfd, epoll_event *events, int maxevents, int timeout)
    int epoll_ctl(int epfd, int op, int fd, epoll_event *event)
    int cym_release_free_heap()  # malloc_trim(0) under glibc, else nothing
    enum:
        EPOLLIN
        EPOLLOUT
        EPOLLERR
        EPOLLHUP
        EPOLL_CTL_MOD

    # The zero-copy body path for plain-HTTP static files (http.pxi _sendfile_body):
    # Linux's sendfile(2); elsewhere a stand-in failing with EAGAIN, so the bytes are copied.
    ssize_t sendfile "cym_sendfile"(int out_fd, int in_fd, long *offset, size_t count)

    # Static mounts (http_static_mounts.pxi): openat2(2) with RESOLVE_BENEATH, or ENOSYS.
    int cym_open_beneath(int dirfd, const char *path, int flags)

    # The WSGI loop owner's check for apps that wait (wsgi_exchange.pxi run_batch).
    ctypedef struct cym_thread_usage:
        int64_t wall_ns
        int64_t cpu_ns
        int64_t sleeps
    int64_t cym_monotonic_ns()
    void cym_thread_usage_now(cym_thread_usage *u)


cdef extern from "stdio.h" nogil:
    int fileno(FILE *stream)


cdef extern from "unistd.h" nogil:
    # http_sendfile(): the connection keeps its own duplicate of the caller's file.
    int dup(int fd)
    int close(int fd)
    ssize_t pread(int fd, void *buf, size_t count, long offset)


cdef extern from "cym_extra.h" nogil:
    # Defined in mongoose.c but not declared by mongoose.h: the wall-clock offset that
    # mg_now() adds to mg_millis(); seeded at import so TLS validity checks work without SNTP.
    uint64_t mg_boot_timestamp_ms


# What the build fixes add to mongoose.c (vendor/mongoose/inventory.py lists them, the names
# below in capitals), declared once in vendor/mongoose/cym_fixes.h.
cdef extern from "cym_fixes.h" nogil:
    # EPOLL_INTEREST: set a connection's epoll interest (EPOLLIN unless c->is_full, EPOLLOUT
    # if wr), with no system call when it is already registered; a no-op without epoll.
    void cym_epoll_set(mg_connection *c, int wr)
    # ACCEPT_PAUSE: told once per EMFILE episode that accepting paused.
    void (*cym_accept_paused_hook)(mg_connection *lsn, int err)
    # PEER_EOF: a client's orderly EOF (recv() == 0); non-zero: handled.
    int (*cym_peer_eof_hook)(mg_connection *c)
    # CONN_ERROR_HOOK: mg_error()'s log line handed over (text and errno), and the last
    # OpenSSL error text of this thread (empty once read).
    void (*cym_conn_error_hook)(mg_connection *c, const char *text, int err)
    char cym_tls_reason[256]
    # RECV_GROWTH: how far a full c->recv may double (0: no cap; it always grows by
    # MG_IO_SIZE at least).
    size_t (*cym_recv_cap_hook)(mg_connection *c)
    # INTERNALS: Mongoose's static protocol handlers (cymongoose runs them behind its own)
    # and accessors for the c->data fields it reads.
    mg_event_handler_t cym_http_cb
    mg_event_handler_t cym_static_cb
    mg_event_handler_t cym_mg_ws_cb
    mg_event_handler_t cym_mqtt_cb
    mg_event_handler_t cym_sntp_cb
    mg_event_handler_t cym_dns_cb
    size_t *cym_static_left(mg_connection *c)  # static_cb: file bytes still to send
    char *cym_sntp_flag(mg_connection *c)  # a byte of c->data sntp_cb leaves free
    # QUIET_SKIP: the protocol handler whose c->pfn_data starts with a cym_quiet.
    mg_event_handler_t cym_quiet_pfn
    # PARKING: an idle connection parked off mgr->conns until its deadline or its next
    # I/O; cym_unpark() puts it back (any Connection method does).
    struct cym_quiet:
        uint64_t until  # skip (or park) the connection until then; 0: never
        size_t slot  # parked: 1 + its index in the heap; 0: in mgr->conns
        int park  # quiet while it waits for a request: it may leave mgr->conns
    struct cym_parking:
        size_t len  # connections parked
    void cym_unpark(mg_connection *c)
    mg_connection *cym_parked_find(mg_mgr *mgr, unsigned long id)
    mg_connection *cym_parked_at(mg_mgr *mgr, size_t i)
    int cym_parked_wait_ms(mg_mgr *mgr, int ms)
    # HTTP_PARSE_HOOK: http_cb's head parser when set (http_split.pxi), else mg_http_parse.
    int (*cym_http_parse_hook)(mg_connection *c, const char *s, size_t len,
                               mg_http_message *hm)
    # DIRLIST: mg_http_serve_dir lists a directory only while it is set.
    int cym_dirlist_allowed
    # STATIC_SERVE: while set, mg_http_serve_dir records its answer here instead of sending
    # it (http_static.pxi answers).
    enum:
        CYM_SERVE_NONE
        CYM_SERVE_FILE
        CYM_SERVE_REDIRECT
        CYM_SERVE_FORBIDDEN
    struct cym_serve_out:
        int kind
        int found
        int slash
        int dir
        char path[4096]
    cym_serve_out *cym_serve_result
    mg_str cym_guess_content_type(mg_str path, const char *extra)


cdef extern from "cym_tls.h" nogil:
    # The TLS engine's own calls (tls.pxi); inert when built with Mongoose's built-in TLS.
    enum:
        CYM_TLS_OPENSSL  # 1 when built with MG_TLS_OPENSSL
    int cym_tls_key_pem(const char *key, size_t key_len, const char *cert, size_t cert_len,
                        char **out, size_t *out_len, char *err, size_t errlen)
    void cym_tls_free(char *p)
    int cym_tls_verify_error(mg_connection *c, char *buf, size_t len)
    # ALPN h2 (http2.pxi): the core says which connections may choose it; whether one did.
    int (*cym_tls_h2_allowed)(mg_connection *c)
    int cym_tls_alpn_h2(mg_connection *c)
    void *cym_tls_ctx_new(int is_client, const char *ca, size_t ca_len, const char *cert,
                          size_t cert_len, const char *key, size_t key_len,
                          const char *ciphers, char *err, size_t errlen)
    const char *cym_tls_default_ciphers
    int cym_tls_check_ciphers(const char *ciphers, char *err, size_t errlen)
    struct cym_tls_info:
        int version
        int cipher_id
        int has_peer
        long verify
        const char *protocol
        const char *cipher
        const char *verify_text
    int cym_tls_get_info(mg_connection *c, cym_tls_info *out)
    char *cym_tls_peer_text(mg_connection *c, int what, size_t *len)
    char *cym_tls_cert_subject(const char *der, size_t len, size_t *out_len)
    void cym_tls_ctx_free(void *ctx)
    int cym_tls_attach(mg_connection *c, void *shared, const char *name, size_t name_len,
                       int verifies, int skip_verification, int alpn_http11)


cdef extern from "cym_h2.h" nogil:
    # HTTP/2 (issue 36): libnghttp2's presence and version, and the prior-knowledge check the
    # HTTP guard makes on a plain connection's first bytes.
    enum:
        CYM_H2_BUILT  # 1 when built with libnghttp2 (CYMONGOOSE_HTTP2=ON, the default)
        CYM_H2_NOT_PREFACE
        CYM_H2_PARTIAL
        CYM_H2_IS_PREFACE
        CYM_H2_PREFACE_LEN
    const char *cym_h2_library_version()
    int cym_h2_preface_state(const unsigned char *buf, size_t len)
    # The engine: a connection turned to HTTP/2 runs cym_h2_handler with its session in
    # c->pfn_data; each stream is a stream connection (no socket) running stream_pfn.
    struct cym_h2_limits:
        mg_event_handler_t stream_pfn
        void **registry
        uint32_t max_streams
        uint32_t max_header_list
        uint32_t stream_window
        uint64_t max_buffered
        uint64_t idle_timeout_ms
        uint64_t send_timeout_ms
    int cym_h2_start(mg_connection *c, const cym_h2_limits *lim)
    int cym_h2_wants_poll(void *registry)
    int cym_h2_is_stream(const mg_connection *c)
    size_t cym_h2_streams(void *registry, mg_connection **out, size_t cap)
    mg_connection *cym_h2_find(void *registry, unsigned long id)
    int cym_h2_shutdown(mg_connection *c)
    mg_connection *cym_h2_parent(void *registry, const mg_connection *c)
    mg_event_handler_t cym_h2_handler_fn()
    int cym_h2_is_session(const mg_connection *c)


cdef extern from "cym_atomic.h" nogil:
    # Atomics for the C fields more than one thread touches under free threading (issue 37):
    # relaxed for counters and one-writer flags, seq_cst for two-sided hand-overs.
    int cym_load_int(const int *p)
    void cym_store_int(int *p, int v)
    int cym_load_int_sc(const int *p)
    void cym_store_int_sc(int *p, int v)
    int cym_exchange_int_sc(int *p, int v)
    int cym_cas_int(int *p, int expected, int desired)
    uint64_t cym_load_u64(const uint64_t *p)
    void cym_bump_u64(uint64_t *p, uint64_t d)
    uint64_t cym_add_u64(uint64_t *p, uint64_t d)
    double cym_load_double(const double *p)
    void cym_store_double(double *p, double v)


cdef extern from "cym_ft_lock.h" nogil:
    # A mutex under free threading only (no GIL); nothing where a GIL keeps C sections whole.
    ctypedef struct cym_ft_mutex:
        pass
    void cym_ft_lock(cym_ft_mutex *m)
    void cym_ft_unlock(cym_ft_mutex *m)


cdef extern from "cym_compress.h" nogil:
    # Response compression (issue 39): gzip (zlib) and zstd (libzstd) encoders, whole bodies
    # and streamed ones, writing into a growable buffer (http_compress.pxi).
    enum:
        CYM_ZSTD_BUILT  # 1 when built with libzstd (CYMONGOOSE_ZSTD=ON, the default)
        CYM_KEEP
        CYM_FLUSH
        CYM_END
    struct cym_out:
        unsigned char *buf
        size_t len
        size_t size
    struct cym_encoder:
        int coding
        int level
        int ready
    void cym_out_free(cym_out *o)
    void cym_encoder_free(cym_encoder *e)
    int cym_encoder_start(cym_encoder *e, int coding, int level, int stream)
    int cym_encode(cym_encoder *e, const void *data, size_t n, int mode, cym_out *o)
    const char *cym_zlib_version()
    const char *cym_zstd_version()


cdef extern from "<sys/stat.h>" nogil:
    # Static files (http_static.pxi): a file and its precompressed siblings looked at with
    # plain calls: a missing sibling costs a failed stat(2), not a Python exception.
    ctypedef struct file_stat "struct stat":
        unsigned int st_mode
        long long st_size
        long st_mtime
    int stat_path "stat"(const char *path, file_stat *st)
    int fstat(int fd, file_stat *st)
    bint S_ISREG(unsigned int mode)
    bint S_ISDIR(unsigned int mode)


cdef extern from "<stdlib.h>" nogil:
    # Static mounts (http_static_mounts.pxi): a path resolved, every symlink and `..`
    # followed, before it is checked to be inside its mount.
    char *realpath(const char *path, char *resolved)


cdef extern from "<fcntl.h>" nogil:
    int open_read "open"(const char *path, int flags)
    enum:
        O_RDONLY
        O_CLOEXEC
        O_DIRECTORY
