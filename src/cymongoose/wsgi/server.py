"""PEP 3333 server on the Mongoose loop: Flask, Django or any WSGI app at C-loop speed.

Threads take turns owning the Manager (leader/followers, wsgi_threads.py): the owner polls and
runs the apps of the requests that poll delivered inline, one after another, so under load no
request crosses a thread and the GIL does not change hands per request. A standby thread takes
the loop over from an owner stuck in one app for `_STALL_S`; that app finishes on its own
thread and hands its response to the loop through an outbox (`Manager.call_soon_threadsafe`).
An app that must wait for the loop (a body still arriving, a client slow to read) hands the
loop over before it waits. docs/wsgi.md says what is guaranteed, docs/performance.md what it
costs.

Responses leave through the core's `http_respond` (a whole body) or `http_begin/http_write/
http_sendfile/http_end` (streamed), which keep keep-alive, pipelining, HEAD and
`Connection: close` right. Request bodies stream (`listen(..., stream_body=True)`): the loop
stops reading a socket while its app is behind.
"""

from __future__ import annotations

import collections
import io
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from .._mongoose import (
    MG_EV_ACCEPT,
    MG_EV_CLOSE,
    MG_EV_HTTP_HDRS,
    MG_EV_READ,
    MG_EV_WRITE,
    Connection,
    HeaderBlock,
    Manager,
    RequestBodyTooLarge,
    TlsOpts,
    WSGILoop,
    handles,
    wsgi_environ_base,
)
from ..access_log import AccessLog
from ..config import Config, renamed
from ..errors import ClientDisconnected
from ..proxy_headers import ProxyHeaders
from ..serving import (
    SERVER_NAME,
    DateHeader,
    adopt_listener,
    error_log,
    load_app,
    report_exception,
)
from ..serving.stop_signals import StopSignals
from ..typedefs import AppRef, WSGIApp
from .bodies import _NO_BODY, FileWrapper, _StreamInput
from .threads import (
    _OP_ABORT,
    _OP_BEGIN,
    _OP_END,
    _OP_FILE,
    _OP_WHOLE,
    _OP_WRITE,
    _SEND_LOW,
    _STALL_S,
    _Exchange,
    _LoopTurns,
)

__all__ = ["WSGIServer", "serve"]

_RESPONSE_500 = b"Internal Server Error\n"


class _EnvironKeys(dict[str, str]):
    """Header name -> its environ key ("user-agent" -> "HTTP_USER_AGENT"), made once."""

    def __missing__(self, name: str) -> str:
        key = self[name] = "HTTP_" + name.upper().replace("-", "_")
        return key


_ENVIRON_KEYS = _EnvironKeys()

# Stopping: a connection with no request in flight is closed after being idle this long.
_IDLE_GRACE_S = 0.1


def _nothing() -> None:
    pass




class WSGIServer:
    """Serve a WSGI app on a Manager of its own; see the module docstring."""

    def __init__(self, app: AppRef, workers: int | None = None,
                 error_handler: Callable[[BaseException], object] | None = None,
                 stream_timeout: float | None = None, *, threads: int | None = None,
                 factory: bool | None = None, root_path: str | None = None,
                 url_scheme: str | None = None, access_log: AccessLog | None = None,
                 proxy_headers: ProxyHeaders | None = None, tls: TlsOpts | None = None,
                 graceful_timeout: float | None = None, max_requests: int | None = None,
                 config: Config | None = None) -> None:
        # Each option keyword overrides `config` (the defaults without it), checked by the
        # settings table's rule; 0.2.x's `workers` is the number of app threads.
        threads = renamed("WSGIServer", "workers", workers, "threads", threads,
                          " (the number of app threads; the command line's --workers "
                          "counts processes)")
        cfg = self.config = Config.for_server(
            config, threads=threads, stream_timeout=stream_timeout, factory=factory,
            root_path=root_path, graceful_timeout=graceful_timeout, max_requests=max_requests)
        count, stream_timeout, factory = cfg.threads, cfg.stream_timeout, cfg.factory
        root_path, graceful_timeout, max_requests = (cfg.root_path, cfg.graceful_timeout,
                                                     cfg.max_requests)
        access_log = access_log if access_log is not None else cfg.new_access_log()
        proxy_headers = proxy_headers if proxy_headers is not None else cfg.new_proxy_headers()
        tls = tls if tls is not None else cfg.new_tls()
        self._app: WSGIApp = load_app(app, factory)
        self._access = access_log
        self._proxy = proxy_headers
        self._tls = tls
        self.graceful_timeout = float(graceful_timeout)
        # Requests left before this server stops by itself (a worker recycled after
        # --max-requests); -1: no limit.
        self._requests_left = max_requests or -1
        #: Called once when max_requests is reached, before the server drains and stops.
        self.on_max_requests: Callable[[], object] | None = None
        #: Called once, from stop(), when the server starts to stop (any thread).
        self.on_stop: Callable[[], object] | None = None
        #: Called by run() once a stop signal would be honoured: a supervisor told "ready"
        #: from here cannot kill the server with a SIGTERM it sends at once.
        self.on_ready: Callable[[], object] | None = None
        self._listeners: list[Connection] = []
        self._unix_conns: set[int] = set()  # connections accepted on a Unix socket
        self.stream_timeout = float(stream_timeout)
        self._error_handler = error_handler
        self._root_path = root_path
        self._url_scheme = url_scheme
        self._manager = Manager(None, enable_wakeup=True, error_handler=error_handler)
        self._manager.set_http_limits(**cfg.limits())  # listen(**limits) overrides them
        # App threads need the GIL while the loop waits: never wait holding it.
        self._manager.linger_ms = 0
        if access_log is not None:  # requests the core refused are logged too
            self._manager.refusal_handler = access_log.log_refusal
        self._turns = _LoopTurns(self, count, _STALL_S)
        self._outbox: collections.deque[tuple[_Exchange, int, Any]] = collections.deque()
        self._wake_pending = False  # a wake-up of the loop is on its way
        self._poll_ms = 100
        self._closed = False
        self._date = DateHeader()
        self._draining = False
        self._stock_lists: list[HeaderBlock | None] = []
        self._refresh_stock()
        self._manager.timer_add(1000, self._refresh_stock, repeat=True)
        self._bases: dict[int, dict[str, Any]] = {}
        self._base_default: dict[str, Any] = {}
        self._live: set[_Exchange] = set()

        on_head = self._on_request

        @handles(MG_EV_HTTP_HDRS, MG_EV_CLOSE)
        def on_request(conn: Connection, ev: int, msg: Any) -> None:
            if ev == MG_EV_HTTP_HDRS:
                on_head(conn, msg)
            else:
                ex = conn.userdata
                if ex is not None:
                    self._live.discard(ex)
                    ex.gone()
                if self._unix_conns:
                    self._unix_conns.discard(conn.id)

        @handles(MG_EV_HTTP_HDRS, MG_EV_READ, MG_EV_WRITE, MG_EV_CLOSE)
        def on_stream(conn: Connection, ev: int, msg: Any) -> None:
            ex = conn.userdata
            if ev == MG_EV_READ:
                if ex is not None and ex.input is not None:
                    ex.feed_input()
            elif ev == MG_EV_WRITE:
                if ex is not None:
                    ex.backlog = conn.send_len
                    if ex.waiting and ex.backlog < _SEND_LOW:
                        ex.notify_writer()
            else:
                on_request(conn, ev, msg)

        self._on_busy = on_stream
        self._on_request_py = on_request

        # The per-request loop work in C (WSGILoop, wsgi_exchange.pxi): admitting requests,
        # running the owner's batch of apps, writing whole responses. Admission is Python's
        # (on_request above) while proxy headers or max_requests are on, and for Unix-socket
        # clients: those need the extra steps of _on_request.
        loop_side = WSGILoop()
        loop_side.server = self
        loop_side.exchange_type = _Exchange
        loop_side.stream_input_type = _StreamInput
        loop_side.no_body = _NO_BODY
        loop_side.pending = self._turns.pending
        loop_side.live = self._live
        loop_side.bases = self._bases
        loop_side.base_default = self._base_default
        loop_side.root_path = root_path
        loop_side.outbox = self._outbox
        loop_side.busy_handler = on_stream
        loop_side.log_access = access_log is not None
        self._loop_side = loop_side
        fast = proxy_headers is None and self._requests_left < 0
        self._on_quiet: Any = loop_side if fast else on_request
        loop_side.quiet_handler = self._on_quiet

        tls_opts = tls

        @handles(MG_EV_ACCEPT)
        def on_accept_tls(conn: Connection, ev: int, msg: Any) -> None:
            conn.set_handler(self._on_quiet)
            assert tls_opts is not None
            conn.tls_init(tls_opts)

        @handles(MG_EV_ACCEPT)
        def on_accept_unix(conn: Connection, ev: int, msg: Any) -> None:
            conn.set_handler(on_request)
            self._unix_conns.add(conn.id)

        self._on_accept_tls = on_accept_tls
        self._on_accept_unix = on_accept_unix

    @property
    def manager(self) -> Manager:
        return self._manager

    def listen(self, url: str = "http://127.0.0.1:8000", **limits: Any) -> Connection:
        tls = url.startswith("https")
        if tls and self._tls is None:
            raise ValueError("an https:// listener needs tls=TlsOpts(cert=..., key=...)")
        handler = self._on_accept_tls if tls else self._on_quiet
        conn = self._manager.listen(url, handler, stream_body=True, **limits)
        local = conn.local_addr
        assert local is not None  # a listener just opened
        self._add_base(local[0], local[1], "https" if tls else "http")
        self._listeners.append(conn)
        return conn

    def listen_socket(self, sock: Any, *, tls: bool = False, **limits: Any) -> Connection:
        """Serve on a listening TCP or Unix socket opened elsewhere (bound in Python, shared
        by worker processes, handed over by systemd); the caller keeps and closes `sock`.
        `tls=True` serves HTTPS with the server's `tls` options."""
        if tls and self._tls is None:
            raise ValueError("tls=True needs the server's tls=TlsOpts(cert=..., key=...)")
        conn, unix, name = adopt_listener(
            self._manager, sock, tls=tls, on_unix=self._on_accept_unix,
            on_tls=self._on_accept_tls, on_plain=self._on_quiet, **limits)
        if unix:
            self._unix_base = self._make_base("localhost", "0", "http")
            # Clients of a Unix socket need _on_request's steps, also after a busy spell.
            self._on_quiet = self._loop_side.quiet_handler = self._on_request_py
        else:
            self._add_base(name[0], name[1], "https" if tls else "http")
        self._listeners.append(conn)
        return conn

    def _add_base(self, host: str, port: int, scheme: str) -> None:
        self._bases[port] = self._make_base(host, str(port), scheme)
        self._base_default = self._loop_side.base_default = self._bases[port]

    def _make_base(self, host: str, port: str, scheme: str) -> dict[str, Any]:
        scheme = self._url_scheme or scheme
        return wsgi_environ_base({
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": scheme,
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
            "wsgi.input_terminated": True,
            "wsgi.file_wrapper": FileWrapper,
            "SERVER_NAME": host,
            "SERVER_PORT": port,
            "SCRIPT_NAME": self._root_path,
        })

    # Loop side.
    def _on_request(self, conn: Connection, msg: Any) -> None:
        base = self._base_default
        if len(self._bases) > 1:  # several listeners: the one this client came in on
            local = conn.local_addr
            if local is not None:
                base = self._bases.get(local[1], base)
        if self._unix_conns and conn.id in self._unix_conns:
            base = self._unix_base
            environ = msg.wsgi_environ(base, conn, self._root_path)
            # Mongoose reads no address from an AF_UNIX peer: the client is local.
            environ["REMOTE_ADDR"] = "127.0.0.1"
            environ["REMOTE_PORT"] = "0"
            if self._proxy is not None:
                self._apply_proxy(environ, None)
        else:
            environ = msg.wsgi_environ(base, conn, self._root_path)
            if self._proxy is not None:
                self._apply_proxy(environ, environ["REMOTE_ADDR"])
        method = environ["REQUEST_METHOD"]
        ex = _Exchange(self, conn, environ, method == "HEAD")
        if self._access is not None:
            ex.started = time.perf_counter()
        if self._requests_left > 0:
            self._requests_left -= 1
            if self._requests_left == 0:
                if self.on_max_requests is not None:
                    self.on_max_requests()
                self.stop()  # recycled: finish this one and the others in flight, then exit
        if conn.body_complete:
            environ["wsgi.input"] = (io.BytesIO(conn.body_read()) if conn.body_pending
                                     else _NO_BODY)
        else:
            ex.input = _StreamInput(ex)
            environ["wsgi.input"] = ex.input
            ex.busy = True
            conn.set_handler(self._on_busy)
            ex.feed_input()
        conn.userdata = ex
        self._live.add(ex)
        self._turns.pending.append(ex)

    def _apply_proxy(self, environ: dict[str, Any], peer: str | None) -> None:
        """Trusted proxy headers (proxy_headers.py) into REMOTE_ADDR, the scheme and Host."""
        assert self._proxy is not None
        fwd = self._proxy.resolve(
            peer, forwarded=environ.get("HTTP_FORWARDED"),
            x_forwarded_for=environ.get("HTTP_X_FORWARDED_FOR"),
            x_forwarded_proto=environ.get("HTTP_X_FORWARDED_PROTO"),
            x_forwarded_host=environ.get("HTTP_X_FORWARDED_HOST"))
        if fwd.client_host is not None:
            environ["REMOTE_ADDR"] = fwd.client_host
            environ["REMOTE_PORT"] = str(fwd.client_port or 0)
        if fwd.scheme is not None:
            environ["wsgi.url_scheme"] = "https" if fwd.scheme in ("https", "wss") else "http"
        if fwd.host is not None:
            environ["HTTP_HOST"] = fwd.host

    def _body_too_large(self, ex: _Exchange, exc: RequestBodyTooLarge) -> None:
        """Loop side: the request body went over max_body_size while the app had the
        request. The core answered 413 (or closed, once the response had started): the
        exchange ends here, with one access-log line; wsgi.input.read() raises `exc`, which
        names the limit, and whatever the app sends after is dropped."""
        if ex.closed or ex.finished:
            return
        ex.closed = True
        if ex.input is not None:
            ex.input.fail(exc)
        ex.notify_writer()
        env = ex.environ
        error_log.info("%s %s: %s", env["REQUEST_METHOD"], env["PATH_INFO"], exc)
        ex.finished = True
        self._live.discard(ex)
        if self._access is not None:
            if exc.answered:
                ex.status, ex.sent = (413, None), 0
            self._log_access(ex)

    def _body_refused(self, ex: _Exchange) -> bool:
        """Whether the core refused this request's body (then handled as such): the app
        may answer before its reads would have told it."""
        try:
            ex.conn.body_read(0)
        except RequestBodyTooLarge as exc:
            self._body_too_large(ex, exc)
            return True
        except (RuntimeError, OSError):  # closed, or broken framing: not a refusal
            pass
        return False

    def _log_access(self, ex: _Exchange) -> None:
        access = self._access
        assert access is not None
        env = ex.environ
        status = ex.status[0] if ex.status is not None else 0
        try:
            access.log(env["REMOTE_ADDR"], env["REQUEST_METHOD"],
                       env["SCRIPT_NAME"] + env["PATH_INFO"], env["QUERY_STRING"],
                       env["SERVER_PROTOCOL"], status, 0 if ex.is_head else ex.sent,
                       time.perf_counter() - ex.started,
                       lambda name: env.get(_ENVIRON_KEYS[name]),
                       env.get("REMOTE_USER"))
        except Exception as exc:  # a broken handler or format must not break serving
            report_exception("access log failed", exc)

    def _call_loop(self, fn: Callable[[], None]) -> None:
        try:
            self._manager.call_soon_threadsafe(fn)
        except RuntimeError:  # closed: nothing left to do
            pass

    def _post(self, ex: _Exchange, op: int, arg: Any) -> None:
        """Queue one response step for the loop: its owner writes the outbox after each
        poll and each batch; any other thread wakes it."""
        self._outbox.append((ex, op, arg))
        if not self._wake_pending and self._turns.owner is not threading.current_thread():
            self._wake_loop()

    def _wake_loop(self) -> None:
        if not self._wake_pending:
            self._wake_pending = True
            self._call_loop(_nothing)

    def _drain_outbox(self) -> None:
        """Owner: write the queued response steps."""
        # Cleared before draining: a post that misses this drain wakes the loop again.
        self._wake_pending = False
        self._loop_side.drain(self._outbox, self._stock_lists)

    def _apply(self, ex: _Exchange, op: int, arg: Any) -> None:
        conn = ex.conn
        if op == _OP_WHOLE:
            status = ex.status
            assert status is not None
            conn.http_respond(status[0], ex.headers, arg, reason=status[1],
                              more_headers=self._stock_for(ex.stock))
            self._finish(ex)
        elif op == _OP_WRITE:
            conn.http_write(arg)
            ex.queued -= len(arg)
            ex.backlog = conn.send_len
            if ex.backlog >= _SEND_LOW and not ex.busy:
                ex.busy = True
                conn.set_handler(self._on_busy)  # be told when the client reads
            elif ex.waiting:
                ex.notify_writer()
        elif op == _OP_BEGIN:
            code, reason = ex.status or (500, "")
            conn.http_begin(code, ex.headers, reason=reason,
                            more_headers=self._stock_for(ex.stock))
        elif op == _OP_FILE:
            fd, offset, count = arg
            try:
                conn.http_sendfile(fd, offset, count)
            finally:
                os.close(fd)
        elif op == _OP_END:
            if not conn.http_end():
                error_log.error(
                    "%s %s: the app sent %d bytes, fewer than its Content-Length of %d; "
                    "the connection was closed", ex.environ["REQUEST_METHOD"],
                    ex.environ["PATH_INFO"], ex.sent, ex.declared)
            self._finish(ex)
        elif op == _OP_ABORT:
            conn.close()
            self._finish(ex)

    def _finish(self, ex: _Exchange) -> None:
        ex.finished = True
        self._live.discard(ex)
        if self._access is not None:
            self._log_access(ex)
        conn = ex.conn
        if conn.userdata is ex:
            conn.userdata = None
            if ex.busy and not conn.is_closing:
                conn.set_handler(self._on_quiet)

    def _protocol_error(self, ex: _Exchange, exc: BaseException) -> None:
        """The app's response could not be sent as given (a bad header, too many bytes)."""
        if self._body_refused(ex):
            return  # not the app's fault: the core had answered 413 while it was busy
        report_exception(f"{ex.environ['REQUEST_METHOD']} {ex.environ['PATH_INFO']}: "
                         f"invalid response from the app", exc)
        conn = ex.conn
        try:
            if conn.response_started:
                conn.close()
            else:
                conn.http_begin(500, [(b"Content-Type", b"text/plain; charset=utf-8"),
                                      (b"Content-Length", b"%d" % len(_RESPONSE_500)),
                                      (b"Connection", b"close")],
                                  more_headers=self._stock_lists[3])
                conn.http_write(_RESPONSE_500)
                conn.http_end()
        except RuntimeError:
            pass
        self._finish(ex)

    def _refresh_stock(self) -> None:
        """Timer, every second: the Date (stock & 1) and Server (stock & 2) fields an app
        left out, as lists indexed by `_Exchange.stock`, so no response formats a date."""
        date = self._date.get()
        stock: list[list[tuple[bytes, bytes]]] = [
            [], [(b"Date", date)], [(b"Server", SERVER_NAME)],
            [(b"Date", date), (b"Server", SERVER_NAME)]]
        if self._draining:
            # Stopping: every response closes its connection, so a client that keeps its
            # connection busy moves on to another worker instead of holding this one.
            stock = [[*lst, (b"Connection", b"close")] for lst in stock]
        # Checked and rendered once a second, copied into responses as they are.
        self._stock_lists = [HeaderBlock(lst) if lst else None for lst in stock]

    def _stock_for(self, stock: int) -> HeaderBlock | None:
        return self._stock_lists[stock]

    # App side.
    def _finish_app(self, ex: _Exchange, result: Any) -> None:
        """Send what the app returned (any iterable), then close() it."""
        try:
            if not ex.head_queued and type(result) in (list, tuple):
                self._respond_whole(ex, result)
            elif isinstance(result, FileWrapper) and not ex.head_queued:
                self._respond_file(ex, result)
            else:
                whole = False
                for chunk in result:
                    if not chunk:
                        continue
                    if (not ex.head_queued and len(chunk) == ex.declared
                            and type(chunk) is bytes):
                        # The first piece is the whole declared body (Flask's and Django's
                        # responses): one write, as for a list. Any more is an app error.
                        whole = True
                        ex.sent = len(chunk)
                        ex.head_sent = ex.head_queued = True
                        self._post(ex, _OP_WHOLE, chunk)
                        continue
                    ex.stream(chunk)
                if ex.status is None:
                    raise AssertionError("the app returned without calling start_response()")
                if whole:
                    return
                if not ex.head_queued and (ex.declared <= 0 or ex.is_head):
                    # No body at all: one write too.
                    ex.head_sent = ex.head_queued = True
                    self._post(ex, _OP_WHOLE, b"")
                    return
                if not ex.head_queued:
                    ex.stream(b"")
                if 0 <= ex.declared != ex.sent and not ex.is_head:
                    if ex.sent > ex.declared:
                        raise ValueError("the app sent more than its Content-Length")
                self._post(ex, _OP_END, None)
        except BaseException as exc:
            self._app_failed(ex, exc)
        finally:
            if result is not None and hasattr(result, "close"):
                try:
                    result.close()
                except BaseException as exc:
                    self._report(ex, "close() of the app's iterable failed", exc)

    def _respond_whole(self, ex: _Exchange, result: Any) -> None:
        if ex.status is None:
            raise AssertionError("the app returned without calling start_response()")
        if len(result) == 1:
            body = result[0]  # bytes-like; http_respond refuses anything else
        else:
            for item in result:
                if type(item) is not bytes:
                    raise TypeError(
                        f"response body items must be bytes, not {type(item).__name__}")
            body = b"".join(result)
        ex.sent = len(body)
        ex.head_sent = ex.head_queued = True
        self._post(ex, _OP_WHOLE, body)

    def _respond_file(self, ex: _Exchange, wrapper: FileWrapper) -> None:
        fd = wrapper.fileno_for_sendfile()
        if fd is None or ex.status is None:
            for chunk in wrapper:
                ex.stream(chunk)
            if not ex.head_queued:
                ex.stream(b"")
            self._post(ex, _OP_END, None)
            return
        offset = os.lseek(fd, 0, os.SEEK_CUR)
        count = max(0, os.fstat(fd).st_size - offset)
        if ex.declared >= 0:
            count = min(count, ex.declared)
        ex.sent = count
        ex.head_sent = ex.head_queued = True
        self._post(ex, _OP_BEGIN, None)
        self._post(ex, _OP_FILE, (os.dup(fd), offset, count))
        self._post(ex, _OP_END, None)

    def _app_failed(self, ex: _Exchange, exc: BaseException) -> None:
        if isinstance(exc, ClientDisconnected) or (ex.closed and isinstance(exc, OSError)):
            return  # the client left: nothing to answer, nothing to log
        what = f"{ex.environ['REQUEST_METHOD']} {ex.environ['PATH_INFO']}"
        if ex.head_sent:
            self._report(ex, f"{what}: the app failed after its response started; "
                             "the connection is closed", exc)
            self._post(ex, _OP_ABORT, None)
            return
        self._report(ex, f"{what}: the app failed; answered 500", exc)
        ex.head_sent = ex.head_queued = True
        ex.status = (500, None)
        ex.headers = [("Content-Type", "text/plain; charset=utf-8"), ("Connection", "close")]
        ex.declared = -1
        ex.stock = 3
        self._respond_whole(ex, [_RESPONSE_500])

    def _report(self, ex: _Exchange, what: str, exc: BaseException) -> None:
        if self._error_handler is not None:
            try:
                self._error_handler(exc)
                return
            except BaseException:
                pass
        report_exception(what, exc)

    # Lifecycle.
    def run(self, poll_ms: int = 100) -> None:
        if self._closed:
            raise RuntimeError("this WSGIServer is closed")
        self._poll_ms = poll_ms
        turns = self._turns
        # This thread starts as the loop's owner (before any app thread could take the
        # vacant loop), then takes turns like the app threads.
        turns.loop_lock.acquire()
        with turns.lock:
            turns.owner = threading.current_thread()
        turns.start()
        try:
            # This thread takes turns at the loop and may wait on the turns' lock when a
            # stop signal comes: StopSignals acts on it from a thread of its own.
            with StopSignals(self.stop):
                if self.on_ready is not None:
                    self.on_ready()
                while True:
                    turns.lead()
                    if turns.stopping or not turns.follow():
                        break
        finally:
            self.close()

    def _drain_in_flight(self) -> None:
        """Owner, stopping: stop accepting, finish the requests in flight and close idle
        keep-alive connections, for at most `graceful_timeout` seconds."""
        now = time.monotonic()
        deadline = now + self.graceful_timeout
        manager = self._manager
        turns = self._turns
        # The listeners close after _IDLE_GRACE_S and a few polls: a client that connected
        # just before the stop may still be in the accept queue, and closing a listener
        # resets what waits there (a socket shared with other worker processes stays open
        # in them, with its queue).
        accept_until = now + _IDLE_GRACE_S
        polls = 0
        # An idle connection is closed once it has stayed idle for _IDLE_GRACE_S: a client
        # whose request is on its way (it connected just now) is answered, not cut off.
        idle_since: dict[int, float] = {}
        while now < deadline:
            busy = bool(self._live)
            conns = [c for c in manager.connections if not c.is_listening]
            if self._listeners:
                if now >= accept_until and polls >= 3:
                    for listener in self._listeners:
                        listener.close()
                    self._listeners.clear()
                else:
                    busy = True
            for c in conns:
                if c.userdata is None and not c.send_len and not c.recv_len:
                    if (not c.is_closing
                            and now - idle_since.setdefault(c.id, now) >= _IDLE_GRACE_S):
                        c.close()
                else:
                    busy = True
                    idle_since.pop(c.id, None)
            if not busy and all(c.is_closing for c in conns):
                manager.poll(0)  # Mongoose closes the connections marked above
                return  # every answer is written out to its client
            manager.poll(10)
            polls += 1
            now = time.monotonic()
            if self._outbox:
                self._drain_outbox()
            if turns.pending and not turns.run_pending():
                return

    def stop(self) -> None:
        """Make run() return: requests in flight are finished first. Thread-safe."""
        turns = self._turns
        first = not self._draining
        self._draining = True
        self._refresh_stock()
        with turns.lock:
            turns.stopping = True
        if first and self.on_stop is not None:
            try:
                self.on_stop()
            except Exception as exc:
                report_exception("on_stop failed", exc)
        self._call_loop(_nothing)  # end the current poll wait now

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        turns = self._turns
        self.stop()
        turns.stop(5.0)
        with turns.lock:
            for ex in list(self._live):
                ex.gone()
        if turns.loop_lock.acquire(timeout=5.0):
            self._manager.close()
        else:
            error_log.error("WSGIServer.close(): an app thread still holds the loop; "
                            "its Manager is left open")


def serve(app: AppRef, url: str = "http://127.0.0.1:8000", workers: int | None = None,
          stream_timeout: float | None = None, *, threads: int | None = None,
          config: Config | None = None) -> None:
    """Serve `app` on `url` until SIGINT/SIGTERM; the options are WSGIServer's (`workers`:
    0.2.x's name for `threads`)."""
    threads = renamed("serve", "workers", workers, "threads", threads,
                      " (the number of app threads)")
    server = WSGIServer(app, threads=threads, stream_timeout=stream_timeout, config=config)
    server.listen(url)
    print(f"cymongoose WSGI server on {url} ({server.config.threads} app threads); Ctrl-C "
          "stops it", file=sys.stderr)
    server.run()
