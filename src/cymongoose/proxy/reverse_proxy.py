"""`ReverseProxy`: the Python face of the core's reverse proxy.

It checks and resolves the routes once, builds the core's `ProxyTable` and attaches it to a
Manager (a raw handler's, `WSGIServer.manager`, `ASGIServer.manager`); from then on the core
answers the routes' requests before any handler sees them, moving bytes between the client
and a pooled upstream connection in C. Python runs per request only for the optional routing
hook and the access log.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..proxy_headers import ProxyHeaders
from .health import HealthChecker
from .resolver import Reresolver
from .upstreams import Upstream, parse_route, parse_upstream, resolve

if TYPE_CHECKING:
    from .._mongoose import Manager

__all__ = ["ReverseProxy", "RouteHook", "LB_POLICIES"]

#: route(method, path, headers) -> an upstream URL of this proxy, or None for the app
RouteHook = Callable[[str, str, list[tuple[str, str]]], "str | None"]

LB_POLICIES = ("round_robin", "least_conn")


class ReverseProxy:
    """Routes path prefixes to upstream HTTP servers.

    `routes` maps a prefix to one upstream URL or several (balanced by `lb`: round_robin or
    least_conn), or is a sequence of `PREFIX=URL[,URL...]` strings as the command line
    takes them. Every URL is checked and its host resolved now (ValueError). `route`, when
    given, is asked for every request with (method, path, headers) and answers an upstream
    URL of this proxy (one of the routes', or of `upstreams`) or None to leave the request
    to the app. `max_fails` failures in a row mark an upstream down for `fail_timeout`
    seconds: it is held out only while its route has another upstream not marked (a
    route's only upstream is tried by every request). With `health_path`, each upstream
    gets `GET health_path` every `health_interval` seconds and is out of every route while
    it fails. An https upstream's
    certificate is verified against `ca` (a PEM file; default: the system's trust store)
    and its host name, which is also sent as SNI; `tls_verify=False` turns both checks off.
    Upstream names are resolved again every `resolve_interval` seconds (0: never), off the
    loop.
    """

    def __init__(self, routes: Mapping[str, str | Sequence[str]] | Iterable[str] = (), *,
                 upstreams: Iterable[str] = (), connect_timeout: float = 5.0,
                 read_timeout: float = 60.0, lb: str = "round_robin", pool_size: int = 64,
                 idle_timeout: float = 4.0, max_fails: int = 3, fail_timeout: float = 10.0,
                 max_response_head: int = 65536, via: bool = False,
                 health_path: str | None = None, health_interval: float = 5.0,
                 ca: str | None = None, tls_verify: bool = True,
                 resolve_interval: float = 30.0,
                 forwarded_allow_ips: str | Iterable[str] = "127.0.0.1",
                 route: RouteHook | None = None) -> None:
        mounts = _mount_list(routes)
        if lb not in LB_POLICIES:
            raise ValueError(f"lb must be one of {', '.join(LB_POLICIES)}, not {lb!r}")
        for name, value in (("connect_timeout", connect_timeout),
                            ("read_timeout", read_timeout), ("idle_timeout", idle_timeout),
                            ("fail_timeout", fail_timeout)):
            if not value > 0:
                raise ValueError(f"{name} must be a number of seconds > 0, not {value!r}")
        if pool_size < 1:
            raise ValueError(f"pool_size must be an int >= 1, not {pool_size!r}")
        if health_path is not None and (not health_path.startswith("/")
                                        or any(ch in health_path for ch in " \t\r\n")):
            raise ValueError(f"health_path must be a path starting with '/', not "
                             f"{health_path!r}")
        if not health_interval > 0:
            raise ValueError(f"health_interval must be a number of seconds > 0, not "
                             f"{health_interval!r}")
        if resolve_interval < 0:
            raise ValueError(f"resolve_interval must be a number of seconds >= 0, not "
                             f"{resolve_interval!r}")
        if max_fails < 0:
            raise ValueError(f"max_fails must be an int >= 0, not {max_fails!r}")
        if route is not None and not callable(route):
            raise TypeError("route must be a callable route(method, path, headers) or None")
        if not mounts and route is None:
            raise ValueError("a ReverseProxy needs routes, or a route hook and upstreams")
        known: dict[str, int] = {}
        ordered: list[Upstream] = []

        def index(upstream: Upstream) -> int:
            if upstream.label not in known:
                known[upstream.label] = len(ordered)
                ordered.append(upstream)
            return known[upstream.label]

        table_mounts = [(prefix, [index(u) for u in members]) for prefix, members in mounts]
        for url in upstreams:
            index(parse_upstream(url))
        if not ordered:
            raise ValueError("a ReverseProxy needs at least one upstream URL")
        trusted = ProxyHeaders(forwarded_allow_ips)
        nets = []
        for net in trusted.networks:
            nets.append((net.version, net.network_address.packed, net.prefixlen))
            if isinstance(net, ipaddress.IPv4Network):
                # An IPv4 client of a dual-stack listener arrives as ::ffff:a.b.c.d.
                mapped = ipaddress.IPv6Network(
                    f"::ffff:{net.network_address}/{96 + net.prefixlen}")
                nets.append((6, mapped.network_address.packed, mapped.prefixlen))
        entries = []
        for u in ordered:
            try:
                target = resolve(u)
            except OSError as exc:
                raise ValueError(f"upstream {u.label}: cannot resolve {u.host!r} "
                                 f"({exc.strerror or exc})") from None
            entries.append((u.label, target, u.authority, u.path))
        from .._mongoose import ProxyTable

        tls = {i: _client_tls(u, ca, tls_verify) for i, u in enumerate(ordered) if u.tls}
        self._upstreams = tuple(ordered)
        self._table = ProxyTable(
            entries, table_mounts, lb=LB_POLICIES.index(lb), pool_size=pool_size,
            connect_timeout=connect_timeout, read_timeout=read_timeout,
            idle_timeout=idle_timeout, max_fails=max_fails, fail_timeout=fail_timeout,
            max_head=max_response_head, via=via, trusted=nets, trust_any=trusted.any_peer,
            route=route, tls=tls)
        self._manager: Manager | None = None
        self._health_path = health_path
        self._health_interval = health_interval
        self._health_timeout = min(connect_timeout + read_timeout, health_interval)
        self._probe_targets = [(i, target, label, authority, tls.get(i))
                               for i, (label, target, authority, _) in enumerate(entries)]
        self._checker: HealthChecker | None = None
        self._named = [(i, u, entries[i][1]) for i, u in enumerate(ordered) if not _is_ip(u.host)]
        self._resolve_interval = resolve_interval
        self._resolver: Reresolver | None = None

    @property
    def upstreams(self) -> tuple[str, ...]:
        """The upstream URLs, in the order stats() lists them."""
        return tuple(u.label for u in self._upstreams)

    def attach(self, manager: Manager) -> None:
        """Answer this proxy's routes on `manager`'s HTTP listeners, before its handler (or
        the WSGI/ASGI app). One Manager per ReverseProxy: its pools belong to that loop."""
        manager.proxy = self._table
        self._manager = manager
        if self._named and self._resolve_interval > 0:
            self._resolver = Reresolver(manager, self._named, self._table.set_address,
                                        self._resolve_interval)
        if self._health_path is not None:
            self._checker = HealthChecker(manager, self._probe_targets, self._health_path,
                                          self._health_interval, self._health_timeout,
                                          self._table.set_probe_result)

    def detach(self) -> None:
        """Stop answering the routes; requests in flight finish."""
        if self._checker is not None:
            self._checker.stop()
            self._checker = None
        if self._resolver is not None:
            self._resolver.stop()
            self._resolver = None
        if self._manager is not None:
            self._manager.proxy = None
            self._manager = None

    def stats(self) -> list[dict[str, Any]]:
        """Per upstream: open, busy, idle and waiting connections, connections opened and
        requests sent since start, consecutive failures, and whether it is up."""
        result: list[dict[str, Any]] = self._table.stats()
        return result


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _client_tls(upstream: Upstream, ca: str | None, verify: bool) -> Any:
    """The TlsOpts of an https upstream: its CA (the given file, else the system's trust
    store), its host name as SNI and as the name its certificate must carry."""
    import ssl

    from .._mongoose import TlsOpts

    if verify and ca is None:
        paths = ssl.get_default_verify_paths()
        ca = paths.cafile or paths.openssl_cafile
    pem = b""
    if verify:
        try:
            with open(str(ca), "rb") as f:
                pem = f.read()
        except OSError as exc:
            raise ValueError(f"upstream {upstream.label}: cannot read the CA file {ca} "
                             f"({exc.strerror})") from None
    try:
        return TlsOpts(ca=pem or None, name=upstream.host, skip_verification=not verify)
    except ValueError as exc:
        raise ValueError(f"upstream {upstream.label}: {exc}") from None


def _mount_list(routes: Mapping[str, str | Sequence[str]] | Iterable[str],
                ) -> list[tuple[str, list[Upstream]]]:
    mounts: list[tuple[str, list[Upstream]]] = []
    if isinstance(routes, Mapping):
        for prefix, urls in routes.items():
            spec = urls if isinstance(urls, str) else ",".join(urls)
            mounts.append(parse_route(f"{prefix}={spec}"))
    else:
        if isinstance(routes, str):
            raise TypeError("routes is a mapping or a sequence of PREFIX=URL strings")
        mounts = [parse_route(spec) for spec in routes]
    prefixes = [prefix for prefix, _ in mounts]
    for prefix in prefixes:
        if prefixes.count(prefix) > 1:
            raise ValueError(f"prefix {prefix!r} is routed twice")
    return mounts
