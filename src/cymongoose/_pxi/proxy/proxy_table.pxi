# The reverse proxy's configuration in C (ProxyTable): upstreams with their connection pools
# and health, the mounts that route a path prefix to a group of upstreams, the trusted peers
# whose X-Forwarded-* fields are passed on, and the choice of an upstream for a request.
# Built once from Python (cymongoose.proxy) and read without the GIL by proxy_exchange.pxi.

cdef enum:
    _LB_ROUND_ROBIN = 0
    _LB_LEAST_CONN = 1

cdef enum:
    _PX_MAX_UPSTREAMS = 64  # an exchange remembers the upstreams it tried in one uint64_t


cdef struct ProxyUpstream:
    char *label  # the URL as configured, for logs and Proxy.stats()
    char *connect_url  # what mg_connect() takes: tcp://<resolved address>:<port>
    char *authority  # host[:port], the Host field for a client that sent none (HTTP/1.0)
    char *path  # the URL's path without a trailing '/' ("" when none): replaces the prefix
    size_t path_len
    int index
    # https upstreams (OpenSSL engine): the shared client SSL_CTX of the upstream's TlsOpts
    # (ProxyTable keeps the TlsOpts, which owns it), the name sent as SNI and checked
    # against the certificate, and whether the chain is verified (a CA was given).
    void *tls_ctx
    char *tls_name
    bint tls_verifies
    bint tls_skip
    # Health: `fails` consecutive failures; at max_fails the upstream is marked down until
    # down_until_ms (passive: out only while its route has another usable member, see
    # _px_choose). probe_down: the active check's last answer was bad (out of every route).
    int fails
    uint64_t down_until_ms
    bint probe_down
    # The pool: every connection is counted in n_open (connecting, busy or idle); idle ones
    # are on a stack, most recently used first (warm, and the cold ones time out at the end).
    size_t n_open
    size_t n_busy
    size_t n_idle
    void *idle  # _UpConn *
    void *wait_head  # _Exchange * queue: requests waiting for a connection of this upstream
    void *wait_tail
    size_t n_waiting
    uint64_t opened  # connections opened since start (Proxy.stats())
    unsigned address_gen  # set_address() count: connections to an older address retire
    uint64_t requests  # requests sent


cdef struct ProxyGroup:
    char *prefix
    size_t prefix_len
    ProxyUpstream **members
    int n
    unsigned next  # round robin position


cdef struct ProxyNet:
    int family  # 4 or 6
    uint8_t addr[16]
    int bits


cdef struct ProxyConf:
    ProxyGroup *groups
    int n_groups
    ProxyUpstream *ups
    int n_ups
    int lb
    size_t pool_size  # connections per upstream, at most
    uint64_t connect_timeout_ms
    uint64_t read_timeout_ms
    uint64_t idle_timeout_ms  # a pooled connection idle this long is closed
    int max_fails
    uint64_t fail_timeout_ms
    size_t max_head  # an upstream response head larger than this is a 502
    bint via
    bint trust_any
    ProxyNet *trusted
    int n_trusted
    void *route  # borrowed: ProxyTable._route (a callable or None)
    void *owner  # borrowed ProxyTable


cdef char *_px_strdup(object text) except NULL:
    cdef bytes b = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    cdef char *out = <char *>calloc(len(b) + 1, 1)
    if out == NULL:
        raise MemoryError()
    memcpy(out, <const char *>b, len(b))
    return out


cdef class ProxyTable:
    """The core's form of a reverse proxy's routes (see cymongoose.proxy.ReverseProxy, which
    checks and resolves everything before it builds one)."""

    cdef ProxyConf _conf
    cdef object _route
    cdef dict _by_label  # label -> index in _conf.ups, for the routing hook's answers
    cdef list _tls  # the TlsOpts of https upstreams: they own the SSL_CTXs the pool uses
    cdef bint _attached  # a Manager's: its pools and exchanges belong to that loop

    def __cinit__(self):
        memset(&self._conf, 0, sizeof(ProxyConf))
        self._conf.owner = <void *>self
        self._by_label = {}
        self._tls = []

    def __init__(self, upstreams, mounts, *, int lb=0, size_t pool_size=64,
                 double connect_timeout=5.0, double read_timeout=60.0,
                 double idle_timeout=4.0, int max_fails=3, double fail_timeout=10.0,
                 size_t max_head=65536, bint via=False, trusted=(), bint trust_any=False,
                 route=None, tls=None):
        """upstreams: (label, connect_url, authority, path) tuples; mounts: (prefix,
        [upstream indexes]) pairs; trusted: (family, packed address, prefix bits); tls:
        {upstream index: TlsOpts} for https upstreams (name: SNI and the name checked)."""
        cdef int i, j
        cdef ProxyUpstream *u
        cdef ProxyGroup *grp
        if self._conf.ups != NULL:
            raise RuntimeError("ProxyTable is built once")
        if not 0 < len(upstreams) <= _PX_MAX_UPSTREAMS:
            raise ValueError(f"a proxy has 1 to {_PX_MAX_UPSTREAMS} upstreams")
        if pool_size < 1:
            raise ValueError("pool_size must be >= 1")
        self._conf.ups = <ProxyUpstream *>calloc(len(upstreams), sizeof(ProxyUpstream))
        if self._conf.ups == NULL:
            raise MemoryError()
        for i, (label, connect_url, authority, path) in enumerate(upstreams):
            u = &self._conf.ups[i]
            self._conf.n_ups = i + 1
            u.index = i
            u.label = _px_strdup(label)
            u.connect_url = _px_strdup(connect_url)
            u.authority = _px_strdup(authority)
            u.path = _px_strdup(path)
            u.path_len = strlen(u.path)
            u.tls_name = NULL
            self._by_label[label] = i
        for i, opts in (tls or {}).items():
            self._use_tls(i, opts)
        self._conf.groups = <ProxyGroup *>calloc(len(mounts) or 1, sizeof(ProxyGroup))
        if self._conf.groups == NULL:
            raise MemoryError()
        for i, (prefix, members) in enumerate(mounts):
            grp = &self._conf.groups[i]
            self._conf.n_groups = i + 1
            grp.prefix = _px_strdup(prefix)
            grp.prefix_len = strlen(grp.prefix)
            grp.members = <ProxyUpstream **>calloc(len(members) or 1, sizeof(void *))
            if grp.members == NULL:
                raise MemoryError()
            for j, index in enumerate(members):
                if not 0 <= index < self._conf.n_ups:
                    raise ValueError(f"mount {prefix!r} names upstream {index}, not one")
                grp.members[j] = &self._conf.ups[index]
                grp.n = j + 1
        self._conf.trusted = <ProxyNet *>calloc(len(trusted) or 1, sizeof(ProxyNet))
        if self._conf.trusted == NULL:
            raise MemoryError()
        for i, (family, packed, bits) in enumerate(trusted):
            if family not in (4, 6) or len(packed) != (4 if family == 4 else 16):
                raise ValueError("trusted networks are (4 or 6, packed address, bits)")
            self._conf.trusted[i].family = family
            memcpy(self._conf.trusted[i].addr, <const char *>packed, len(packed))
            self._conf.trusted[i].bits = bits
            self._conf.n_trusted = i + 1
        self._conf.trust_any = trust_any
        self._conf.lb = lb
        self._conf.pool_size = pool_size
        self._conf.connect_timeout_ms = <uint64_t>(connect_timeout * 1000)
        self._conf.read_timeout_ms = <uint64_t>(read_timeout * 1000)
        self._conf.idle_timeout_ms = <uint64_t>(idle_timeout * 1000)
        self._conf.max_fails = max_fails
        self._conf.fail_timeout_ms = <uint64_t>(fail_timeout * 1000)
        self._conf.max_head = max_head
        self._conf.via = via
        if route is not None and not callable(route):
            raise TypeError("route must be a callable or None")
        self._route = route
        self._conf.route = <void *>route if route is not None else NULL

    cdef int _use_tls(self, int i, TlsOpts opts) except -1:
        cdef ProxyUpstream *u
        if not 0 <= i < self._conf.n_ups:
            raise ValueError(f"tls names upstream {i}, not one")
        if not mg.CYM_TLS_OPENSSL:
            raise ValueError("https upstreams need the OpenSSL TLS engine (this build has "
                             f"{TLS_ENGINE!r})")
        u = &self._conf.ups[i]
        with opts._lock:  # the TlsOpts may serve other loops' connections meanwhile
            prepared = _tls_prepared(opts)
            u.tls_ctx = _tls_shared_context(opts, True, prepared[0], b"", b"", prepared[4])
        u.tls_name = _px_strdup(prepared[3])
        u.tls_verifies = len(prepared[0]) > 0
        u.tls_skip = opts.skip_verification
        self._tls.append(opts)
        return 0

    def __dealloc__(self):
        cdef int i
        # Attached Managers hold a reference: by now every one of them is closed, so no
        # connection or exchange points into this memory any more.
        if self._conf.ups != NULL:
            for i in range(self._conf.n_ups):
                free(self._conf.ups[i].label)
                free(self._conf.ups[i].connect_url)
                free(self._conf.ups[i].authority)
                free(self._conf.ups[i].path)
                free(self._conf.ups[i].tls_name)
            free(self._conf.ups)
        if self._conf.groups != NULL:
            for i in range(self._conf.n_groups):
                free(self._conf.groups[i].prefix)
                free(self._conf.groups[i].members)
            free(self._conf.groups)
        free(self._conf.trusted)

    def stats(self):
        """Per upstream, in order: a dict of its pool and health right now."""
        cdef int i
        cdef ProxyUpstream *u
        cdef uint64_t now = mg.mg_millis()
        out = []
        for i in range(self._conf.n_ups):
            u = &self._conf.ups[i]
            out.append({
                "upstream": u.label.decode("utf-8"), "open": u.n_open, "busy": u.n_busy,
                "idle": u.n_idle, "waiting": u.n_waiting, "opened": u.opened,
                "requests": u.requests, "failures": u.fails,
                "up": not (u.probe_down or u.down_until_ms > now),
            })
        return out

    def set_probe_result(self, int index, bint healthy):
        """The active health check's verdict on upstream `index` (cymongoose.proxy)."""
        if not 0 <= index < self._conf.n_ups:
            raise IndexError(index)
        self._conf.ups[index].probe_down = not healthy
        if healthy:
            self._conf.ups[index].fails = 0
            self._conf.ups[index].down_until_ms = 0

    def set_address(self, int index, connect_url):
        """Where upstream `index` is connected to from now on (`tcp://ADDRESS:PORT`): its
        name resolved anew. Connections already open stay as they are."""
        cdef char *url
        if not 0 <= index < self._conf.n_ups:
            raise IndexError(index)
        url = _px_strdup(connect_url)
        # mg_connect() reads the URL during the call only: the old string can go now.
        free(self._conf.ups[index].connect_url)
        self._conf.ups[index].connect_url = url
        _px_retire_address(&self._conf.ups[index])

    def index_of(self, label):
        return self._by_label.get(label)


cdef bint _px_trusted(const ProxyConf *conf, mg.mg_connection *c) noexcept nogil:
    """Whether the client may speak for others (X-Forwarded-*): a peer in the trusted
    networks, or one with no address (a Unix socket, which is local)."""
    cdef const ProxyNet *net
    cdef const uint8_t *ip = c.rem.addr.ip
    cdef int i, bits, k
    cdef int family = 6 if c.rem.is_ip6 else 4
    cdef bint zero = True
    if conf.trust_any:
        return True
    if c.rem.port == 0:
        for k in range(16 if c.rem.is_ip6 else 4):
            if ip[k]:
                zero = False
        if zero:
            return True
    for i in range(conf.n_trusted):
        net = &conf.trusted[i]
        if net.family != family:
            continue
        bits = net.bits
        k = 0
        while bits >= 8 and ip[k] == net.addr[k]:
            bits -= 8
            k += 1
        if bits >= 8:
            continue
        if bits == 0 or ((ip[k] ^ net.addr[k]) >> (8 - bits)) == 0:
            return True
    return False


cdef ProxyGroup *_px_match(const ProxyConf *conf, const unsigned char *target,
                           size_t n) noexcept nogil:
    """The mount whose prefix is the longest to match an origin-form target: "/api" takes
    /api, /api/x and /api?q, never /apix."""
    cdef ProxyGroup *best = NULL
    cdef ProxyGroup *grp
    cdef size_t plen
    cdef unsigned char next_ch
    cdef int i
    if n == 0 or target[0] != c'/':
        return NULL
    for i in range(conf.n_groups):
        grp = &conf.groups[i]
        plen = grp.prefix_len
        if plen > n or memcmp(target, grp.prefix, plen) != 0:
            continue
        if plen < n and grp.prefix[plen - 1] != c'/':
            next_ch = target[plen]
            if next_ch != c'/' and next_ch != c'?':
                continue
        if best == NULL or plen > best.prefix_len:
            best = grp
    return best


cdef inline bint _px_usable(const ProxyConf *conf, ProxyUpstream *u,
                            uint64_t now) noexcept nogil:
    return not u.probe_down and u.down_until_ms <= now


cdef ProxyUpstream *_px_choose(const ProxyConf *conf, ProxyGroup *grp, uint64_t tried,
                               uint64_t now, bint *all_down) noexcept nogil:
    """The group's next upstream for a request that already tried the `tried` ones; NULL
    when none is left. all_down: the active health check has every member out, a 503.

    Passive marks (max_fails) hold an upstream out only while another member of the group
    is usable: when every member the active check left in is marked, the request tries
    them anyway, in the usual order. A passive mark is a guess from past failures; holding
    out the route's last candidates turns that guess into a certain 503, for fail_timeout
    after the backend is back (every restart of a lone backend cost 10 s of 503s). nginx
    1.22 never marks a sole server down either; with several all marked it answers 502 "no
    live upstreams" until fail_timeout passes, which we do not follow, for the same reason.
    Only the active check (--proxy-health-path), which asks the backend itself, holds a
    whole route out."""
    cdef ProxyUpstream *u
    cdef ProxyUpstream *best = NULL
    cdef size_t load, best_load = 0
    cdef int i, k
    cdef bint any_usable = False
    all_down[0] = True
    for i in range(grp.n):
        if not grp.members[i].probe_down:
            all_down[0] = False
        if _px_usable(conf, grp.members[i], now):
            any_usable = True
    for k in range(grp.n):
        i = (grp.next + k) % grp.n
        u = grp.members[i]
        if (tried >> u.index) & 1 or u.probe_down or (any_usable and u.down_until_ms > now):
            continue
        if conf.lb == _LB_ROUND_ROBIN:
            grp.next = <unsigned>(i + 1) % grp.n
            return u
        load = u.n_busy + u.n_waiting
        if best == NULL or load < best_load:
            best = u
            best_load = load
    if best != NULL:
        grp.next = <unsigned>(best.index + 1) % grp.n
    return best


cdef void _px_failed(const ProxyConf *conf, ProxyUpstream *u, uint64_t now) noexcept nogil:
    # Passive health: max_fails failures in a row take the upstream out for fail_timeout.
    u.fails += 1
    if conf.max_fails and u.fails >= conf.max_fails:
        u.down_until_ms = now + conf.fail_timeout_ms
        u.fails = 0


cdef inline void _px_succeeded(ProxyUpstream *u) noexcept nogil:
    # It answered: a passive mark (kept while it was tried anyway, _px_choose) ends.
    u.fails = 0
    u.down_until_ms = 0
