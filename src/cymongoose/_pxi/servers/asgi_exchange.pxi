# The state of one ASGI HTTP request/response and its receive()/send(), for cymongoose.asgi.
# In Python these cost more than a raw ASGI app itself (about 250 bytecodes a request: making
# the object, send() twice, finishing). The common paths are here in C: a body that came
# with the head, a whole response in one http.response.body. The server's Python subclass
# (asgi/http.py's _HTTPCycle) adds the rarer ones: streaming both ways, waiting, errors. Each
# fast path either completes or hands the message, untouched, to that subclass; the core's
# http_respond() is all or nothing, so a refused response can be retried there and fail
# the same way, with the error logged once. The classes' fields and hooks are declared in
# _mongoose.pxd: that is the whole of what this file knows about the server.

@cython.auto_pickle(False)
cdef class ASGIServerState:
    """What the ASGI server's exchanges and WebSocket cycles share; see cymongoose.asgi."""

    __init_subclass__ = classmethod(_check_server_hooks)

    def __cinit__(self):
        self.default_headers = [None, None, None, None]

    cpdef log_access(self, exchange):
        raise NotImplementedError(
            "ASGIServerState.log_access(): the server's subclass writes the access log")


_SERVER_HOOKS[ASGIServerState] = ("log_access",)


@cython.auto_pickle(False)  # asyncio futures: nothing to pickle
cdef class ASGIWaiter:
    """Where a cycle's coroutines wait for the loop; see asgi/shared.py."""

    __init_subclass__ = classmethod(_check_server_hooks)

    cpdef wake(self):
        raise NotImplementedError("ASGIWaiter.wake(): the server's subclass wakes its waiters")


_SERVER_HOOKS[ASGIWaiter] = ("wake",)


@cython.auto_pickle(False)  # a live connection and task: nothing to pickle
cdef class ASGICycle:
    """What ASGILoop runs an app for (an HTTP exchange, a WebSocket); see cymongoose.asgi."""

    __init_subclass__ = classmethod(_check_server_hooks)

    async def receive(self):
        raise NotImplementedError("ASGICycle.receive(): the server's subclass receives")

    async def send(self, message):
        raise NotImplementedError("ASGICycle.send(): the server's subclass sends")

    cpdef gone(self):
        raise NotImplementedError("ASGICycle.gone(): the server's subclass ends the cycle")

    cpdef app_done(self, exc):
        raise NotImplementedError(
            "ASGICycle.app_done(): the server's subclass ends what the app left")

    cpdef cancelled(self):
        raise NotImplementedError(
            "ASGICycle.cancelled(): the server's subclass ends a cancelled app's cycle")


_SERVER_HOOKS[ASGICycle] = ("receive", "send", "gone", "app_done", "cancelled")


@cython.auto_pickle(False)
cdef class ASGIHTTPExchange(ASGICycle):
    """One request and its response on the loop's thread; see cymongoose.asgi."""

    def __cinit__(self, ASGIServerState server_state not None, Connection conn, dict scope,
                  *args, **kwargs):
        self.server_state = server_state
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
        return await self.receive_slow()

    async def send(self, message):
        if not self.closed and type(message) is dict:
            kind = (<dict>message).get("type")
            if kind == "http.response.body":
                if (self.status and not self.head_sent and not self.complete
                        and not (<dict>message).get("more_body", False)):
                    body = (<dict>message).get("body", b"")
                    if type(body) is bytes and self._respond_whole(<bytes>body):
                        return
            elif (kind == "http.response.start" and not self.status
                    and not (<dict>message).get("trailers", False)):
                status = (<dict>message).get("status")
                headers = (<dict>message).get("headers", ())
                if (type(status) is int and 200 <= <int>status <= 999
                        and type(headers) is list):
                    self.headers = headers
                    self.status = status
                    return
        await self.send_slow(message)

    cpdef receive_slow(self):
        raise NotImplementedError(
            "ASGIHTTPExchange.receive_slow(): the server's subclass waits for the body")

    cpdef send_slow(self, message):
        raise NotImplementedError(
            "ASGIHTTPExchange.send_slow(): the server's subclass streams responses")

    cdef bint _respond_whole(self, bytes body) except -1:
        """The response in one write; False (nothing written) when the core refused it, for
        send_slow() to report."""
        cdef Connection conn = self.conn
        if conn._c == NULL:
            return False
        stock = self.server_state.default_headers[_missing_default_headers(self.headers)]
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
        cdef ASGIServerState shared = self.server_state
        if shared.access_log_on:
            shared.log_access(self)
        if self.rx is not None:
            self.rx.wake()  # a receive() waiting for the disconnect returns now
        cdef Connection conn = self.conn
        if conn.userdata is self:
            conn.userdata = None
            if self.busy and conn._c != NULL and not conn._c.is_closing:
                conn.set_handler(shared.quiet_handler)
        self.busy = False
        shared.kick()


_SERVER_HOOKS[ASGIHTTPExchange] = ("receive_slow", "send_slow")


cdef str _ASGI_TASK_NAME = "cymongoose.asgi request"
# Python 3.12's tasks can start eagerly: see ASGILoop._spawn.
cdef bint _EAGER_TASKS = sys_version_info >= (3, 12)


cdef bint _asks_websocket(HttpMessage msg):
    cdef mg.mg_str *up = mg.mg_http_get_header(msg._hm, "Upgrade")
    return up != NULL and _is_named(up.buf, <Py_ssize_t>up.len, b"websocket", 9)


@cython.auto_pickle(False)
cdef class ASGILoop(_LoopHandler):
    """The ASGI server's per-request work on the loop, in C for the reason above: calling it
    is the handler of a connection waiting for a request head (it builds the scope and the
    exchange and starts the app's task; MG_EV_CLOSE tells the exchange its client left), and
    run_app() is that task. cymongoose.asgi's subclass (asgi/admission.py) fills in the fields
    and implements the hooks for the rarer paths: proxy headers, Unix-socket clients,
    max_requests (python_admission), WebSockets."""

    cymongoose_events = frozenset((MG_EV_HTTP_HDRS, MG_EV_CLOSE))  # @handles() equivalent
    __init_subclass__ = classmethod(_check_server_hooks)

    cdef int on_event(self, Connection conn, int ev, object msg) except -1:
        if ev == mg.MG_EV_HTTP_HDRS:
            if self.python_admission:
                self.admit_request(conn, <HttpMessage?>msg)
            else:
                self._admit(conn, <HttpMessage?>msg)
            return 0
        cycle = conn.userdata
        if cycle is not None:
            (<ASGICycle?>cycle).gone()
        if self.unix_conns:
            self.unix_conns.discard(conn.id)
        return 0

    def __call__(self, Connection conn, int ev, msg):
        self.on_event(conn, ev, msg)

    cdef _admit(self, Connection conn, HttpMessage msg):
        cdef dict base = self.base_default
        if len(self.bases) > 1:  # several listeners: the one this client came in on
            local = conn.local_addr
            if local is not None:
                base = self.bases.get(local[1], base)
        cdef dict scope = _asgi_scope(msg, base, conn, self.lifespan_state)
        if _asks_websocket(msg) and scope["method"] == "GET":
            self.admit_websocket(conn, msg, scope)
            return
        self._start(conn, self.exchange_type(self.server_state, conn, scope))

    cpdef admit_request(self, Connection conn, HttpMessage msg):
        raise NotImplementedError(
            "ASGILoop.admit_request(): the server's subclass admits requests that need Python")

    cpdef admit_websocket(self, Connection conn, HttpMessage msg, dict scope):
        raise NotImplementedError(
            "ASGILoop.admit_websocket(): the server's subclass answers WebSocket handshakes")

    def start(self, Connection conn, ASGIHTTPExchange exchange not None):
        """Hand the request body over (whole, or streamed as it arrives) and start the app."""
        self._start(conn, exchange)

    def spawn(self, ASGICycle cycle not None):
        """Run the app for `cycle` (an exchange or a WebSocket cycle) as a task."""
        self._spawn(cycle)

    cdef _start(self, Connection conn, ASGIHTTPExchange exchange):
        cdef ASGIServerState shared = self.server_state
        if shared.clock_requests:
            # The access log's duration and the request deadline start at the head.
            exchange.started = time_perf_counter()
        if conn.body_complete:
            exchange.body = conn.body_read() if conn.body_pending else b""
        else:
            exchange.streaming = True
            exchange.busy = True
            conn.set_handler(shared.busy_handler)
        conn.userdata = exchange
        self._spawn(exchange, True)

    cdef _spawn(self, ASGICycle cycle, bint eager=False):
        loop = self.loop
        import_asyncio()  # once: the first task of an asyncio loop (run_app() needs it too)
        if loop.get_task_factory() is None:
            # Python 3.11 formats a "Task-<n>" name for every task made without one (1.4k
            # instructions, 4% of a raw hello request); loop.create_task() names it only
            # after that, so the task is made here, with a fixed name.
            if eager and _EAGER_TASKS:
                # An HTTP request's app runs at once, inside its head's event, up to its
                # first wait: an app that answers without waiting is done before the task
                # is ever scheduled (no handle, no turn of the loop, and its response is
                # written in this poll). A WebSocket app is not started this way: its
                # handshake must finish first.
                task = asyncio_Task(self.run_app(cycle), loop=loop, name=_ASGI_TASK_NAME,
                                    eager_start=True)
                if task.done():
                    return  # run_app() ended: no task to keep, none to cancel
            else:
                task = asyncio_Task(self.run_app(cycle), loop=loop, name=_ASGI_TASK_NAME)
        else:
            task = loop.create_task(self.run_app(cycle))
        cycle.task = task
        self.tasks.add(task)  # the coroutine leaves the set itself: no done callback

    async def run_app(self, ASGICycle cycle not None):
        try:
            await self.app(cycle.scope, cycle.receive, cycle.send)
        except asyncio_CancelledError:
            cycle.cancelled()
            raise
        except BaseException as exc:
            cycle.app_done(exc)
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
        else:
            if (type(cycle) is not self.exchange_type
                    or not ((<ASGIHTTPExchange>cycle).complete
                            or (<ASGIHTTPExchange>cycle).closed)):
                cycle.app_done(None)
        finally:
            self.tasks.discard(cycle.task)


_SERVER_HOOKS[ASGILoop] = ("admit_request", "admit_websocket")
