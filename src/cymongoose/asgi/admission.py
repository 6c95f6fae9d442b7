"""Admission of a request head, the ASGI server's loop side: the C base (ASGILoop,
_pxi/servers/asgi_exchange.pxi) builds the scope and starts the app on the common path; this
subclass implements its two hooks. `admit_request()` takes every request when the C pass is
not enough (a Unix-socket client, trusted proxy headers, a max_requests count);
`admit_websocket()` checks a WebSocket handshake and holds it for the app's accept.
While the server verifies client certificates, admit_request() takes every request and puts
the TLS extension in the scope (serving/tls_fields.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .._mongoose import ASGILoop, Connection
from ..proxy_headers import ProxyHeaders
from ..serving.listeners import is_unix_client, listener_base
from ..serving.request_budget import RequestBudget
from ..serving.tls_fields import asgi_tls_extension
from .http import _HTTPCycle
from .shared import _HEADERS_TEXT
from .state import ServerState
from .websocket import _WSCycle

_UNIX_CLIENT = ("127.0.0.1", 0)  # Mongoose reads no address from an AF_UNIX peer
_WS_EXTENSIONS: dict[str, Any] = {"websocket.http.response": {}}


class Admission(ASGILoop):
    """The handler of a connection waiting for a request head (see ASGILoop), with the
    Python paths of admission. `requests_exhausted` is called once, when max_requests
    requests were admitted."""

    __slots__ = ("_proxy", "_proxy_fields", "_tls_fields", "request_budget",
                 "requests_exhausted", "unix_base")
    server_state: ServerState  # the C field, typed ASGIServerState there

    def __init__(self, server_state: ServerState, app: Any, *, proxy: ProxyHeaders | None,
                 max_requests: int, requests_exhausted: Callable[[], None],
                 tls_fields: bool = False) -> None:
        self.server_state = server_state
        self.app = app
        self.exchange_type = _HTTPCycle
        self.tasks = set()
        self.bases = {}
        self.base_default = {}
        self.lifespan_state = {}
        self.unix_conns = set()
        self._proxy = proxy
        self._tls_fields = tls_fields  # the scope gets extensions["tls"] on TLS connections
        # The headers the proxy's source names (and only those: the other family is a
        # client's), as scope name -> ProxyHeaders.resolve() keyword.
        self._proxy_fields = {name.encode("latin-1"): name.replace("-", "_")
                              for name in (proxy.header_names if proxy else ())}
        # Requests left before the server asks to be stopped (a worker recycled after
        # --max-requests); -1: no limit.
        self.request_budget = RequestBudget(max_requests) if max_requests else None
        self.requests_exhausted = requests_exhausted
        self.unix_base: dict[str, Any] = {}  # the scope base of Unix-socket listeners
        # One test on the per-request path decides whether admit_request() has work.
        self.python_admission = proxy is not None or self.request_budget is not None or tls_fields

    def admit_request(self, conn: Connection, msg: Any) -> None:
        base = listener_base(conn, self.bases, self.base_default)
        scope = self._prepare_scope(conn, msg, base)
        method = scope["method"]
        if method == "GET" and msg.header("Upgrade", "").lower() == "websocket":
            self.admit_websocket(conn, msg, scope)
            return
        self.start(conn, _HTTPCycle(self.server_state, conn, scope))

    def _prepare_scope(self, conn: Connection, msg: Any,
                       base: dict[str, Any]) -> dict[str, Any]:
        """The scope of a request that needs more than the C pass: a Unix-socket client,
        trusted proxy headers, a max_requests count."""
        unix = bool(self.unix_conns) and is_unix_client(conn, self.unix_conns)
        scope: dict[str, Any] = msg.asgi_scope(self.unix_base if unix else base, conn,
                                               self.lifespan_state)
        if unix:
            scope["client"] = _UNIX_CLIENT
        elif self._tls_fields and conn.is_tls:
            tls = asgi_tls_extension(conn.tls_info)
            if tls is not None:  # (the spec: present only when the server can fill it in)
                # A copy: the base's extensions dict is shared by every request.
                scope["extensions"] = {**scope["extensions"], "tls": tls}
        if self._proxy is not None:
            client = scope.get("client")
            if unix:
                self._apply_proxy(scope, None)
            elif client:  # (a TCP peer without an address is never trusted)
                self._apply_proxy(scope, client[0])
        budget = self.request_budget
        if budget is not None and budget.take():
            self.requests_exhausted()
        return scope

    def _apply_proxy(self, scope: dict[str, Any], peer: str | None) -> None:
        """Trusted proxy headers (proxy_headers.py) into the client, the scheme and the
        host header, as uvicorn's --proxy-headers does."""
        assert self._proxy is not None
        if not self._proxy.is_trusted(peer):
            return  # an untrusted peer's headers are ignored entirely (and not even read)
        fields: dict[str, str] = {}
        wanted = self._proxy_fields
        for name, value in scope["headers"]:
            key = wanted.get(name)
            if key is not None:
                text = value.decode("latin-1")
                fields[key] = f"{fields[key]}, {text}" if key in fields else text
        if not fields:
            return
        fwd = self._proxy.resolve(peer, **fields)
        if fwd.client_host is not None:
            scope["client"] = (fwd.client_host, fwd.client_port or 0)
        if fwd.scheme is not None:
            scope["scheme"] = "https" if fwd.scheme in ("https", "wss") else "http"
        if fwd.host is not None:
            scope["headers"] = [pair for pair in scope["headers"] if pair[0] != b"host"] + \
                [(b"host", fwd.host.encode("latin-1"))]

    def admit_websocket(self, conn: Connection, msg: Any, scope: dict[str, Any]) -> None:
        shared = self.server_state
        key = msg.header("Sec-WebSocket-Key")
        version = msg.header("Sec-WebSocket-Version")
        if not key or version != "13" or not conn.body_complete:
            extra = [(b"sec-websocket-version", b"13")] if key and version != "13" else []
            conn.http_respond(426 if extra else 400, _HEADERS_TEXT + extra,
                              b"Invalid WebSocket handshake\n",
                              more_headers=shared.default_headers[3])
            return
        scope["type"] = "websocket"
        scope["scheme"] = "wss" if scope["scheme"] == "https" else "ws"
        offered = msg.header("Sec-WebSocket-Protocol")
        scope["subprotocols"] = ([p.strip() for p in offered.split(",") if p.strip()]
                                 if offered else [])
        tls = scope["extensions"].get("tls")
        scope["extensions"] = _WS_EXTENSIONS if tls is None else {**_WS_EXTENSIONS, "tls": tls}
        del scope["method"]
        cycle = _WSCycle(shared, conn, scope, key.encode("latin-1"))
        if shared.access_log_on:
            cycle.started = time.perf_counter()
        conn.userdata = cycle
        self.spawn(cycle)
