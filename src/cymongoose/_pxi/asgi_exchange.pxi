# The state of one ASGI HTTP request/response and its receive()/send(), for cymongoose.asgi.
# In Python these cost more than a raw ASGI app itself (about 250 bytecodes a request: making
# the object, send() twice, finishing). The common paths are here in C: a body that came
# with the head, a whole response in one http.response.body. The server's Python subclass
# (asgi_http.py's _HTTPCycle) adds the rarer ones: streaming both ways, waiting, errors. Each
# fast path either completes or hands the message, untouched, to that subclass; the core's
# http_respond() is all or nothing, so a refused response can be retried there and fail
# the same way, with the error logged once.

cdef int _asgi_stock_index(object headers) except -1:
    """Which of Date (1) and Server (2) the app's headers leave for the server to add."""
    cdef int stock = 3
    cdef Py_ssize_t n
    for pair in headers:
        name = pair[0]
        if type(name) is not bytes:
            continue  # the core refuses it with a clear error
        n = len(<bytes>name)
        if n == 4:
            if (<bytes>name).lower() == b"date":
                stock &= ~1
        elif n == 6 and (<bytes>name).lower() == b"server":
            stock &= ~2
    return stock


cdef class ASGIHTTPExchange:
    """One request and its response on the loop's thread; see cymongoose.asgi."""

    cdef public object task  # the app's task, set by the server
    cdef public object server
    cdef public Connection conn
    cdef public dict scope
    cdef public object body  # the whole request body, when it came with the head
    cdef public bint streaming  # the request body is still arriving
    cdef public int status  # from http.response.start (0: not yet)
    cdef public object headers
    cdef public bint head_sent
    cdef public bint complete
    cdef public bint closed  # the client went away
    cdef public bint failed  # a protocol error was logged
    # Made when a coroutine first waits: most requests never do.
    cdef public object rx
    cdef public object tx
    cdef public bint busy  # the connection's handler wants MG_EV_READ/WRITE for us
    cdef public long long sent  # body bytes sent (the access log's)
    cdef public double started  # perf_counter() at the head, when the access log is on

    def __cinit__(self, server, Connection conn, dict scope, *args, **kwargs):
        self.server = server
        self.conn = conn
        self.scope = scope
        self.headers = ()

    async def receive(self):
        if self.complete or self.closed:
            return {"type": "http.disconnect"}
        body = self.body
        if body is not None:
            self.body = None
            return {"type": "http.request", "body": body, "more_body": False}
        return await self._receive_wait()

    async def send(self, message):
        if not self.closed and type(message) is dict:
            kind = (<dict>message).get("type")
            if kind == "http.response.body":
                if (self.status and not self.head_sent and not self.complete
                        and not (<dict>message).get("more_body", False)):
                    body = (<dict>message).get("body", b"")
                    if type(body) is bytes and self._respond_whole(<bytes>body):
                        return
            elif kind == "http.response.start" and not self.status:
                status = (<dict>message).get("status")
                headers = (<dict>message).get("headers", ())
                if (type(status) is int and 200 <= <int>status <= 999
                        and type(headers) is list):
                    self.headers = headers
                    self.status = status
                    return
        await self._send_slow(message)

    cdef bint _respond_whole(self, bytes body) except -1:
        """The response in one write; False (nothing written) when the core refused it, for
        _send_slow to report."""
        cdef Connection conn = self.conn
        if conn._c == NULL:
            return False
        stock = self.server._stock[_asgi_stock_index(self.headers)]
        try:
            _http_respond(conn, self.status, self.headers, body, None, stock)
        except Exception:
            return False
        self.head_sent = True
        self.sent = len(body)
        self._finish()
        return True

    cpdef _finish(self):
        self.complete = True
        server = self.server
        if server._access is not None:
            server._log_access(self)
        if self.rx is not None:
            self.rx.wake()  # a receive() waiting for the disconnect returns now
        cdef Connection conn = self.conn
        if conn.userdata is self:
            conn.userdata = None
            if self.busy and conn._c != NULL and not conn._c.is_closing:
                conn.set_handler(server._on_quiet)
        self.busy = False
        server._driver_kick()


import asyncio as _asyncio
from asyncio import Task as _AsyncioTask

cdef str _ASGI_TASK_NAME = "cymongoose.asgi request"


cdef bint _asks_websocket(HttpMessage msg):
    cdef mg.mg_str *up = mg.mg_http_get_header(msg._hm, "Upgrade")
    return up != NULL and _is_named(up.buf, <Py_ssize_t>up.len, b"websocket", 9)


@cython.auto_pickle(False)
cdef class ASGILoop:
    """The ASGI server's per-request work on the loop, in C for the reason above: calling it
    is the handler of a connection waiting for a request head (it builds the scope and the
    exchange and starts the app's task; MG_EV_CLOSE tells the exchange its client left), and
    run_app() is that task. cymongoose.asgi fills in the fields and keeps the rarer paths:
    proxy headers, Unix-socket clients, max_requests (python_admission), WebSockets."""

    cymongoose_events = frozenset((MG_EV_HTTP_HDRS, MG_EV_CLOSE))  # @handles() equivalent

    cdef public object server
    cdef public object app
    cdef public object loop  # the asyncio loop the app's tasks run on
    cdef public set tasks  # the running apps' tasks (the loop keeps only weak references)
    cdef public object cycle_type  # the server's ASGIHTTPExchange subclass
    cdef public object busy_handler  # the handler that also takes READ/WRITE events
    cdef public dict bases  # listener port -> scope base
    cdef public dict base_default
    cdef public dict state  # lifespan state, copied into each scope
    cdef public set unix_conns  # ids of connections accepted on a Unix socket
    cdef public bint python_admission  # the server's _on_request() admits every request
    cdef public bint log_access

    def __call__(self, Connection conn, int ev, msg):
        if ev == mg.MG_EV_HTTP_HDRS:
            if self.python_admission:
                self.server._on_request(conn, msg)
            else:
                self._admit(conn, <HttpMessage?>msg)
            return
        cycle = conn.userdata
        if cycle is not None:
            cycle.gone()
        if self.unix_conns:
            self.unix_conns.discard(conn.id)

    cdef _admit(self, Connection conn, HttpMessage msg):
        cdef dict base = self.base_default
        if len(self.bases) > 1:  # several listeners: the one this client came in on
            local = conn.local_addr
            if local is not None:
                base = self.bases.get(local[1], base)
        cdef dict scope = _asgi_scope(msg, base, conn, self.state)
        if _asks_websocket(msg) and scope["method"] == "GET":
            self.server._on_websocket(conn, msg, scope)
            return
        self.start(conn, self.cycle_type(self.server, conn, scope))

    cpdef start(self, Connection conn, ASGIHTTPExchange cycle):
        """Hand the request body over (whole, or streamed as it arrives) and start the app."""
        if self.log_access:
            cycle.started = _perf_counter()  # the access log's duration starts at the head
        if conn.body_complete:
            cycle.body = conn.body_read() if conn.body_pending else b""
        else:
            cycle.streaming = True
            cycle.busy = True
            conn.set_handler(self.busy_handler)
        conn.userdata = cycle
        self.spawn(cycle)

    cpdef spawn(self, cycle):
        loop = self.loop
        if loop.get_task_factory() is None:
            # Python 3.11 formats a "Task-<n>" name for every task made without one (1.4k
            # instructions, 4% of a raw hello request); loop.create_task() names it only
            # after that, so the task is made here, with a fixed name.
            task = _AsyncioTask(self.run_app(cycle), loop=loop, name=_ASGI_TASK_NAME)
        else:
            task = loop.create_task(self.run_app(cycle))
        cycle.task = task
        self.tasks.add(task)  # the coroutine leaves the set itself: no done callback

    async def run_app(self, cycle):
        try:
            await self.app(cycle.scope, cycle.receive, cycle.send)
        except _asyncio.CancelledError:
            cycle.cancelled()
            raise
        except BaseException as exc:
            cycle.app_done(exc)
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
        else:
            if (type(cycle) is not self.cycle_type
                    or not ((<ASGIHTTPExchange>cycle).complete
                            or (<ASGIHTTPExchange>cycle).closed)):
                cycle.app_done(None)
        finally:
            self.tasks.discard(cycle.task)
