"""The app server's options: one table, one entry per option, and the `Config` it makes.

Each option is declared once, as a field of `Config` whose metadata is its `Setting`: the
default, the type, the rule a value must pass (with the words that say what it accepts), the
help and the group it is listed under. From that one table come:

- the command line's parser and its `CYMONGOOSE_<NAME>` variables (cli.py);
- the checks: one rule per option, the same words whichever way a value arrived, naming the
  option as it arrived (`--threads`, `CYMONGOOSE_THREADS='x'` or the keyword `threads`);
  a wrong value raises `ConfigError` (a `ValueError`), a keyword of the wrong type raises
  `TypeError`;
- the options table of docs/deployment.md (`python -m cymongoose.config --markdown`, which a
  test compares with the page);
- what the serving process, the supervisor, the reloader, `WSGIServer` and `ASGIServer` are
  configured with: a `Config`, frozen, so a worker can never see it change.

This module sits low in the layers (only errors, access_log, proxy_headers, proxy and the core
below it) and imports the core lazily: `import cymongoose` stays cheap.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import ConfigError

if TYPE_CHECKING:
    from ._mongoose import TlsOpts
    from .access_log import AccessLog
    from .proxy import ReverseProxy
    from .proxy_headers import ProxyHeaders

__all__ = ["Config", "Setting", "SETTINGS", "renamed", "markdown_table"]

# A rule: None when the value is fine, else why not ("" when `must` says it all).
Rule = Callable[[Any], "str | None"]

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


@dataclass(frozen=True)
class Setting:
    """One option: its keyword `name`, its command-line `flag` and `variable`, its type
    (`kind`: bool, int, float, str or tuple for a repeatable option), its default, the `rule`
    its value must pass and the words saying what it `must` be ("be an int >= 1")."""

    name: str
    kind: type
    default: Any
    group: str
    help: str
    must: str
    rule: Rule | None = None
    optional: bool = False  # None is a value: "not set"
    metavar: str | None = None
    doc_default: str | None = None  # the default as the docs show it, when not obvious
    doc_more: str = ""  # what the docs add to the help (links, details)
    hidden: bool = False  # set by the supervisor for its workers; not for people
    positional: bool = False
    limit: bool = False  # an HTTP limit of the core (docs/server-behaviour.md)
    negatable: bool = False  # an on/off flag with a --no- form (to undo a variable)

    @property
    def flag(self) -> str:
        return self.name.upper() if self.positional else "--" + self.name.replace("_", "-")

    @property
    def metavar_text(self) -> str:
        return self.metavar or self.name.upper()

    @property
    def variable(self) -> str:
        return "CYMONGOOSE_" + self.name.upper()

    def default_text(self) -> str:
        """The default as people read it: 30, off, 16 MiB, `info`."""
        if self.doc_default is not None:
            return self.doc_default
        if self.limit:
            return _limit_text(self.name, _core_limits()[self.name])
        if self.kind is bool:
            return "on" if self.default else "off"
        if self.default in (None, "", ()):
            return ""
        if self.kind is float:
            return f"{self.default:g}"
        return str(self.default) if self.kind is int else f"`{self.default}`"

    def from_text(self, raw: str, label: str) -> Any:
        """A value from a command-line string or an environment variable."""
        if self.kind is bool:
            if raw.strip().lower() not in _TRUE + _FALSE:
                raise ConfigError(f"{label} must be 1/true/yes or 0/false/no")
            return raw.strip().lower() in _TRUE
        if self.kind is tuple:
            return tuple(v.strip() for v in raw.split(",") if v.strip())
        if self.kind is str:
            return raw
        try:
            return self.kind(raw.strip())
        except ValueError:
            raise ConfigError(_message(label, self.must, _HIDDEN if "=" in label else raw,
                                       None)) from None

    def check(self, value: Any, label: str, shown: bool = True) -> Any:
        """`value`, normalised (an int as a float, a list as a tuple), if it passes the type
        and the rule; TypeError or ConfigError naming the option by `label` otherwise.
        `shown=False`: the label already shows the value (a variable's `NAME='raw'`)."""
        if value is None and self.optional:
            return None
        typed = self._typed(value, label, shown)
        items = typed if self.kind is tuple else (value,)
        rule = _core_rule(self.name) if self.limit else self.rule
        for item in items:
            reason = rule(item) if rule is not None else None
            if reason is not None:
                raise ConfigError(_message(label, self.must, item if shown else _HIDDEN,
                                           reason))
        return typed

    def _typed(self, value: Any, label: str, shown: bool) -> Any:
        kind = self.kind
        if kind is tuple and isinstance(value, (list, tuple)) and all(
                isinstance(v, str) for v in value):
            return tuple(value)
        if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if kind is not tuple and type(value) is kind:
            return value
        must = "be True or False" if kind is bool else self.must
        raise TypeError(_message(label, must, value if shown else _HIDDEN, None))


_HIDDEN = object()  # the label shows the value already


def _message(label: str, must: str, value: Any, reason: str | None) -> str:
    text = f"{label} must {must}"
    if value is not _HIDDEN:
        text += f", not {value!r}"
    return text + (f": {reason}" if reason else "")


def _option(default: Any, group: str, help: str, must: str = "be on or off", *,
            kind: type | None = None, **more: Any) -> Any:
    """A `Config` field and its `Setting` (named after the field once the class exists)."""
    setting = Setting("", kind or type(default), default, group, help, must, **more)
    return field(default=default, metadata={"setting": setting})


# The rules. Each says what is wrong beyond `must` ("" for nothing more), or returns None.
def _at_least(low: int | float) -> Rule:
    return lambda v: None if v >= low else ""


def _seconds_at_least(low: float) -> Rule:
    """A duration the stop path waits on with a timer: finite (a timer cannot wait for inf)."""
    return lambda v: None if low <= v < math.inf else ""


def _one_of(*choices: str) -> tuple[Rule, str, str]:
    """The rule, the `must` words and the metavar for a choice."""
    return ((lambda v: None if v in choices else ""),
            "be one of " + ", ".join(choices), "{" + ",".join(choices) + "}")


def _codings(spec: str) -> str | None:
    """--compression: zstd and/or gzip, comma-separated, in any order ("on": both)."""
    names = [part.strip().lower() for part in spec.split(",")]
    if spec.strip().lower() == "on":
        return None
    return None if names and all(n in ("zstd", "gzip") for n in names) else ""


def _port(v: int) -> str | None:
    return None if 0 <= v <= 65535 else ""


def _root_path(v: str) -> str | None:
    return None if not v or (v.startswith("/") and not v.endswith("/")) else ""


def _mount(spec: str) -> str | None:
    url, sep, directory = spec.partition("=")
    if not sep or not url.startswith("/") or not directory:
        return ""
    return None if os.path.isdir(directory) else f"{directory!r} is not a directory"


def _proxy_route(spec: str) -> str | None:
    from .proxy.upstreams import check_route

    return check_route(spec)


def _trusted(spec: str) -> str | None:
    from .proxy_headers import ProxyHeaders

    try:
        ProxyHeaders(spec)
    except ValueError as exc:
        return str(exc).partition(": ")[2] or str(exc)
    return None


def _ciphers(spec: str) -> str | None:
    from ._mongoose import TlsOpts

    try:
        TlsOpts(ciphers=spec)
    except ValueError as exc:
        return str(exc).partition(": ")[2] or str(exc)
    return None


def _log_format(fmt: str) -> str | None:
    from .access_log import AccessLog

    try:
        AccessLog(None if fmt == "json" else fmt, as_json=fmt == "json")
    except ValueError as exc:
        return str(exc)
    return None


def _env_file(path: str) -> str | None:
    # Its lines are read where the app loads (process/env_file.py), which names a bad one.
    if not os.path.isfile(path):
        return "no such file"
    return None if os.access(path, os.R_OK) else "not readable"


def _health_path(path: str) -> str | None:
    """The core's own check of a health path (Manager.health_path), so the option and the
    Manager accept the same paths."""
    from ._mongoose import Manager

    with Manager() as manager:
        try:
            manager.health_path = path
        except ValueError:
            return ""  # the option's `must` says what the core takes
    return None


def _core_rule(name: str) -> Rule:
    """An HTTP limit's rule is the core's own check (its range), on a Manager of its own."""
    def rule(value: int) -> str | None:
        from ._mongoose import Manager

        with Manager() as manager:
            try:
                manager.set_http_limits(**{name: value})
            except (ValueError, TypeError) as exc:
                return str(exc)
        return None
    return rule


@functools.cache
def _core_limits() -> dict[str, int]:
    """The core's default limits (read when first needed, never at import)."""
    from ._mongoose import Manager

    with Manager() as manager:
        limits = dict(manager.http_limits)
    return limits


def _limit_text(name: str, value: int) -> str:
    """A limit's default as people read it: 16 MiB, 30 s, 100."""
    if name.endswith("_ms"):
        return f"{value / 1000:g} s"
    if name.endswith("_size"):
        for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
            if value >= size and value % size == 0:
                return f"{value // size} {unit}"
        return f"{value} bytes"
    return str(value)


def _limit(help: str) -> Any:
    """An HTTP limit: None leaves the core's default (its help shows it)."""
    return _option(None, "limits", help, "be an int in the range the core takes", kind=int,
                   optional=True, limit=True, metavar="N")


_INTERFACE = _one_of("auto", "wsgi", "asgi", "raw")
_LIFESPAN = _one_of("auto", "on", "off")
_PROXY_LB = _one_of("round_robin", "least_conn")
_LOG_LEVEL = _one_of("critical", "error", "warning", "info", "debug")
_PROXY_HEADERS_SOURCE = _one_of("x-forwarded", "forwarded")  # proxy_headers.SOURCES


@dataclass(frozen=True, kw_only=True)
class Config:
    """Every option of the app server, checked. Build it from keywords (`Config(threads=4)`),
    from the command line (`Config.from_command_line`), or from another one
    (`dataclasses.replace`). `SETTINGS` describes each field."""

    app: str | None = _option(None, "app", "the app as module:attribute, e.g. mysite.wsgi:app",
                              "be module:attribute", kind=str, optional=True, positional=True)
    factory: bool = _option(False, "app", "APP is a callable returning the app")
    interface: str = _option("auto", "app", "how to call the app (auto: detect it)",
                             _INTERFACE[1], rule=_INTERFACE[0], metavar=_INTERFACE[2])
    root_path: str = _option("", "app", "mount point: SCRIPT_NAME / root_path",
                             "start with '/' and not end with one (or be empty)",
                             rule=_root_path, metavar="/MOUNT")
    static: tuple[str, ...] = _option(
        (), "app", "serve DIR's files under URL (repeatable; answered by the core, in C)",
        "be URL=DIR, URL starting with '/' and DIR a directory", rule=_mount, metavar="URL=DIR",
        doc_more="files leave through `sendfile(2)`, with `Last-Modified` and `304` answers")
    compression: str | None = _option(
        None, "app", "compress responses the client accepts compressed, in C: CODINGS is "
        "zstd,gzip (on: both)", "be on, zstd, gzip or zstd,gzip", kind=str, optional=True,
        rule=_codings, metavar="CODINGS", doc_default="off",
        doc_more="JSON, HTML, CSS, JS, SVG, XML, text and event streams of "
                 "`--compression-min-length` bytes or more (streams: each write flushed); a "
                 "response opts out with `Content-Encoding: identity`; see "
                 "[Server behaviour](server-behaviour.md#response-compression)")
    compression_min_length: int = _option(
        512, "app", "bytes a body needs, when its length is known, to be compressed",
        "be an int >= 0", rule=_at_least(0), metavar="N")
    lifespan: str = _option("auto", "app", "ASGI lifespan protocol: auto runs it unless the "
                            "app refuses it, on requires it, off skips it", _LIFESPAN[1],
                            rule=_LIFESPAN[0], metavar=_LIFESPAN[2])
    env_file: str | None = _option(
        None, "app", "set the KEY=VALUE lines of FILE in the environment before the app loads",
        "be a readable file", kind=str, optional=True, rule=_env_file, metavar="FILE",
        doc_more="`#` comments, blank lines, `export ` and quoted values as in a `.env` "
                 "file; a variable already set wins; `CYMONGOOSE_*` lines there do not "
                 "configure the server (its options are read before)")
    stream_timeout: float = _option(
        5.0, "app", "seconds a WSGI app's streamed response waits for a client that reads "
        "nothing (then its connection is closed; a write() gets TimeoutError)",
        "be a number of seconds > 0", rule=lambda v: None if v > 0 else "", metavar="S")
    park_streams: bool = _option(
        True, "app", "a WSGI iterable whose client is behind gives its thread back until the "
        "client reads (it goes on on any thread)", negatable=True,
        doc_more="`--no-park-streams` keeps the thread waiting, for an iterable that uses "
                 "thread-bound state across its items (Django's database connections, "
                 "`threading.local`); see [WSGI](wsgi.md#slow-clients)")

    ws_per_message_deflate: bool = _option(
        True, "app", "ASGI WebSockets: compress messages with permessage-deflate when the "
        "client offers it", negatable=True,
        doc_more="`--no-ws-per-message-deflate` turns it off; memory per connection and "
                 "limits in [server behaviour](server-behaviour.md#websocket-compression)")

    host: str = _option("127.0.0.1", "binding", "TCP address to listen on",
                        doc_more="`::` or `[::1]` for IPv6")
    port: int = _option(8000, "binding", "TCP port", "be 0..65535", rule=_port)
    uds: str | None = _option(None, "binding", "listen on this Unix socket instead",
                              "be a path", kind=str, optional=True, metavar="PATH",
                              doc_more="a stale socket file is replaced; a live one is "
                                       "refused")
    fd: int | None = _option(None, "binding", "listen on this inherited socket descriptor",
                             "be a descriptor (an int >= 0)", kind=int, optional=True,
                             rule=_at_least(0), metavar="N",
                             doc_more="an already listening socket (systemd socket "
                                      "activation)")
    http2: bool = _option(
        True, "binding", "serve HTTP/2 to clients that choose it (ALPN h2 over TLS, h2c)",
        negatable=True, limit=True, doc_default="on",
        doc_more="`--no-http2`: HTTP/1.1 only; see [HTTP/2](http2.md)")
    ssl_certfile: str | None = _option(
        None, "binding", "PEM certificate (chain): serve HTTPS", "be a path", kind=str,
        optional=True, metavar="FILE",
        doc_more="RSA or ECDSA (a build with the `builtin` TLS engine takes ECDSA P-256 "
                 "only, see [TLS](tls.md)); the files are checked at start-up")
    ssl_keyfile: str | None = _option(None, "binding", "PEM private key (RSA or ECDSA)",
                                      "be a path", kind=str, optional=True, metavar="FILE")
    ssl_ca: str | None = _option(None, "binding",
                                 "PEM CA: require client certificates signed by it",
                                 "be a path", kind=str, optional=True, metavar="FILE",
                                 doc_more="the app sees the certificate a client presented "
                                          "([TLS](tls.md)); an expired CA in the bundle is "
                                          "left out with a warning")
    ssl_ciphers: str | None = _option(
        None, "binding", "TLS 1.2 ciphers, an OpenSSL cipher list; the server's order wins",
        "be an OpenSSL cipher list", kind=str, optional=True,
        rule=_ciphers, metavar="LIST", doc_default="ECDHE with AEAD",
        doc_more="the default and TLS 1.3: [TLS](tls.md)")

    workers: int = _option(1, "processes", "worker processes", "be an int >= 1",
                           rule=_at_least(1), metavar="N",
                           doc_more="they share the listening socket")
    reuse_port: bool = _option(
        False, "processes", "each worker listens on a socket of its own with SO_REUSEPORT "
        "(the kernel spreads new connections by hash) instead of the supervisor's",
        negatable=True,
        doc_more="TCP only, with `--workers` 2 or more; a worker that stops drops the "
                 "connections still in its accept queue unless `net.ipv4.tcp_migrate_req` "
                 "is 1, see [Deployment](deployment.md#per-worker-sockets)")
    threads: int = _option(8, "processes", "WSGI app threads per process", "be an int >= 1",
                           rule=_at_least(1), metavar="N",
                           doc_more="per loop thread with `--loop-threads`")
    loop_threads: int = _option(
        1, "processes", "event-loop threads per worker process (free-threaded Python with "
        "the GIL off)", "be an int >= 1", rule=_at_least(1), metavar="N",
        doc_more="each with its own Manager, all accepting on the listening socket; "
                 "`--workers M` then runs M processes of N loops, see "
                 "[Free threading](free-threading.md)")
    graceful_timeout: float = _option(
        30.0, "processes", "seconds to finish in-flight requests on SIGTERM",
        "be a number of seconds >= 0", rule=_seconds_at_least(0), metavar="S",
        doc_more="a stopping server or worker then exits without them")
    drain_delay: float = _option(
        0.0, "processes", "seconds to keep serving after SIGTERM, with the health path "
        "answering 503, before the drain starts", "be a number of seconds >= 0",
        rule=_seconds_at_least(0), metavar="S",
        doc_more="so a load balancer takes the server out of rotation first; a second "
                 "signal stops at once; at most `--graceful-timeout`, see "
                 "[Deployment](deployment.md#rollouts-behind-a-load-balancer)")
    max_requests: int = _option(0, "processes",
                                "restart a worker after this many requests (0: never)",
                                "be an int >= 0 (0: no limit)", rule=_at_least(0), metavar="N")
    max_requests_jitter: int = _option(
        0, "processes", "add 0..N to --max-requests per worker, so they do not all restart "
        "at once", "be an int >= 0", rule=_at_least(0), metavar="N")
    reload: bool = _option(False, "processes", "restart when a file changes (development)",
                           negatable=True,
                           doc_more="one serving process, so not with `--workers` above 1 "
                                    "or `--max-requests`; needs `pip install "
                                    "'cymongoose[cli]'`")
    reload_dir: tuple[str, ...] = _option(
        (), "processes", "directory to watch (repeatable)",
        "be a directory", metavar="DIR", doc_default="the working directory",
        doc_more="a `.py` (or template, config) file changing there restarts the server")

    log_level: str = _option("info", "logging", "how much the cymongoose loggers say",
                             _LOG_LEVEL[1], rule=_LOG_LEVEL[0], metavar=_LOG_LEVEL[2])
    access_log: bool = _option(False, "logging",
                               "log every request on cymongoose.access", negatable=True,
                               doc_more="one line per request, see [Logging](#logging)")
    access_log_format: str | None = _option(
        None, "logging", "gunicorn-style atoms, e.g. '%(h)s \"%(r)s\" %(s)s %(M)sms', or 'json'",
        "be an access-log format", kind=str, optional=True, rule=_log_format,
        metavar="FORMAT", doc_default="the combined format")
    access_log_file: str | None = _option(None, "logging", "write the access log to this file",
                                          "be a path", kind=str, optional=True, metavar="FILE",
                                          doc_default="stdout")
    log_config: str | None = _option(
        None, "logging", "logging configuration: .json/.yaml (dictConfig) or .ini (fileConfig)",
        "be a path", kind=str, optional=True, metavar="FILE",
        doc_more="YAML needs `pip install 'cymongoose[cli]'`")

    proxy_headers: bool = _option(
        False, "proxies", "honour the trusted peers' X-Forwarded-For/-Proto (or "
        "Forwarded, see --proxy-headers-source)", negatable=True,
        doc_more="see [Proxy headers](#proxy-headers)")
    proxy_headers_source: str = _option(
        "x-forwarded", "proxies", "the headers the trusted proxy sets, the only ones believed: "
        "x-forwarded (X-Forwarded-For/-Proto) or forwarded (RFC 7239 Forwarded)",
        _PROXY_HEADERS_SOURCE[1], rule=_PROXY_HEADERS_SOURCE[0],
        metavar=_PROXY_HEADERS_SOURCE[2],
        doc_more="the other family is ignored, whatever a client puts in it")
    proxy_headers_host: bool = _option(
        False, "proxies", "the trusted proxy sets the Host header too: believe its "
        "X-Forwarded-Host (or Forwarded's host=)", negatable=True,
        doc_more="off, a client's own X-Forwarded-Host that the proxy passes on is ignored")
    forwarded_allow_ips: str = _option(
        "127.0.0.1", "proxies", "trusted proxies: IPs, CIDR networks or '*'",
        "be IP addresses, CIDR networks or '*', comma-separated", rule=_trusted, metavar="IPS")
    proxy: tuple[str, ...] = _option(
        (), "proxies", "answer PREFIX's requests from the upstream URL(s), balanced "
        "(repeatable); without APP the server is a pure reverse proxy",
        "be PREFIX=URL[,URL...], PREFIX starting with '/' and each URL http(s)://HOST[:PORT]"
        "[/PATH]", rule=_proxy_route, metavar="PREFIX=URL[,URL...]",
        doc_more="answered before the app, in C; see [Reverse proxy](proxy.md)")
    proxy_connect_timeout: float = _option(
        5.0, "proxies", "seconds to connect to an upstream (then the next one, or 504)",
        "be a number of seconds > 0", rule=lambda v: None if v > 0 else "", metavar="S")
    proxy_read_timeout: float = _option(
        60.0, "proxies", "seconds an upstream has for its response head, and between the "
        "reads of its body (then 504, or the response is cut)", "be a number of seconds > 0",
        rule=lambda v: None if v > 0 else "", metavar="S")
    proxy_lb: str = _option("round_robin", "proxies", "how a route picks among its upstreams",
                            _PROXY_LB[1], rule=_PROXY_LB[0], metavar=_PROXY_LB[2])
    proxy_pool_size: int = _option(
        64, "proxies", "connections per upstream and worker at most, kept alive and reused; "
        "more requests wait for one", "be an int >= 1", rule=_at_least(1), metavar="N")
    proxy_health_path: str | None = _option(
        None, "proxies", "probe each upstream with GET PATH every --proxy-health-interval; "
        "one that fails is out until it passes", "be a path starting with '/'", kind=str,
        optional=True, rule=lambda v: None if v.startswith("/") and " " not in v else "",
        metavar="PATH", doc_default="no active check (failed requests still count)")
    proxy_ca: str | None = _option(
        None, "proxies", "CA certificates (PEM) that https upstreams' certificates must chain "
        "to", "be a path", kind=str, optional=True, metavar="FILE",
        doc_default="the system's trust store")
    proxy_health_interval: float = _option(
        5.0, "proxies", "seconds between health probes of an upstream",
        "be a number of seconds > 0", rule=lambda v: None if v > 0 else "", metavar="S")

    metrics: bool = _option(
        False, "operations", "serve Prometheus metrics of all the workers at /metrics on "
        "--metrics-address:--metrics-port", negatable=True,
        doc_more="the supervisor serves them (also with one worker); see "
                 "[Operations](operations.md)")
    metrics_address: str = _option("127.0.0.1", "operations", "address of the metrics listener",
                                   metavar="HOST")
    metrics_port: int = _option(9090, "operations", "port of the metrics listener (0: any "
                                "free port, logged)", "be 0..65535", rule=_port,
                                metavar="PORT")
    limit_concurrency: int | None = _option(
        None, "operations", "requests in flight per worker at most: the next gets 503 with "
        "Retry-After at once", "be an int >= 1", kind=int, optional=True, rule=_at_least(1),
        metavar="N", doc_default="no limit",
        doc_more="idle keep-alive connections and WebSockets do not count")
    request_timeout: float | None = _option(
        None, "operations", "seconds an app has to start its response (then 504)",
        "be a number of seconds > 0", kind=float, optional=True,
        rule=lambda v: None if v > 0 else "", metavar="S", doc_default="no limit",
        doc_more="a WSGI app's thread is abandoned (and counted), an ASGI app's task "
                 "cancelled")
    workers_max_rss: int | None = _option(
        None, "operations", "replace a worker whose resident memory passes this many MiB",
        "be a number of MiB (an int >= 1)", kind=int, optional=True, rule=_at_least(1),
        metavar="MIB", doc_default="no limit",
        doc_more="its successor is ready before it drains, as on SIGHUP")
    server_header: bool = _option(
        True, "operations", "add `Server: cymongoose` to responses that have none",
        negatable=True, doc_more="`--no-server-header` leaves it out")
    health_path: str | None = _option(
        None, "operations", "answer GET PATH in the server: 200 once ready, 503 while "
        "starting or draining", "be a path starting with '/', without spaces, '?' or '#'", kind=str,
        optional=True, rule=_health_path, metavar="PATH",
        doc_more="e.g. `/healthz`, for a load balancer or Kubernetes probes; the port "
                 "then listens while the app loads, see [Operations](operations.md#health)")

    max_header_count: int | None = _limit("request header fields at most (431 past it)")
    max_header_size: int | None = _limit("bytes of a request head at most (431)")
    max_uri_size: int | None = _limit("bytes of a request target at most (414)")
    max_body_size: int | None = _limit("bytes of a request body at most (413; at most 1 GiB)")
    header_timeout_ms: int | None = _limit("to receive a whole request head (408)")
    body_timeout_ms: int | None = _limit("window in which a request body must progress (408)")
    keepalive_timeout_ms: int | None = _limit(
        "an idle keep-alive connection is closed after this")
    tls_handshake_timeout_ms: int | None = _limit("to finish the TLS handshake")
    send_timeout_ms: int | None = _limit(
        "window in which a client must take some of its response")
    linger_timeout_ms: int | None = _limit(
        "closing after a response or refusal: how long a quiet client is waited for "
        "(after a refusal, the most in all)")
    linger_time_ms: int | None = _limit(
        "closing after a response: how long the server reads and discards at most")

    worker_socket: int | None = _option(None, "hidden", "", "be a descriptor", kind=int,
                                        optional=True, hidden=True)
    worker_status: int | None = _option(None, "hidden", "", "be a descriptor", kind=int,
                                        optional=True, hidden=True)
    worker_metrics: int | None = _option(None, "hidden", "", "be a descriptor", kind=int,
                                         optional=True, hidden=True)

    # How each option arrived, for messages: "--threads", "CYMONGOOSE_THREADS='x'"; an
    # option missing here came as a keyword.
    origins: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        for setting in SETTINGS:
            label = self.origins.get(setting.name, setting.name)
            value = setting.check(getattr(self, setting.name), label, "=" not in label)
            object.__setattr__(self, setting.name, value)  # normalised: 5 -> 5.0
        self._check_together()

    def _label(self, name: str) -> str:
        """The option's name as it arrived, without a variable's value; one not given is
        named as the others were (its flag on a command line, else its keyword)."""
        if name in self.origins:
            return self.origins[name].partition("=")[0]
        return "--" + name.replace("_", "-") if self.origins else name

    def _check_together(self) -> None:
        """The rules that concern two options."""
        if self.uds and self.fd is not None:
            raise ConfigError(f"give either {self._label('uds')} or {self._label('fd')}, "
                              "not both")
        if bool(self.ssl_certfile) != bool(self.ssl_keyfile):
            raise ConfigError(f"HTTPS needs both {self._label('ssl_certfile')} and "
                              f"{self._label('ssl_keyfile')}")
        if self.ssl_ciphers and not self.ssl_certfile:
            raise ConfigError(f"{self._label('ssl_ciphers')} needs "
                              f"{self._label('ssl_certfile')}")
        if self.reload and self.supervised:
            # The reloader serves from one child it restarts on changes; workers are another
            # process model, so both at once would silently drop one.
            given = (f"{self._label('workers')} {self.workers}" if self.workers > 1 else
                     next(self._label(name) for name in ("max_requests", "metrics",
                                                          "workers_max_rss")
                          if getattr(self, name)))
            raise ConfigError(f"{self._label('reload')} serves from one process: drop "
                              f"{given} or {self._label('reload')}")
        if self.reuse_port and (self.uds or self.fd is not None or self.workers < 2):
            # One socket per worker is a TCP group of two or more; a Unix socket or an
            # inherited one cannot be bound again per worker.
            raise ConfigError(f"{self._label('reuse_port')} needs TCP and "
                              f"{self._label('workers')} 2 or more")
        if self.drain_delay > self.graceful_timeout:
            # A delay lets the balancer's checks see the 503: a few check intervals. One
            # longer than the longest request may take is most likely milliseconds given
            # as seconds, and would hold a rollout for that long.
            raise ConfigError(f"{self._label('drain_delay')} must be at most "
                              f"{self._label('graceful_timeout')} ({self.graceful_timeout:g} "
                              f"s), not {self.drain_delay:g}")
        if self.loop_threads > 1:
            reason = _gil_reason()
            if reason:
                raise ConfigError(f"{self._label('loop_threads')} {self.loop_threads} runs "
                                  f"event loops in parallel threads, {reason}")
            if not self.app:
                raise ConfigError(f"{self._label('loop_threads')} serves an app; "
                                  f"{self._label('proxy')} alone runs on one loop")
        for name in ("metrics_address", "metrics_port"):
            if name in self.origins and not self.metrics:
                raise ConfigError(f"{self._label(name)} needs {self._label('metrics')}")
        if "proxy_headers_source" in self.origins and not self.proxy_headers:
            raise ConfigError(f"{self._label('proxy_headers_source')} needs "
                              f"{self._label('proxy_headers')}")
        if self.proxy_headers_host and not self.proxy_headers:
            raise ConfigError(f"{self._label('proxy_headers_host')} needs "
                              f"{self._label('proxy_headers')}")
        for name in ("proxy_connect_timeout", "proxy_read_timeout", "proxy_lb",
                     "proxy_pool_size", "proxy_health_path", "proxy_health_interval",
                     "proxy_ca"):
            if name in self.origins and not self.proxy:
                raise ConfigError(f"{self._label(name)} needs {self._label('proxy')}")

    @property
    def supervised(self) -> bool:
        """Whether the command line runs a supervisor: more than one worker, or an option
        only a supervisor carries out (recycling, metrics over every worker)."""
        return (self.workers > 1 or bool(self.max_requests) or self.metrics
                or self.workers_max_rss is not None)

    @classmethod
    def from_command_line(cls, flags: Mapping[str, Any],
                          environ: Mapping[str, str] | None = None) -> Config:
        """The options given as `flags` (the parser's values by name: strings, or booleans
        for on/off flags and lists for repeatable ones), then the CYMONGOOSE_* variables of
        `environ` for the rest: the command line wins."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        origins: dict[str, str] = {}
        for s in SETTINGS:
            if s.name in flags and flags[s.name] is not None:
                raw, label = flags[s.name], s.flag
            elif not s.hidden and s.variable in environ:
                raw = environ[s.variable]
                label = f"{s.variable}={raw!r}"
            else:
                continue
            origins[s.name] = label
            values[s.name] = s.from_text(raw, label) if isinstance(raw, str) else raw
        return cls(origins=origins, **values)

    @classmethod
    def for_server(cls, config: Config | None, **given: Any) -> Config:
        """`config` (or the defaults) with the options a server's keywords gave (None: not
        given), each checked by its rule and named by its keyword."""
        base = config if config is not None else cls()
        if not isinstance(base, Config):
            raise TypeError(f"config must be a Config or None, not {type(base).__name__}")
        given = {k: v for k, v in given.items() if v is not None}
        if not given:
            return base
        origins = {k: v for k, v in base.origins.items() if k not in given}
        return dataclasses.replace(base, origins=origins, **given)

    def limits(self) -> dict[str, Any]:
        """The HTTP limits set here, as `listen()`'s keywords (the rest: the core's)."""
        return {s.name: getattr(self, s.name) for s in SETTINGS
                if s.limit and getattr(self, s.name) is not None}

    def static_mounts(self) -> list[tuple[str, str]]:
        """`static` as (URL prefix, absolute directory) pairs."""
        from .static_files import parse_mount

        return [parse_mount(spec) for spec in self.static]

    def new_access_log(self) -> AccessLog | None:
        """The AccessLog `access_log` asks for (also with a logging configuration, which may
        route cymongoose.access somewhere), or None."""
        if not (self.access_log or self.log_config):
            return None
        from .access_log import AccessLog

        fmt = self.access_log_format
        return AccessLog(None if fmt == "json" else fmt, as_json=fmt == "json")

    def new_proxy_headers(self) -> ProxyHeaders | None:
        """The trusted proxies when `proxy_headers` is on, else None."""
        if not self.proxy_headers:
            return None
        from .proxy_headers import ProxyHeaders

        return ProxyHeaders(self.forwarded_allow_ips, source=self.proxy_headers_source,
                            host=self.proxy_headers_host)

    def new_reverse_proxy(self) -> ReverseProxy | None:
        """The reverse proxy of the `proxy` routes (hosts resolved now), or None."""
        if not self.proxy:
            return None
        from .proxy import ReverseProxy

        try:
            return ReverseProxy(
                self.proxy, connect_timeout=self.proxy_connect_timeout,
                read_timeout=self.proxy_read_timeout, lb=self.proxy_lb,
                pool_size=self.proxy_pool_size, health_path=self.proxy_health_path,
                health_interval=self.proxy_health_interval, ca=self.proxy_ca,
                forwarded_allow_ips=self.forwarded_allow_ips)
        except ValueError as exc:
            raise ConfigError(f"{self._label('proxy')}: {exc}") from None

    def new_tls(self) -> TlsOpts | None:
        """The TLS settings, every file read and checked now (a key that does not match the
        certificate, an encrypted key, an expired certificate), so a bad file stops the
        server at start-up instead of failing each handshake. None without a certificate."""
        if not self.ssl_certfile:
            return None
        from ._mongoose import TlsOpts

        try:
            return TlsOpts.from_files(cert=self.ssl_certfile, key=self.ssl_keyfile,
                                      ca=self.ssl_ca, ciphers=self.ssl_ciphers)
        except OSError as exc:
            raise ConfigError(f"TLS: cannot read {exc.filename} ({exc.strerror})") from None
        except ValueError as exc:
            raise ConfigError(f"TLS: {exc}") from None


def _gil_reason() -> str:
    """Why this interpreter cannot run loops in parallel threads ("" when it can)."""
    import sysconfig

    from . import _mongoose  # noqa: F401  (the GIL's state is final once the core is loaded)

    is_gil_enabled = getattr(sys, "_is_gil_enabled", None)
    if is_gil_enabled is None or not sysconfig.get_config_var("Py_GIL_DISABLED"):
        return ("which needs a free-threaded Python (python3.13t or later) with the GIL "
                "off; this one has a GIL: use --workers for more processes")
    if is_gil_enabled():
        return ("which needs the GIL off; this free-threaded Python runs with it on (set "
                "PYTHON_GIL=0 or run python -X gil=0)")
    return ""


def _settings() -> Iterator[Setting]:
    for f in dataclasses.fields(Config):
        setting = f.metadata.get("setting")
        if setting is not None:
            yield dataclasses.replace(setting, name=f.name)


#: The table: one Setting per option, in the order of --help and the docs.
SETTINGS: tuple[Setting, ...] = tuple(_settings())


def renamed(where: str, old: str, old_value: Any, new: str, new_value: Any,
            why: str = "") -> Any:
    """An old keyword that means the same as a new one: a DeprecationWarning (at the
    caller's caller) when it is given, and the value to use (the new name's, if both are)."""
    if old_value is None:
        return new_value
    warnings.warn(f"{where}({old}=...) is deprecated: pass {new}= instead{why}",
                  DeprecationWarning, stacklevel=3)
    return new_value if new_value is not None else old_value


def markdown_table() -> str:
    """The options table of docs/deployment.md (a test checks that the page has it)."""
    lines = ["| Option | Variable | Default | Meaning |", "|---|---|---|---|"]
    for s in SETTINGS:
        if s.hidden:
            continue
        flag = s.flag if s.positional or s.kind is bool else f"{s.flag} {s.metavar_text}"
        meaning = s.help
        if s.doc_more:
            meaning += f"; {s.doc_more}"
        default = s.default_text()
        lines.append(f"| `{flag}` | `{s.variable}` | {default} | "
                     f"{meaning.replace('|', chr(92) + '|')} |")
    return "\n".join(lines) + "\n"


def _main(argv: Sequence[str]) -> int:
    if list(argv) != ["--markdown"]:
        print("usage: python -m cymongoose.config --markdown", file=sys.stderr)
        return 2
    sys.stdout.write(markdown_table())
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
