"""Typed public contract of cymongoose._mongoose (checked against the build by mypy.stubtest).

User-facing documentation of every class and function lives here.
"""

import enum
import os
from collections.abc import Awaitable, Callable, Iterable, Iterator, MutableMapping, Sequence
from typing import Any, ClassVar, Protocol, TypeAlias, TypedDict, TypeVar, final

from typing_extensions import Buffer, disjoint_base

_Data: TypeAlias = str | Buffer
"""Bytes to send: `str` is encoded as UTF-8; anything `bytes()` accepts except an int."""

class _HasFileno(Protocol):
    def fileno(self) -> int: ...

_Handler: TypeAlias = Callable[[Connection, int, Any], None]
"""`handler(conn, ev, data)`; what `data` is depends on `ev` (see `Event`)."""

_ErrorHandler: TypeAlias = Callable[[BaseException], object]

class _TlsInfo(TypedDict):
    """`Connection.tls_info`: one TLS connection, read once its handshake is done."""

    protocol: str
    """OpenSSL's name of the version: "TLSv1.2", "TLSv1.3"."""
    version: int
    """The version on the wire: 0x0303 for TLS 1.2, 0x0304 for TLS 1.3."""
    cipher: str
    """OpenSSL's name of the cipher suite: "ECDHE-RSA-AES128-GCM-SHA256"."""
    cipher_suite: int
    """Its IANA number: 0x1301 for TLS_AES_128_GCM_SHA256."""
    local_cert: str | None
    """This side's certificate (PEM), None when it has none."""
    peer_cert_chain: list[str]
    """The certificates the peer sent (PEM), its own first; empty without one."""
    peer_subject: str | None
    """The peer certificate's subject, RFC 4514 text ("CN=alice,O=Example")."""
    peer_issuer: str | None
    peer_serial: str | None
    """Its serial number in hex, as mod_ssl and nginx give it."""
    peer_not_before: str | None
    """Its validity dates as OpenSSL prints them: "Nov 27 23:00:00 2026 GMT"."""
    peer_not_after: str | None
    peer_verify: str
    """"SUCCESS" (verified), "NONE" (no certificate) or "FAILED:<reason>"."""

class _Metrics(TypedDict):
    """A snapshot of a Manager's counters (`Manager.metrics()`, `read_metrics()`). Requests
    are counted once each when their response ends (or their connection closes or leaves
    HTTP first: status 0 when no response was written, 101 for a WebSocket upgrade)."""

    requests: dict[int, int]
    """Finished requests by status, non-zero counts only; includes the guard's own answers
    (refusals, limit_concurrency's 503s, health probes): one per access-log line."""
    requests_http2: dict[int, int]
    """The part of `requests` served over HTTP/2 (its streams), by status; the rest came
    over HTTP/1.x."""
    refused: dict[int, int]
    """The requests the guard turned away itself (4xx, limit_concurrency's 503), by status;
    health probes are not refusals, even when they answer 503."""
    duration_buckets: tuple[int, ...]
    """16 non-cumulative counts of delivered requests by duration (delivery to response
    end), for the upper bounds `DURATION_BOUNDS` then +Inf."""
    duration_sum: float
    in_flight: int
    connections_open: int
    connections_total: int
    bytes_received: int
    """Bytes read on accepted HTTP connections (after TLS decryption), WebSockets included."""
    bytes_sent: int
    """Bytes written on them (before TLS encryption), sendfile bodies included."""
    websockets_open: int
    websockets_total: int
    http2_connections_open: int
    """Accepted connections that speak HTTP/2 (h2c or ALPN h2), also in `connections_open`."""
    http2_connections_total: int
    request_timeouts: int
    threads_abandoned: int

class Event(enum.IntEnum):
    """Mongoose event codes passed to handlers as `ev`.

    `data` per event: HTTP_MSG, HTTP_HDRS, WS_OPEN -> HttpMessage; WS_MSG -> WsMessage;
    MQTT_MSG, MQTT_CMD -> MqttMessage; MQTT_OPEN -> int (CONNACK code); ERROR -> str;
    WAKEUP -> bytes; SNTP_TIME -> int (epoch ms); every other event -> None.
    """

    ERROR = 0
    OPEN = 1
    POLL = 2
    RESOLVE = 3
    CONNECT = 4
    ACCEPT = 5
    TLS_HS = 6
    READ = 7
    WRITE = 8
    CLOSE = 9
    HTTP_HDRS = 10
    HTTP_MSG = 11
    WS_OPEN = 12
    WS_MSG = 13
    WS_CTL = 14
    MQTT_CMD = 15
    MQTT_MSG = 16
    MQTT_OPEN = 17
    SNTP_TIME = 18
    WAKEUP = 19
    USER = 23

UNEXPOSED_EVENTS: dict[str, int]
"""Events Mongoose defines but never fires on connections this API creates (mDNS, Modbus)."""

MONGOOSE_VERSION: str
TLS_ENGINE: str
"""The TLS engine this build uses: "openssl" (the default; RSA and ECDSA certificates, TLS 1.2
and 1.3, ALPN http/1.1) or "builtin" (Mongoose's own TLS 1.3, ECDSA P-256 keys only)."""
HTTP2_LIBRARY: str | None
"""The libnghttp2 version this build runs with ("1.52.0"), or None when built without HTTP/2
(CYMONGOOSE_HTTP2=OFF). HTTP/2 itself is not served yet (issue 36)."""

def _h2_preface_state(data: bytes | bytearray | memoryview) -> int: ...

WAKEUP_MAX_PAYLOAD: int
DEFAULT_MAX_RECV_SIZE: int
METRICS_SIZE: int
"""Bytes of a Manager's counters: the size of a buffer for `share_metrics()`."""
WATCH_READ: int
"""`Manager.watch_changes()`: the outer loop watches the socket for reading."""
WATCH_WRITE: int
"""`Manager.watch_changes()`: the outer loop watches the socket for writing."""
DURATION_BOUNDS: tuple[float, ...]
"""Upper bounds (seconds) of the request duration buckets; a 16th bucket is +Inf."""

MG_EV_ERROR: int
MG_EV_OPEN: int
MG_EV_POLL: int
MG_EV_RESOLVE: int
MG_EV_CONNECT: int
MG_EV_ACCEPT: int
MG_EV_TLS_HS: int
MG_EV_READ: int
MG_EV_WRITE: int
MG_EV_CLOSE: int
MG_EV_HTTP_HDRS: int
MG_EV_HTTP_MSG: int
MG_EV_WS_OPEN: int
MG_EV_WS_MSG: int
MG_EV_WS_CTL: int
MG_EV_MQTT_CMD: int
MG_EV_MQTT_MSG: int
MG_EV_MQTT_OPEN: int
MG_EV_SNTP_TIME: int
MG_EV_WAKEUP: int
MG_EV_USER: int

WEBSOCKET_OP_CONTINUE: int
WEBSOCKET_OP_TEXT: int
WEBSOCKET_OP_BINARY: int
WEBSOCKET_OP_CLOSE: int
WEBSOCKET_OP_PING: int
WEBSOCKET_OP_PONG: int

MG_LL_NONE: int
MG_LL_ERROR: int
MG_LL_INFO: int
MG_LL_DEBUG: int
MG_LL_VERBOSE: int

MQTT_PROP_TYPE_BYTE: int
MQTT_PROP_TYPE_STRING: int
MQTT_PROP_TYPE_STRING_PAIR: int
MQTT_PROP_TYPE_BINARY_DATA: int
MQTT_PROP_TYPE_VARIABLE_INT: int
MQTT_PROP_TYPE_INT: int
MQTT_PROP_TYPE_SHORT: int

@disjoint_base
class Manager:
    """Owns one Mongoose event manager and every connection and timer made through it.

    Not thread-safe except `wakeup()`: one thread polls, and handlers run on it.
    Use as a context manager, or call `close()`; a Manager dropped unclosed is freed with a
    `ResourceWarning`.
    """

    def __init__(
        self,
        handler: _Handler | None = None,
        enable_wakeup: bool = False,
        error_handler: _ErrorHandler | None = None,
    ) -> None:
        """`handler` serves connections without their own; `error_handler(exc)` receives
        exceptions raised by handlers and timers (default: the `cymongoose` logger);
        `enable_wakeup` creates the cross-thread wakeup channel (`RuntimeError` on failure)."""

    def __enter__(self) -> Manager: ...
    def __exit__(self, *exc_info: object) -> bool: ...
    @property
    def connections(self) -> tuple[Connection, ...]:
        """Snapshot of live connections (listeners, accepted, clients), in creation order."""

    max_recv_size: int
    """Most bytes a raw TCP/UDP or MQTT connection may hold unconsumed in its receive
    buffer before it is closed with MG_EV_ERROR (default `DEFAULT_MAX_RECV_SIZE`, 16 MiB);
    an MQTT packet whose header declares more is refused as soon as that header arrives.
    HTTP uses its own limits (`set_http_limits`), WebSocket its max message size."""

    dns_server: str
    """`udp://host:port` resolver used by this Manager (Mongoose's default is
    `udp://8.8.8.8:53`); reads `""` once closed."""

    @property
    def wakeup_id(self) -> int:
        """Id of the internal wakeup pipe, or 0 when wakeup is not enabled."""

    def poll(self, timeout_ms: int = 0) -> None:
        """Run one loop iteration, waiting up to `timeout_ms` for I/O or the next timer.

        The GIL is released while waiting and held while handlers run (one hand-over per
        iteration). Re-raises a `KeyboardInterrupt`/`SystemExit` raised by a handler, and
        pending signals. `RuntimeError` when re-entered, polled from a second thread at the
        same time, or after `close()`."""

    def run(self, poll_ms: int = 100) -> None:
        """Poll until SIGINT/SIGTERM (handlers installed for the call, then restored), then
        `close()`."""

    def close(self) -> None:
        """Close every connection (each gets MG_EV_CLOSE) and free the manager. Idempotent;
        `RuntimeError` while `poll()` runs."""

    def listen(
        self,
        url: str,
        handler: _Handler | None = None,
        *,
        http: bool | None = None,
        stream_body: bool = False,
        http2: bool | None = None,
        **limits: int,
    ) -> Connection:
        """Listen on `tcp://`, `udp://`, `http://`, `https://`, `ws://` or `wss://` URL.

        `http=None` turns HTTP parsing on for http/https/ws/wss. Port 0 picks a free port:
        read it from `local_addr[1]`. Accepted connections inherit `handler`. `ValueError`
        for a URL Mongoose would misread: no scheme or one it does not know (it would listen
        on plain TCP), and an http/https/ws/wss URL without a port (it would bind 80/443).
        Mongoose's other schemes are accepted too: `mqtt://`, `mqtts://`, `ssl://`,
        `tls://`, `tcps://`.

        `stream_body=True` (HTTP only): each request arrives as MG_EV_HTTP_HDRS once its
        head is in, and its body is read with `Connection.body_read()` as it arrives
        (chunked bodies de-chunked, reading paused while the handler is behind) instead of
        MG_EV_HTTP_MSG with the whole body. Answer with `http_begin()`/`http_end()`.

        `http2` (HTTP only; None: `set_http_limits()`'s, on unless turned off there): a
        plain-HTTP client may open with HTTP/2's preface (prior knowledge, h2c), when the
        module has HTTP/2 (`HTTP2_LIBRARY`); each of its streams then reaches the handler
        as a connection of its own carrying one request. `False`: HTTP/1.1 only. See
        docs/http2.md.

        HTTP listeners take limits as keywords (defaults from `set_http_limits()`):
        `max_header_count`, `max_header_size`, `max_uri_size`, `max_body_size`,
        `header_timeout_ms`, `body_timeout_ms`, `keepalive_timeout_ms`,
        `tls_handshake_timeout_ms`, `send_timeout_ms`, `linger_timeout_ms`,
        `linger_time_ms` (0 turns a timeout off; for the last two, the lingering close).
        See docs/server-behaviour.md."""

    def set_http_limits(self, **limits: int | bool) -> None:
        """Change the limits that HTTP listeners opened from now on start with, and their
        `http2` setting (True or False)."""

    @property
    def http_limits(self) -> dict[str, int | bool]:
        """The limits new HTTP listeners get, by name, and their `http2` setting."""

    def connect(
        self, url: str, handler: _Handler | None = None, *, http: bool | None = None
    ) -> Connection:
        """Start an outbound connection and return at once (MG_EV_CONNECT when up).
        `ValueError` for a URL without a scheme Mongoose knows (as `listen()`); the port may
        be left to the scheme."""

    def ws_connect(self, url: str, handler: _Handler | None = None) -> Connection:
        """Connect and send a WebSocket upgrade; MG_EV_WS_OPEN on success."""

    def mqtt_connect(
        self,
        url: str,
        handler: _Handler | None = None,
        client_id: str = "",
        username: str = "",
        password: str = "",
        clean_session: bool = True,
        keepalive: int = 60,
        **kwargs: Any,
    ) -> Connection:
        """Connect to an MQTT broker; MG_EV_MQTT_OPEN carries the CONNACK code.

        Extra keywords: `version=4|5` (MQTT 3.1.1, the default, or 5), and a will with
        `will_topic`, `will_message`, `will_qos`, `will_retain`. Unknown keywords raise
        `TypeError`."""

    def mqtt_listen(self, url: str, handler: _Handler | None = None) -> Connection:
        """Broker-side MQTT listener: packets arrive as MG_EV_MQTT_CMD."""

    def sntp_connect(self, url: str, handler: _Handler | None = None) -> Connection:
        """UDP connection to an SNTP server; see `Connection.sntp_request`."""

    def timer_add(
        self,
        milliseconds: int,
        callback: Callable[[], object],
        *,
        repeat: bool = False,
        run_now: bool = False,
    ) -> Timer:
        """Call `callback()` after `milliseconds` (every `milliseconds` with `repeat`;
        first on the next poll with `run_now`). Exceptions go to the error handler."""

    linger_ms: int
    """After traffic, how long (0-100 ms, default 1) `poll()` waits for the next request
    still holding the GIL; 0 when other threads need the GIL while the loop waits. The
    default is 0 where the GIL is off (free-threaded Python): there is nothing to hold."""

    refusal_handler: Callable[[Connection, int, str, str, int], object] | None
    """Called as `refusal_handler(conn, status, reason, request_line, body_size)` after an
    HTTP listener's guard answered a request itself (400, 408, 413, 414, 431, 501, 505, the
    503 of `limit_concurrency`, a health probe's 200 or 503: no handler saw it), for an
    access log. `request_line` is what the client sent up to its first line end (at most
    2 KiB, latin-1; it may be malformed or cut), `body_size` the bytes of the answer's body.
    Exceptions follow the handlers' rules. Default None."""

    proxy_log_handler: (
        Callable[[Connection, int, str, int, float, str | None, str | None], object] | None)
    """Called as `proxy_log_handler(conn, status, request_line, body_size, duration_s,
    referer, user_agent)` once the reverse proxy (`proxy`) finished a request's response,
    for an access log: `request_line` as the client sent it (latin-1, at most 255 bytes),
    `body_size` the body bytes relayed to the client, `duration_s` from the request head to
    the response's last byte handed to the client's connection, `referer` and `user_agent`
    the client's fields (None when absent). When it is None, proxied requests go to
    `refusal_handler` instead, with the reason `"proxied"` (and no duration or fields).
    Exceptions follow the handlers' rules. Default None."""

    def metrics(self) -> _Metrics:
        """A snapshot of this Manager's counters, kept in C on the request paths (no
        Python call per request). Still readable after `close()`."""

    def share_metrics(self, buffer: Buffer) -> None:
        """Count into `buffer` (writable, `METRICS_SIZE` bytes; e.g. an mmap another process
        reads with `read_metrics()`) from now on, starting from the counts so far. The buffer
        is held until `close()`. `ValueError` for a wrong size or a read-only buffer."""

    def add_metric(self, name: str, delta: int) -> None:
        """Add `delta` to "request_timeouts" or "threads_abandoned" (a gauge: delta may be
        negative), the counts only the servers' Python layers see. `ValueError` otherwise."""

    limit_concurrency: int
    """At most this many requests with a handler at once (0, the default: no limit). A
    complete request arriving at the limit is answered by the guard with `503 Service
    Unavailable`, `Retry-After: 1` and `Connection: close`, before any Python code runs, and
    reported to `refusal_handler`. Idle keep-alive connections and WebSockets do not count.
    `ValueError` if negative."""

    health_path: str | None
    """A GET or HEAD of this path (query ignored) is answered by the guard without calling a
    handler, even at `limit_concurrency`: `200 ok` when `ready`, else `503 starting` (never
    ready yet) or `503 draining`, with `Cache-Control: no-store`, keeping the connection
    alive. Reported to `refusal_handler` (for the access log). Default None: no such path."""

    def set_static_mounts(
        self,
        mounts: Iterable[tuple[str, str | os.PathLike[str] | bytes]] | None,
        *,
        headers: HeaderBlock | Iterable[tuple[str | bytes, str | bytes]] | None = None,
    ) -> None:
        """Serve files under URL prefixes from the guard itself, in C, with no handler call
        and without the GIL (the servers' `--static`): `mounts` are (url_prefix, directory)
        pairs; the longest prefix wins. A GET or HEAD whose percent-decoded path is under a
        prefix gets what `static_file_response()` answers for the file (ranges,
        conditionals, precompressed siblings with Vary; Content-Type guessed from the
        extension as `serve_dir()` does, then from Python's `mimetypes` table for what
        Mongoose does not know, else application/octet-stream); other methods get 405. A
        path that leaves the directory (`..`, a symlink out, index files and siblings
        included) is 404; a directory URL without its slash is 301 to it (query kept); with
        it, its index.html (404 without one, never a listing); a file URL ending in a slash
        is 404. With
        `set_compression()` on, a file without a chosen sibling is compressed as other
        responses are. Each answer is counted in `metrics()` and reported to
        `refusal_handler` (reason "static file"). `headers`: fields added to every static
        answer (e.g. Server; not Connection or the framing). None or an empty list: no
        mounts. `TypeError`/`ValueError` for a malformed mount, a prefix without a leading
        '/' or with spaces, '?', '#' or '%', a directory that is not one, a prefix given
        twice; nothing changes then."""

    @property
    def static_mounts(self) -> tuple[tuple[str, str], ...]:
        """The mounts set_static_mounts() took: (url prefix without its trailing slash,
        resolved directory) pairs, in the order given; () when there are none."""

    def set_compression(
        self,
        codings: str | Iterable[str] | None = "on",
        *,
        min_length: int = 512,
        gzip_level: int = 3,
        zstd_level: int = 3,
        types: Iterable[str] | None = None,
    ) -> None:
        """Compress the responses of this Manager's HTTP listeners (reply, reply_json,
        http_respond, http_begin/http_write/http_sendfile/http_end, and the WSGI and ASGI
        servers on it) for clients whose Accept-Encoding takes a coding offered here:
        `codings` "zstd", "gzip" or both (a list, or a comma-separated str), or "on" (the
        default): every coding this build makes (gzip alone when built with
        CYMONGOOSE_ZSTD=OFF); on equal q-values zstd goes first. None switches compression
        off, as it is until this is called.

        Compressed: bodies whose Content-Type is in `types` (MIME types, "text/"-style
        prefixes or "+json"-style suffixes; None: JSON, JavaScript, XML, SVG, wasm and
        every text/ type, event streams included) and, when their length is known, of
        `min_length` bytes or more. Never: a response with a Content-Encoding, a 206, one
        with `Cache-Control: no-transform`, HEAD, 204 and 304. Every response of such a type
        carries `Vary: Accept-Encoding`. A response opts out with `Content-Encoding:
        identity`, which is then left out. A streamed body is compressed as it is written,
        each http_write() flushed so the client can decode it at once.
        `ValueError` for an unknown coding, a level out of range (gzip 1-9, zstd 1-19) or a
        malformed type."""

    @property
    def compression(self) -> dict[str, Any] | None:
        """The settings set_compression() took (codings, min_length, gzip_level,
        zstd_level, types), or None when compression is off."""

    proxy: ProxyTable | None
    """The reverse-proxy routes the guard answers before any handler (built and attached
    by `cymongoose.proxy.ReverseProxy`). A table serves one Manager: `ValueError` for a
    second. `TypeError` for anything but a ProxyTable or None. Default None."""

    ready: bool
    """Whether the health path answers 200. Default False; servers set it once they serve
    and clear it when they start to drain."""

    def fileno(self) -> int:
        """Mongoose's epoll descriptor (-1 once closed), for driving this Manager from
        another event loop on the loop's own thread: call `poll(0)` when it is readable,
        after writing to a connection outside a poll, and `next_poll_ms()` after that."""

    def next_poll_ms(self, limit_ms: int = 100) -> int:
        """Milliseconds until `poll()` has work that no descriptor announces (0: now, for
        a closing connection or buffered TLS data; else the next timer), at most
        `limit_ms`."""

    def watch_changes(self) -> list[tuple[int, int, int]] | None:
        """For an outer loop that watches each socket itself (when `fileno()` is -1: Mongoose
        waits with poll(), as on macOS): after each `poll(0)`, the `(fd, was, now)` changes
        to its watches since the last call, where `was` and `now` combine `WATCH_READ` and
        `WATCH_WRITE` (0: not watched). Drops come first, so a descriptor number a new
        socket took in the same poll is forgotten before it is watched again. None when
        nothing changed."""

    def unwatch_all(self) -> list[tuple[int, int, int]]:
        """Every watch `watch_changes()` handed out, as drops, forgetting them: for an outer
        loop that stops watching (works after `close()` too)."""

    def _wake(self) -> None:
        """Internal (the WSGI server's outbox): end the poll wait, delivering nothing."""
    def call_soon_threadsafe(self, callback: Callable[..., object], *args: Any) -> None:
        """Thread-safe: run `callback(*args)` on the polling thread after the current or
        next poll iteration, in call order. Needs `enable_wakeup=True` (`RuntimeError`
        otherwise, and after `close()`)."""

    def wakeup(self, connection_id: int, data: bytes = b"") -> bool:
        """Thread-safe: deliver `data` as MG_EV_WAKEUP to the connection with that id.

        Every accepted message is delivered, in order, many per poll. False when the id is
        0, and when wakeup is not enabled (then with a `RuntimeWarning`, once per calling
        line: the message can never arrive); `ValueError` over `WAKEUP_MAX_PAYLOAD`."""

@final
class Connection:
    """One Mongoose connection. The same object is passed to every event of its
    connection; methods raise `RuntimeError("Connection has been closed")` after
    MG_EV_CLOSE, properties return neutral values."""

    userdata: Any
    @property
    def handler(self) -> _Handler | None: ...
    def set_handler(self, handler: _Handler | None) -> None:
        """Replace the handler; on a listener also what future accepted connections get."""

    @property
    def id(self) -> int: ...
    @property
    def is_listening(self) -> bool: ...
    @property
    def is_closing(self) -> bool: ...
    @property
    def is_proxied(self) -> bool:
        """Whether the reverse proxy (`Manager.proxy`) is answering this connection's
        request: it is busy although no handler has it."""
    log_errors: bool
    """Whether the core logs this connection's failure on `cymongoose.mongoose` (at ERROR
    for a connection this process opened, lower for a client's). Default True; set it
    False when the handler reports `MG_EV_ERROR` itself, as the reverse proxy's health
    check does. `MG_EV_ERROR` reaches the handler either way."""
    @property
    def is_client(self) -> bool: ...
    @property
    def is_tls(self) -> bool: ...
    @property
    def http2_parent(self) -> Connection | None:
        """For an HTTP/2 stream, the connection it travels on (whose `id` a server may know
        from its `MG_EV_ACCEPT`); None for any other connection."""
    @property
    def tls_info(self) -> _TlsInfo | None:
        """What this TLS connection agreed on and the certificate its peer presented
        (`_TlsInfo`), once the handshake is done; None before, without TLS, with the
        built-in engine, or when closed. Read from OpenSSL on first use, then kept. A
        server verifying client certificates (`TlsOpts.ca`) reads the verified client's
        certificate here; the WSGI and ASGI servers pass it on to apps (docs/tls.md)."""
    @property
    def is_udp(self) -> bool: ...
    @property
    def is_websocket(self) -> bool: ...
    @property
    def is_readable(self) -> bool: ...
    @property
    def is_writable(self) -> bool: ...
    @property
    def is_full(self) -> bool: ...
    @property
    def peer_closed(self) -> bool:
        """The client sent EOF (a half-close, or a close: they look the same) on an HTTP
        connection that stays open for the responses it is owed; MG_EV_READ with 0 bytes
        told the handler."""
    @property
    def is_draining(self) -> bool: ...
    @property
    def ws_close_code(self) -> int | None:
        """Close code of the WebSocket close frame the peer sent (1005 when it carried
        none), None before one arrives; kept after the connection closes."""

    @property
    def ws_close_reason(self) -> str | None:
        """Reason text of the peer's WebSocket close frame, None before one arrives."""

    @property
    def local_addr(self) -> tuple[str, int, bool] | None:
        """(ip, port, is_ipv6); IPv6 as eight 4-hex-digit groups. None when closed."""

    @property
    def remote_addr(self) -> tuple[str, int, bool] | None: ...
    @property
    def recv_len(self) -> int: ...
    @property
    def send_len(self) -> int: ...
    @property
    def recv_size(self) -> int: ...
    @property
    def send_size(self) -> int: ...
    def send(self, data: _Data) -> None:
        """Append raw bytes to the send buffer (binary-safe)."""

    def recv_data(self, length: int = -1, *, consume: bool = False) -> bytes:
        """Copy of the first `length` received bytes (all if negative); `consume=True`
        removes them from the receive buffer."""

    def recv_view(self) -> memoryview:
        """The receive buffer's bytes, without a copy; only inside a handler of this
        connection (else RuntimeError). `recv_data(consume=True)` moves what it shows.
        Zero-copy: a read-only memoryview into the receive buffer, released when this
        connection's event returns (then using it raises ValueError "operation forbidden on
        released memoryview object"). Copy what you keep (`bytes(view)`). A slice of it, or
        a buffer taken from it, that outlives the event reads a copy made then (with a
        ResourceWarning), never freed memory."""

    def send_data(self, length: int = -1) -> bytes:
        """Copy of the pending send buffer (not consumed)."""

    def close(self) -> None:
        """Close; inside a handler the close happens after the handler returns."""

    def drain(self) -> None:
        """Stop reading, flush the send buffer, then close."""

    def error(self, message: str) -> None:
        """Fire MG_EV_ERROR with `message` (Mongoose keeps 63 bytes) and close."""

    def reply(
        self, status_code: int, body: _Data = b"", headers: dict[Any, Any] | None = None
    ) -> None:
        """Send a complete HTTP response with Content-Length (no body for HEAD).

        `Content-Type: text/plain` unless `headers` has a content type; names and values
        (str, or converted with str()) are sent as UTF-8. A header name that is not an RFC
        9110 token, a value with a control character other than tab (CR, LF and NUL among
        them) and a status outside 200-999 raise `ValueError`; a status that is not an int,
        `TypeError` naming `status_code`. One response per request: `RuntimeError` when this
        request was already answered (by any of reply, reply_json, serve_file, serve_dir,
        http_respond, http_begin), when no request is waiting, or after `close()`."""

    def reply_json(
        self, data: Any, status_code: int = 200, headers: dict[Any, Any] | None = None
    ) -> None:
        """`reply()` with `json.dumps(data)` and `Content-Type: application/json`."""

    def serve_dir(
        self,
        message: HttpMessage,
        root_dir: str,
        extra_headers: str = "",
        mime_types: str = "",
        page404: str = "",
        *,
        directory_listing: bool = False,
    ) -> None:
        """Serve the request's URI from under `root_dir` (`ValueError` for a stale view).

        A directory without `index.html` is a 403 unless `directory_listing` is true (nginx's
        `autoindex` is off by default too); a listing never shows names that start with a
        dot. A URI holding a NUL (`%00`) gets a 400 (the server refuses such requests before
        any handler runs).

        Files are answered as `static_file_response()` describes (ranges, conditionals,
        precompressed siblings, 405 for methods other than GET/HEAD); a directory URL
        without its slash is redirected (301) to it with the query kept, a file URL ending
        in a slash is 404, and `page404` is sent as a 404. `extra_headers` go on every
        answer."""

    def serve_file(
        self, message: HttpMessage, path: str, extra_headers: str = "", mime_types: str = ""
    ) -> None:
        """Serve one file whatever the URI; 404 if missing. Answered as
        `static_file_response()` describes (ranges, conditionals, precompressed siblings,
        405 for methods other than GET/HEAD)."""

    def http_begin(
        self,
        status_code: int,
        headers: Sequence[tuple[str | bytes, str | bytes]] | None = None,
        *,
        reason: str | bytes | None = None,
        more_headers: Sequence[tuple[str | bytes, str | bytes]] | HeaderBlock | None = None,
    ) -> None:
        """Start a response whose body follows with `http_write()`/`http_sendfile()` and
        ends with `http_end()`. Framing is chosen here: the given Content-Length, else
        chunked (HTTP/1.1) or close-delimited (HTTP/1.0); none for HEAD, 1xx, 204 and 304.
        `str` headers are latin-1; a control character other than tab in a value or the
        reason, a Transfer-Encoding header or a second response raise `ValueError`.
        `more_headers` follow `headers` (a server's own fields, say, without copying the
        caller's list)."""

    def http_respond(
        self,
        status_code: int,
        headers: Sequence[tuple[str | bytes, str | bytes]] | None = None,
        body: _Data = b"",
        *,
        reason: str | bytes | None = None,
        more_headers: Sequence[tuple[str | bytes, str | bytes]] | HeaderBlock | None = None,
    ) -> bool:
        """A whole response in one call (`http_begin` + `http_write` + `http_end`),
        Content-Length added when the headers have none. A body that differs from a given
        Content-Length raises `ValueError` and nothing is sent. Returns `http_end()`'s
        result."""

    def http_write(self, data: _Data) -> None:
        """Queue body bytes of the response begun with `http_begin()` (`TypeError` for str,
        `ValueError` past its Content-Length)."""

    def http_sendfile(self, fd: int, offset: int = 0, count: int = -1) -> None:
        """Send `count` bytes (-1: to the end) of the regular file `fd` from `offset` with
        sendfile(2); the descriptor is duplicated, so the caller may close its own."""

    def http_end(
        self, trailers: Iterable[tuple[str | bytes, str | bytes]] | None = None
    ) -> bool:
        """Finish the response: keep-alive and pipelined requests go on. False when fewer
        bytes than its Content-Length were written: the connection is then closed.
        `trailers`: fields sent after the body (RFC 9110 section 6.5), on HTTP/2 and on a
        chunked HTTP/1.1 response (one begun without Content-Length); dropped otherwise.
        `ValueError` for a field that may not be a trailer (Content-Length, Host, ...)."""

    @property
    def response_started(self) -> bool:
        """True from `http_begin()` until the response is finished."""

    def body_read(self, max_bytes: int = -1) -> bytes:
        """Stream listeners: take up to `max_bytes` (-1: all) of the request body received
        so far; reading resumes once the consumer has caught up."""

    @property
    def body_pending(self) -> int:
        """Body bytes received and not yet taken with `body_read()`."""

    @property
    def body_complete(self) -> bool:
        """True once the whole request body has arrived."""

    def http_chunk(self, data: _Data) -> None:
        """Write one chunk of a chunked body; empty data ends the body."""

    def http_sse(self, event_type: str, data: str) -> None:
        """Write one Server-Sent Event as a chunk (each line of data gets a data: field)."""

    def http_basic_auth(self, username: str, password: str) -> None:
        """Client side: write an `Authorization: Basic` header line into the request."""

    def ws_upgrade(
        self, message: HttpMessage, extra_headers: dict[Any, Any] | None = None, *,
        deflate: bool = False
    ) -> None:
        """Answer the request with 101 and switch to WebSocket (fires MG_EV_WS_OPEN).
        `deflate=True`: agree to permessage-deflate (RFC 7692) when the client offers it;
        then `ws_send()` compresses TEXT/BINARY messages of 128 bytes or more and
        MG_EV_WS_MSG delivers messages inflated. Off by default, as Mongoose and 0.2.x.
        A `Sec-WebSocket-Extensions` in `extra_headers` is left alone (no negotiation)."""

    def pause_reading(self, paused: bool = True) -> None:
        """Stop (`paused=True`) or resume reading this connection's socket, for a consumer
        that lags behind: a WebSocket or raw TCP connection (an HTTP connection pauses by
        itself while a streamed body waits: `RuntimeError`). `is_full` tells the state."""

    def ws_accept(
        self, key: bytes, headers: Sequence[tuple[str | bytes, str | bytes]] | None = None,
        *, deflate_offer: str | bytes | None = None
    ) -> None:
        """Answer later a WebSocket handshake that arrived as MG_EV_HTTP_HDRS on a
        `stream_body` listener: 101 with the Sec-WebSocket-Accept for `key` (the request's
        Sec-WebSocket-Key) and `headers` (a chosen Sec-WebSocket-Protocol, cookies), then
        the connection is a WebSocket (MG_EV_WS_OPEN fires inside). Headers are checked as
        in `http_begin()`; `RuntimeError` when no request waits or a response started.
        `deflate_offer`: the request's Sec-WebSocket-Extensions, to agree permessage-deflate
        from (as `ws_upgrade(deflate=True)`); None: no compression."""

    def ws_send(self, data: _Data, op: int = ...) -> None:
        """Send one WebSocket frame (default text)."""

    def mqtt_pub(self, topic: str, message: _Data, qos: int = 0, retain: bool = False) -> int:
        """Publish; returns the packet id."""

    def mqtt_sub(self, topic: str, qos: int = 0) -> None: ...
    def mqtt_unsub(self, topic: str) -> None: ...
    def mqtt_ping(self) -> None: ...
    def mqtt_pong(self) -> None: ...
    def mqtt_disconnect(self) -> None: ...
    def tls_init(self, opts: TlsOpts) -> None:
        """Start TLS (servers in MG_EV_ACCEPT, clients in MG_EV_CONNECT)."""

    def tls_free(self) -> None: ...
    def resolve(self, url: str) -> None:
        """Asynchronous DNS lookup; MG_EV_RESOLVE when done."""

    def resolve_cancel(self) -> None: ...
    def sntp_request(self) -> None:
        """Ask for the time; MG_EV_SNTP_TIME delivers epoch milliseconds."""

class RequestBodyTooLarge(ConnectionResetError):
    """Raised by `Connection.body_read()` when a streamed (chunked) request body went over
    `max_body_size` after the handler had the head. `answered`: nothing of the response had
    gone out, so the server answered `413 Content Too Large` itself (a response the handler
    sends later is refused); otherwise the connection is closed. `limit` is the limit in
    bytes."""

    limit: int
    answered: bool

    def __init__(self, limit: int, answered: bool) -> None: ...

@final
class HttpMessage:
    """A parsed HTTP request or response, valid only during its event: afterwards
    `bool(msg)` is False and every member raises `RuntimeError`."""

    def __bool__(self) -> bool: ...
    @property
    def method(self) -> str: ...
    @property
    def uri(self) -> str: ...
    @property
    def query(self) -> str: ...
    @property
    def proto(self) -> str: ...
    @property
    def body_bytes(self) -> bytes: ...
    @property
    def body_text(self) -> str: ...
    @property
    def body_view(self) -> memoryview:
        """The body without a copy.
        Zero-copy: a read-only memoryview into the receive buffer, released when this
        connection's event returns (then using it raises ValueError "operation forbidden on
        released memoryview object"). Copy what you keep (`bytes(view)`). A slice of it, or
        a buffer taken from it, that outlives the event reads a copy made then (with a
        ResourceWarning), never freed memory."""

    @property
    def head_view(self) -> memoryview:
        """The request (or status) line and header lines as received, through the blank
        line, without a copy. Same lifetime as `body_view`."""

    def header_views(self) -> list[tuple[memoryview, memoryview]]:
        """(name, value) of every header as raw bytes in wire order, duplicates kept,
        without a copy. Same lifetime as `body_view`."""

    @property
    def uri_bytes(self) -> bytes:
        """The request target's path as sent (not decoded)."""

    @property
    def query_bytes(self) -> bytes:
        """The query string after `?`, as sent."""

    def header(self, name: str, default: str | None = None) -> str | None:
        """First header called `name` (case-insensitive), else `default`."""

    def headers_bytes(self) -> list[tuple[bytes, bytes]]:
        """All headers as raw bytes, in wire order, duplicates kept."""

    def asgi_scope(
        self, base: dict[str, Any], conn: Connection, state: dict[str, Any]
    ) -> dict[str, Any]:
        """An ASGI http scope: a copy of `base` plus this request's `method`, `path`
        (percent-decoded UTF-8), `raw_path`, `query_string`, `http_version`, `client` of
        `conn`, `headers` (lower-cased names, raw bytes, in order) and a copy of `state`."""

    def wsgi_environ(
        self, base: dict[str, Any], conn: Connection, root_path: str = ""
    ) -> dict[str, Any]:
        """A PEP 3333 environ: a copy of `base` plus this request's CGI variables (latin-1
        str values, duplicate headers joined, PATH_INFO decoded and split off `root_path`,
        REMOTE_ADDR/REMOTE_PORT of `conn`)."""

    def headers(self) -> list[tuple[str, str]]:
        """All headers in wire order."""

    def query_var(self, name: str) -> str | None:
        """URL-decoded query parameter; None if absent or empty; ValueError over 2048 bytes."""

    def status(self) -> int | None:
        """Status code of a parsed response (None once invalid)."""

    def header_var(self, header_name: str, var_name: str) -> str | None:
        """Sub-value of a header, e.g. `charset` of Content-Type."""

@final
class WsMessage:
    """One WebSocket data message, valid only during MG_EV_WS_MSG."""

    def __bool__(self) -> bool: ...
    @property
    def data(self) -> bytes: ...
    @property
    def text(self) -> str: ...
    @property
    def data_view(self) -> memoryview:
        """The message payload without a copy (`ws_send(msg.data_view)` echoes it with one
        copy, into the send buffer).
        Zero-copy: a read-only memoryview into the receive buffer, released when this
        connection's event returns (then using it raises ValueError "operation forbidden on
        released memoryview object"). Copy what you keep (`bytes(view)`). A slice of it, or
        a buffer taken from it, that outlives the event reads a copy made then (with a
        ResourceWarning), never freed memory."""

    @property
    def flags(self) -> int:
        """First frame byte: the low 4 bits are the opcode."""

@final
class MqttMessage:
    """One MQTT packet, valid only during MG_EV_MQTT_MSG / MG_EV_MQTT_CMD."""

    def __bool__(self) -> bool: ...
    @property
    def topic(self) -> str: ...
    @property
    def data(self) -> bytes: ...
    @property
    def text(self) -> str: ...
    @property
    def data_view(self) -> memoryview:
        """The PUBLISH payload without a copy.
        Zero-copy: a read-only memoryview into the receive buffer, released when this
        connection's event returns (then using it raises ValueError "operation forbidden on
        released memoryview object"). Copy what you keep (`bytes(view)`). A slice of it, or
        a buffer taken from it, that outlives the event reads a copy made then (with a
        ResourceWarning), never freed memory."""

    @property
    def id(self) -> int: ...
    @property
    def cmd(self) -> int: ...
    @property
    def qos(self) -> int: ...
    @property
    def ack(self) -> int: ...
    def properties(self) -> list[dict[str, Any]]:
        """MQTT 5 properties as dicts with keys id, iv (int; 0 for non-integer types), key
        (str for user properties, else None) and val (str for string types, bytes for
        binary data, None for integers); empty on 3.1.1 connections."""

@final
class Timer:
    """A scheduled callback; see `Manager.timer_add`."""

    def cancel(self) -> None:
        """Thread-safe and idempotent: no firing of the callback begins after this returns.
        With the GIL off (free-threaded Python), a firing the loop thread had already begun
        when another thread called `cancel()` still runs."""

    @property
    def active(self) -> bool: ...

@final
class TlsOpts:
    """TLS settings for `Connection.tls_init` (PEM text, stored as bytes)."""

    ca: bytes
    cert: bytes
    key: bytes
    name: bytes
    skip_verification: bool
    ciphers: bytes
    """The TLS 1.2 cipher list (OpenSSL syntax, OpenSSL engine only); b"": a server offers
    DEFAULT_CIPHERS, a client OpenSSL's defaults. A server prefers its own order. A list
    with an entry that selects nothing raises ValueError when given."""
    DEFAULT_CIPHERS: ClassVar[str]
    """ECDHE key exchange with AEAD ciphers only ("" with the built-in engine)."""
    def __init__(
        self,
        ca: str | bytes | None = None,
        cert: str | bytes | None = None,
        key: str | bytes | None = None,
        name: str | bytes | None = None,
        skip_verification: bool = False,
        ciphers: str | bytes | None = None,
    ) -> None: ...
    @classmethod
    def from_files(
        cls,
        ca: str | os.PathLike[str] | None = None,
        cert: str | os.PathLike[str] | None = None,
        key: str | os.PathLike[str] | None = None,
        name: str | bytes | None = None,
        skip_verification: bool = False,
        ciphers: str | bytes | None = None,
    ) -> TlsOpts:
        """Read PEM (or DER) files and check them now: a certificate that is expired, not
        yet valid or not a certificate, a key that is encrypted, unreadable or not the
        certificate's, raises ValueError naming the file. Files are read once; the returned
        options are reused for every connection. In the `ca` bundle, a certificate that has
        expired or is not valid yet is left out with a warning on the `cymongoose` logger
        (naming the file and the certificate's subject); only a bundle with no valid
        certificate raises."""

@final
class ProxyTable:
    """The core's form of a reverse proxy's routes. Build it with
    `cymongoose.proxy.ReverseProxy`, which checks and resolves every upstream first."""

    def __init__(
        self,
        upstreams: Sequence[tuple[str, str, str, str]],
        mounts: Sequence[tuple[str, Sequence[int]]],
        *,
        lb: int = 0,
        pool_size: int = 64,
        connect_timeout: float = 5.0,
        read_timeout: float = 60.0,
        idle_timeout: float = 4.0,
        max_fails: int = 3,
        fail_timeout: float = 10.0,
        max_head: int = 65536,
        via: bool = False,
        trusted: Sequence[tuple[int, bytes, int]] = (),
        trust_any: bool = False,
        route: Callable[[str, str, list[tuple[str, str]]], str | None] | None = None,
        tls: dict[int, TlsOpts] | None = None,
    ) -> None:
        """`upstreams`: (label, connect URL `tcp://ADDRESS:PORT`, Host authority, path)
        each; `mounts`: (prefix, indexes into `upstreams`); `lb`: 0 round robin, 1 least
        connections; `trusted`: (4 or 6, packed network address, prefix bits); `tls`: the
        client TlsOpts of each https upstream, by index (its `name` is sent as SNI and
        checked; OpenSSL engine only, else `ValueError`)."""

    def stats(self) -> list[dict[str, Any]]:
        """Per upstream: open, busy, idle and waiting connections, opened, requests,
        failures (consecutive) and up."""

    def set_probe_result(self, index: int, healthy: bool) -> None:
        """An active health check's verdict on upstream `index` (`IndexError` if none)."""

    def set_address(self, index: int, connect_url: str) -> None:
        """Connect upstream `index` at `connect_url` (`tcp://ADDRESS:PORT`) from now on."""

    def index_of(self, label: str) -> int | None: ...

@final
class RpcReq:
    """One JSON-RPC request passed to an `Rpc` handler."""

    @property
    def frame(self) -> str: ...
    def ok(self, result_json: str) -> None: ...
    def err(self, code: int, message: str) -> None: ...

@final
class Rpc:
    """A JSON-RPC 2.0 dispatcher."""

    def __init__(self) -> None: ...
    def add(self, method: str, handler: Callable[[RpcReq], object]) -> None: ...
    def process(self, frame: str | Buffer) -> str: ...
    @property
    def methods(self) -> list[str]: ...

_H = TypeVar("_H", bound=Callable[..., Any])

def handles(*events: int) -> Callable[[_H], _H]:
    """Decorator: deliver only `events` to this handler (default: every event).

    Most events a typical handler ignores are MG_EV_POLL, fired for every connection on
    every loop iteration; declaring `@handles(MG_EV_HTTP_MSG)` skips those Python calls."""

def listen_fd(
    manager: Manager,
    sock: int | _HasFileno,
    handler: _Handler | None = None,
    *,
    http: bool = False,
    tls: bool = False,
    stream_body: bool = False,
    http2: bool | None = None,
    **limits: int,
) -> Connection:
    """Listen on a stream socket opened outside Mongoose (a Unix socket, an inherited or an
    SO_REUSEPORT one), already bound and listening. The Manager listens on its own duplicate
    of the descriptor (closed with the listener); the caller keeps and closes `sock`. The
    socket becomes non-blocking. `http=True` parses HTTP as `listen("http://...")` does,
    with `stream_body`, `http2` and the HTTP limits of `listen()`; `tls=True` marks accepted
    connections for `tls_init()` in their `MG_EV_ACCEPT`. `ValueError` for a socket that is
    not a listening stream socket."""

def read_metrics(buffer: Buffer) -> _Metrics:
    """The snapshot `Manager.metrics()` returns, decoded from a buffer of `METRICS_SIZE`
    bytes (one a Manager counts into after `share_metrics()`). `ValueError` for a wrong size."""

def event_name(ev: int) -> str: ...
def log_set(level: int) -> None: ...
def log_get() -> int: ...
def url_encode(data: str) -> str: ...
def url_port(url: str) -> int: ...
def url_host(url: str) -> str: ...
def url_user(url: str) -> str: ...
def url_pass(url: str) -> str: ...
def url_uri(url: str) -> str: ...
def url_is_ssl(url: str) -> bool: ...
def match(s: str, pattern: str) -> tuple[bool, list[str]]:
    """Glob-match `s` against `pattern`: `?` is one character, `*` a run without `/`, `#`
    any run. `(True, captures)` with one capture per wildcard, in pattern order, each as
    short as a match allows; `(False, [])` when `s` does not match."""
def http_var(buf: _Data, name: str) -> str | None: ...
def http_parse_multipart(body: _Data, offset: int = 0) -> tuple[int, dict[str, Any] | None]: ...
def md5(data: _Data) -> bytes: ...
def sha1(data: _Data) -> bytes: ...
def sha256(data: _Data) -> bytes: ...
def hmac_sha256(key: _Data, data: _Data) -> bytes: ...
def base64_encode(data: _Data) -> str: ...
def base64_decode(data: str) -> bytes: ...
def millis() -> int: ...
def random_bytes(length: int) -> bytes: ...
def random_str(length: int) -> str: ...
def crc32(data: _Data, initial: int = 0) -> int: ...
def json_get(data: _Data, path: str) -> str | None: ...
def json_get_num(data: _Data, path: str, default: Any = None) -> Any: ...
def json_get_bool(data: _Data, path: str, default: Any = None) -> Any: ...
def json_get_long(data: _Data, path: str, default: int = 0) -> int: ...
def json_get_str(data: _Data, path: str) -> str | None: ...

__all__ = [
    "Manager",
    "Connection",
    "RequestBodyTooLarge",
    "HttpMessage",
    "WsMessage",
    "MqttMessage",
    "Timer",
    "TlsOpts",
    "ProxyTable",
    "Rpc",
    "RpcReq",
    "Event",
    "UNEXPOSED_EVENTS",
    "WAKEUP_MAX_PAYLOAD",
    "DEFAULT_MAX_RECV_SIZE",
    "METRICS_SIZE",
    "DURATION_BOUNDS",
    "read_metrics",
    "MONGOOSE_VERSION",
    "TLS_ENGINE",
    "MG_EV_ERROR",
    "MG_EV_OPEN",
    "MG_EV_POLL",
    "MG_EV_RESOLVE",
    "MG_EV_CONNECT",
    "MG_EV_ACCEPT",
    "MG_EV_TLS_HS",
    "MG_EV_READ",
    "MG_EV_WRITE",
    "MG_EV_CLOSE",
    "MG_EV_HTTP_HDRS",
    "MG_EV_HTTP_MSG",
    "MG_EV_WS_OPEN",
    "MG_EV_WS_MSG",
    "MG_EV_WS_CTL",
    "MG_EV_MQTT_CMD",
    "MG_EV_MQTT_MSG",
    "MG_EV_MQTT_OPEN",
    "MG_EV_SNTP_TIME",
    "MG_EV_WAKEUP",
    "MG_EV_USER",
    "WEBSOCKET_OP_CONTINUE",
    "WEBSOCKET_OP_TEXT",
    "WEBSOCKET_OP_BINARY",
    "WEBSOCKET_OP_CLOSE",
    "WEBSOCKET_OP_PING",
    "WEBSOCKET_OP_PONG",
    "MG_LL_NONE",
    "MG_LL_ERROR",
    "MG_LL_INFO",
    "MG_LL_DEBUG",
    "MG_LL_VERBOSE",
    "MQTT_PROP_TYPE_BYTE",
    "MQTT_PROP_TYPE_STRING",
    "MQTT_PROP_TYPE_STRING_PAIR",
    "MQTT_PROP_TYPE_BINARY_DATA",
    "MQTT_PROP_TYPE_VARIABLE_INT",
    "MQTT_PROP_TYPE_INT",
    "MQTT_PROP_TYPE_SHORT",
    "handles",
    "listen_fd",
    "event_name",
    "log_set",
    "log_get",
    "url_encode",
    "url_port",
    "url_host",
    "url_user",
    "url_pass",
    "url_uri",
    "url_is_ssl",
    "match",
    "http_var",
    "http_parse_multipart",
    "md5",
    "sha1",
    "sha256",
    "hmac_sha256",
    "base64_encode",
    "base64_decode",
    "millis",
    "random_bytes",
    "random_str",
    "crc32",
    "json_get",
    "json_get_num",
    "json_get_bool",
    "json_get_long",
    "json_get_str",
]

@final
class HeaderBlock:
    """Header fields checked and rendered once, for fields many responses carry unchanged
    (a server's Date and Server): as `more_headers=` of `Connection.http_begin()` and
    `http_respond()` they are copied into each response as they are. Raises `ValueError`
    for an invalid name or value and for Content-Length or Transfer-Encoding (a body's
    framing belongs to each response), `TypeError` for names or values that are not str or
    bytes."""

    @property
    def lines(self) -> bytes: ...
    @property
    def pairs(self) -> tuple[tuple[str | bytes, str | bytes], ...]: ...
    def __init__(self, headers: Iterable[tuple[str | bytes, str | bytes]]) -> None: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[tuple[str | bytes, str | bytes]]: ...

@disjoint_base
class WSGIExchange:
    """State of one WSGI request and response, for `cymongoose.wsgi` (not a user API).
    Calling it is PEP 3333's `start_response`; `write()` sends through `stream()`. The
    hooks `stream()`, `feed_input()` and `gone()` raise `NotImplementedError` here: the
    server's subclass implements them, and the C side calls up only through them."""

    def __init_subclass__(cls, *, partial: bool = False) -> None:
        """A Python subclass must override every hook (else `TypeError` at its class
        statement); `partial=True` marks a mixin holding some of them."""

    state: Any
    conn: Connection
    environ: dict[str, Any]
    input: Any
    status: tuple[int, str | None] | None
    headers: list[tuple[str, str]]
    declared: int
    sent: int
    head_sent: bool
    head_queued: bool
    @property
    def closed(self) -> bool: ...
    @property
    def queued(self) -> int: ...
    @property
    def backlog(self) -> int: ...
    cond: Any
    @property
    def waiting(self) -> bool: ...
    is_head: bool
    finished: bool
    stock: int
    busy: bool
    started: float
    @property
    def app_phase(self) -> int: ...
    @property
    def timed_out(self) -> bool: ...
    parked: tuple[Any, ...] | None
    resumed: tuple[Any, ...] | None
    def __init__(
        self, state: Any, conn: Connection, environ: dict[str, Any], is_head: bool
    ) -> None: ...
    def __call__(
        self, status: str, headers: list[tuple[str, str]], exc_info: Any = None
    ) -> Callable[[bytes], None]: ...
    def write(self, data: bytes) -> None: ...
    def stream(self, data: bytes) -> None: ...
    def feed_input(self) -> None: ...
    def gone(self) -> None: ...
    def time_out(self) -> int:
        """Mark the exchange timed out unless its app returned; the app's phase: 0 queued
        (it will never run), 1 running (its thread is abandoned), 2 returned (no change)."""
    def flow_ahead(self, posted: int = 0) -> int:
        """The body bytes posted and not yet read by the client (queued + backlog), read
        under the flow lock after adding `posted` (the app side, as it posts them)."""
    def flow_wrote(self, n: int, backlog: int) -> bool:
        """Loop side: `n` of them were written, the send buffer holds `backlog`; whether
        the app waits (then notify it)."""
    def flow_closed(self) -> bool:
        """Loop side: the exchange ended for the app; whether the app waits."""
    def flow_wait_begin(self, low: int) -> bool:
        """App side, holding `cond`: whether to wait for the client to drain below `low`."""
    def flow_wait_end(self) -> None: ...

@disjoint_base
class WSGITurns:
    """Who owns the loop among the WSGI server's threads, for `cymongoose.wsgi` (not a user
    API): `WSGILoop.run_batch()` reads and writes these fields and calls the hooks
    `wake_standby()` and `apps_wait()`, which raise `NotImplementedError` here."""

    owner: Any
    current: Any
    standby_asleep: bool
    standby_looks: int
    def __init_subclass__(cls, *, partial: bool = False) -> None:
        """A Python subclass must override every hook (else `TypeError` at its class
        statement); `partial=True` marks a mixin holding some of them."""
    def wake_standby(self) -> None: ...
    def apps_wait(self) -> None: ...

@disjoint_base
class ASGIServerState:
    """What the ASGI server's exchanges and WebSocket cycles share, for `cymongoose.asgi`
    (not a user API): the core reads these fields and calls `log_access()`, which the
    server's subclass implements."""

    def __init_subclass__(cls, *, partial: bool = False) -> None:
        """A Python subclass must override every hook (else `TypeError` at its class
        statement); `partial=True` marks a mixin holding some of them."""
    default_headers: list[HeaderBlock | None]
    kick: Callable[[], object]
    access_log_on: bool
    clock_requests: bool
    quiet_handler: Any
    busy_handler: Any
    websocket_handler: Any
    def log_access(self, exchange: Any) -> None: ...

@disjoint_base
class ASGIWaiter:
    """Where a cycle's coroutines wait for the loop, for `cymongoose.asgi` (not a user
    API): the C side calls the hook `wake()`, which raises `NotImplementedError` here."""

    def __init_subclass__(cls, *, partial: bool = False) -> None:
        """A Python subclass must override every hook (else `TypeError` at its class
        statement); `partial=True` marks a mixin holding some of them."""
    def wake(self) -> None: ...

@disjoint_base
class ASGICycle:
    """What `ASGILoop` runs an app for, an HTTP exchange or a WebSocket, for
    `cymongoose.asgi` (not a user API). The hooks `receive()`, `send()` (given to the app),
    `gone()`, `app_done()` and `cancelled()` raise `NotImplementedError` here: the server's
    subclasses implement them, and the C side calls up only through them."""

    task: Any
    server_state: ASGIServerState
    conn: Connection
    scope: dict[str, Any]
    def __init_subclass__(cls, *, partial: bool = False) -> None:
        """A Python subclass must override every hook (else `TypeError` at its class
        statement); `partial=True` marks a mixin holding some of them."""
    async def receive(self) -> MutableMapping[str, Any]: ...
    async def send(self, message: dict[str, Any]) -> None: ...
    def gone(self) -> None: ...
    def app_done(self, exc: BaseException | None) -> None: ...
    def cancelled(self) -> None: ...

@disjoint_base
class ASGIHTTPExchange(ASGICycle):
    """State of one ASGI HTTP request and response, for `cymongoose.asgi` (not a user API):
    `receive()`/`send()` on their common paths; the server's subclass implements the hooks
    `receive_slow()` and `send_slow()` for the others (each returns what `receive()` or
    `send()` awaits) and those of `ASGICycle`."""

    body: bytes | None
    streaming: bool
    status: int
    headers: Any
    head_sent: bool
    complete: bool
    closed: bool
    failed: bool
    trailers: list[tuple[bytes, bytes]] | None
    body_done: bool
    rx: ASGIWaiter | None
    tx: ASGIWaiter | None
    busy: bool
    sent: int
    started: float
    def __init__(
        self, server_state: ASGIServerState, conn: Connection, scope: dict[str, Any]
    ) -> None: ...
    async def receive(self) -> dict[str, Any]: ...
    async def send(self, message: dict[str, Any]) -> None: ...
    def receive_slow(self) -> Awaitable[MutableMapping[str, Any]]: ...
    def send_slow(self, message: dict[str, Any]) -> Awaitable[None]: ...
    def _finish(self) -> None: ...

@disjoint_base
class ASGILoop:
    """The ASGI server's per-request work on the loop, for `cymongoose.asgi` (not a user
    API): the handler of a connection waiting for a request head, and the app's task. The
    server's subclass implements the hooks `admit_request()` (every request, when
    `python_admission` is set) and `admit_websocket()`."""

    def __init_subclass__(cls, *, partial: bool = False) -> None:
        """A Python subclass must override every hook (else `TypeError` at its class
        statement); `partial=True` marks a mixin holding some of them."""

    cymongoose_events: frozenset[int]
    server_state: ASGIServerState
    app: Any
    loop: Any
    tasks: set[Any]
    exchange_type: Any
    bases: dict[int, dict[str, Any]]
    base_default: dict[str, Any]
    lifespan_state: dict[str, Any]
    unix_conns: set[int]
    python_admission: bool
    def __call__(self, conn: Connection, ev: int, msg: Any) -> None: ...
    def admit_request(self, conn: Connection, msg: HttpMessage) -> None: ...
    def admit_websocket(
        self, conn: Connection, msg: HttpMessage, scope: dict[str, Any]
    ) -> None: ...
    def start(self, conn: Connection, exchange: ASGIHTTPExchange) -> None: ...
    def spawn(self, cycle: ASGICycle) -> None: ...
    async def run_app(self, cycle: ASGICycle) -> None: ...

def log_escape(text: str) -> str:
    """`text` made safe to write into a log line, as nginx escapes its access log: control
    characters (below 0x20, and 0x7f), `"`, `\\` and every character from 0x80 on as
    `\\xNN` (`\\uNNNN` above 0xFF). Text with nothing to escape is returned as it is,
    cheaply. What the servers' access and error logs do to every field a client chose; a raw
    handler that logs request fields can use it too."""

def log_escape_fields(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """`values` with every `str` item passed through `log_escape()`; the same tuple when none
    needs it. The access log's one call per line."""

def wsgi_environ_base(items: dict[str, Any]) -> dict[str, Any]:
    """The base environ of a listener, for `cymongoose.wsgi` (not a user API): `items` plus
    placeholders for what each request sets, with room for its headers."""

class DefaultHeader(enum.IntEnum):
    """The fields a server adds to a response whose app left them out, as bits of the index
    into its default header blocks (`cymongoose.serving.default_headers`)."""

    DEFAULT_DATE = 1
    DEFAULT_SERVER = 2

def missing_default_headers(headers: Iterable[Sequence[Any]]) -> int:
    """Which of `DEFAULT_DATE` and `DEFAULT_SERVER` the (name, value) pairs `headers` leave
    for the server to add (names compared without case; a name that is neither `bytes` nor
    `str` counts as neither)."""

@final
class StaticFileResponse:
    """What `static_file_response()` answers: `status` and `headers` (str pairs, Date
    included), then either `body` or `count` bytes of the open descriptor `fd` from `offset`
    (`fd` is -1 when no file goes out: 304, 405, 416, 404). The caller owns `fd` and closes
    it, with `close()` or `os.close()`. `path` is the file those bytes come from (a
    precompressed sibling's when one was chosen), None without one."""

    @property
    def status(self) -> int: ...
    @property
    def headers(self) -> list[tuple[str, str]]: ...
    @property
    def body(self) -> bytes: ...
    @property
    def fd(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def count(self) -> int: ...
    @property
    def path(self) -> str | None: ...
    def close(self) -> None:
        """Close `fd` (idempotent)."""

def static_file_response(
    method: str | bytes,
    path: str | None,
    content_type: str | None,
    *,
    range: str | bytes | None = None,
    if_range: str | bytes | None = None,
    if_none_match: str | bytes | None = None,
    if_modified_since: str | bytes | None = None,
    accept_encoding: str | bytes | None = None,
    within: str | None = None,
) -> StaticFileResponse:
    """The HTTP answer for the file `path`, already found and checked by the caller: what
    `Connection.serve_dir()`/`serve_file()` and the `--static` middlewares send.

    Methods other than GET and HEAD get 405 with `Allow: GET, HEAD`; a path that is not a
    regular file, 404. A precompressed sibling (`path` + .zst, .br or .gz) is chosen by
    `accept_encoding` (q-values; ties go to zstd, then br, then gzip); every answer about a
    file with a sibling carries `Vary: Accept-Encoding`. ETags are strong,
    `"<mtime hex>-<size hex>"`, a sibling's with `-<coding>` appended. `if_none_match`
    (weak comparison, `*`, lists) and else `if_modified_since` (ignored when in the future)
    give 304. One byte range (`first-last`, `first-`, `-suffix`) gives 206, or 416 with
    `Content-Range: bytes */size` when it starts past the end; several ranges, another unit
    or a malformed field give the whole file (200); `if_range` (a strong ETag or the exact
    Last-Modified date) keeps the range only while it matches. Under `within`, a sibling
    that resolves outside that directory is ignored."""

class OutboxOp(enum.IntEnum):
    """The steps of a response the WSGI server's app threads queue for its loop (not a user
    API): `WSGILoop.drain()` writes `OUTBOX_WHOLE` itself, `write_step()` the others."""

    OUTBOX_WHOLE = 0
    OUTBOX_BEGIN = 1
    OUTBOX_WRITE = 2
    OUTBOX_FILE = 3
    OUTBOX_END = 4
    OUTBOX_ABORT = 5
    OUTBOX_PARK = 6

@disjoint_base
class WSGILoop:
    """The WSGI server's per-request work on the loop thread, for `cymongoose.wsgi` (not a
    user API): the handler of a connection waiting for a request head, run_batch() and
    drain(). The hooks `write_step()`, `protocol_error()`, `log_access()`, `finish_app()`,
    `app_failed()`, `timed_out_app_returned()` and `resume_app()` raise
    `NotImplementedError` here: the server's subclass implements them, and the C side calls
    up only through them. They take the server's exchanges, subclasses of `WSGIExchange`,
    hence `Any`."""

    def __init_subclass__(cls, *, partial: bool = False) -> None:
        """A Python subclass must override every hook (else `TypeError` at its class
        statement); `partial=True` marks a mixin holding some of them."""

    cymongoose_events: frozenset[int]
    state: Any
    exchange_type: Any
    stream_input_type: Any
    no_body: Any
    busy_handler: Any
    pending: Any
    live: set[Any]
    bases: dict[int, dict[str, Any]]
    base_default: dict[str, Any]
    root_path: str
    outbox: Any
    quiet_handler: Any
    access_log_on: bool
    clock_requests: bool
    apps_in_parallel: bool
    def __call__(self, conn: Connection, ev: int, msg: Any) -> None: ...
    def run_batch(
        self, turns: WSGITurns, me: Any, app: Any, slots: Any, once: bool = False
    ) -> None: ...
    def drain(self, outbox: Any, stock: list[Any]) -> None: ...
    def write_step(self, ex: Any, op: int, arg: Any) -> None: ...
    def protocol_error(self, ex: Any, exc: BaseException) -> None: ...
    def log_access(self, ex: Any) -> None: ...
    def finish_app(self, ex: Any, result: Any) -> None: ...
    def app_failed(self, ex: Any, exc: BaseException) -> None: ...
    def timed_out_app_returned(self, ex: Any, slots: Any) -> None: ...
    def resume_app(self, ex: Any) -> None: ...

