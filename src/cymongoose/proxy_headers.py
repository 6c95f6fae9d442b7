"""Trusted proxy headers: who the client is and which scheme and host it used, as told by the
proxies in front of the server, believed only from the addresses an operator trusts.

Shared by the WSGI and ASGI servers: `ProxyHeaders.resolve()` takes the peer's address and
the raw header values, and returns what the app should see; each server writes the result into
its own environ or scope.

One family of headers is the source of truth, never both: the one the trusted proxy sets
(`source`). A proxy passes on the headers it does not set as the client sent them (nginx
passes a client's `Forwarded` unchanged), so reading both, or letting one win when present,
lets a client speak through the proxy. The default is `X-Forwarded-For` and
`X-Forwarded-Proto`, what nginx and HAProxy recipes set and what uvicorn and gunicorn read.
`Forwarded` (RFC 7239) is read instead, and the X- family ignored, only when the operator says
the proxy sets it (`source="forwarded"`).

The Host the proxy reports (`X-Forwarded-Host`, or `host=` of `Forwarded`) is believed only
when the operator says the proxy sets it (`host=True`): the usual nginx block sets For and
Proto and passes a client's `X-Forwarded-Host` on untouched, which would let any client pick
the Host the app sees. uvicorn and gunicorn never read it; Django (USE_X_FORWARDED_HOST) and
Werkzeug's ProxyFix (x_host) leave it off by default. One rule for both families keeps the
option's meaning simple.

How a chain is read: every proxy appends the address it received the request from, so the
list reads client first, nearest proxy last. The entries are walked from the right; each one
that is a trusted proxy is skipped, and the first that is not is the client. A forged entry a
client puts at the front is therefore never chosen while a trusted proxy stands between.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["ProxyHeaders", "ProxiedRequest", "SOURCES", "parse_forwarded"]

# The header families a trusted proxy may be said to set (the --proxy-headers-source values).
SOURCES = ("x-forwarded", "forwarded")
# What resolve() reads of each, as keyword -> header name: [x-forwarded, forwarded], then
# the same with the proxy's Host believed (host=True).
_HEADERS = (("x-forwarded-for", "x-forwarded-proto"), ("forwarded",),
            ("x-forwarded-for", "x-forwarded-proto", "x-forwarded-host"), ("forwarded",))
_SCHEMES = frozenset(("http", "https", "ws", "wss"))
_IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class ProxiedRequest:
    """What the proxies said; None where they said nothing usable (keep the socket's view)."""

    client_host: str | None = None
    client_port: int | None = None
    scheme: str | None = None
    host: str | None = None


_NOTHING = ProxiedRequest()


class ProxyHeaders:
    """Which peers may speak for a client: `trusted` lists IP addresses, CIDR networks and
    `"*"` (any peer), as a comma-separated string or an iterable. Connections over a Unix
    socket (peer None) come from the local machine and are always trusted. `source` names the
    headers the proxy sets; `host=True` says it sets the Host one too (`X-Forwarded-Host`, or
    `host=` of `Forwarded`), which is otherwise ignored."""

    __slots__ = ("_any", "_networks", "_cache", "_forwarded", "_host")

    def __init__(self, trusted: str | Iterable[str] = "127.0.0.1", *,
                 source: str = "x-forwarded", host: bool = False) -> None:
        if source not in SOURCES:
            raise ValueError(f"proxy-headers-source: {source!r} is not one of "
                             f"{', '.join(SOURCES)}")
        if not isinstance(host, bool):
            raise TypeError(f"proxy-headers-host: {host!r} is not True or False")
        self._forwarded = source == "forwarded"
        self._host = host
        items = trusted.split(",") if isinstance(trusted, str) else list(trusted)
        self._any = False
        self._networks: list[_IPNetwork] = []
        for raw in items:
            item = raw.strip()
            if not item:
                continue
            if item == "*":
                self._any = True
                continue
            try:
                self._networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                raise ValueError(
                    f"forwarded-allow-ips: {item!r} is not an IP address, a CIDR network "
                    "or '*'") from None
        self._cache: dict[str, bool] = {}

    @property
    def source(self) -> str:
        """The headers believed: `"x-forwarded"` or `"forwarded"`."""
        return "forwarded" if self._forwarded else "x-forwarded"

    @property
    def host(self) -> bool:
        """Whether the Host the proxy reports replaces the request's."""
        return self._host

    @property
    def header_names(self) -> tuple[str, ...]:
        """The request headers `resolve()` reads (lower-case), by its keyword's name."""
        return _HEADERS[self._forwarded + 2 * self._host]

    @property
    def any_peer(self) -> bool:
        """Whether every peer is trusted ("*")."""
        return self._any

    @property
    def networks(self) -> tuple[_IPNetwork, ...]:
        """The trusted networks (an address is a /32 or /128 one)."""
        return tuple(self._networks)

    def is_trusted(self, peer: str | None) -> bool:
        """True when `peer` (an IP address; None for a Unix socket) is a trusted proxy."""
        if peer is None or self._any:
            return True
        known = self._cache.get(peer)
        if known is not None:
            return known
        try:
            addr = ipaddress.ip_address(peer.strip("[]"))
        except ValueError:
            return False  # "unknown", an obfuscated name: never a trusted proxy
        if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
            addr = addr.ipv4_mapped
        trusted = any(addr in net for net in self._networks)
        if len(self._cache) < 4096:  # bounded: peers are few, clients are many
            self._cache[peer] = trusted
        return trusted

    def resolve(self, peer: str | None, *, forwarded: str | None = None,
                x_forwarded_for: str | None = None, x_forwarded_proto: str | None = None,
                x_forwarded_host: str | None = None) -> ProxiedRequest:
        """The client, scheme and host the trusted proxies report for a request that came
        from `peer`; header arguments are the raw field values (repeated fields joined with
        ", "), None when absent. An untrusted peer's headers are ignored entirely, and so
        are those of the family that is not the `source`, and X-Forwarded-Host unless
        `host`."""
        if not self.is_trusted(peer):
            return _NOTHING
        if self._forwarded:
            return self._from_forwarded(forwarded) if forwarded else _NOTHING
        if not self._host:
            x_forwarded_host = None
        if not (x_forwarded_for or x_forwarded_proto or x_forwarded_host):
            return _NOTHING
        index = -1
        host: str | None = None
        port: int | None = None
        hops = [h.strip() for h in x_forwarded_for.split(",")] if x_forwarded_for else []
        if hops:
            index = self._client_index(hops)
            host, port = _split_node(hops[index])
        protos = [p.strip().lower() for p in x_forwarded_proto.split(",")] \
            if x_forwarded_proto else []
        scheme = _pick(protos, index, len(hops))
        hosts = [h.strip() for h in x_forwarded_host.split(",")] if x_forwarded_host else []
        fwd_host = _pick(hosts, index, len(hops))
        return ProxiedRequest(host, port, scheme if scheme in _SCHEMES else None,
                              fwd_host if fwd_host and _is_host(fwd_host) else None)

    def _client_index(self, hops: list[str]) -> int:
        for i in range(len(hops) - 1, 0, -1):
            if not self.is_trusted(_split_node(hops[i])[0] or hops[i]):
                return i
        return 0  # every hop after the first is trusted: the first is the client

    def _from_forwarded(self, value: str) -> ProxiedRequest:
        elements = parse_forwarded(value)
        if not elements:
            return _NOTHING
        index = len(elements) - 1
        for i in range(len(elements) - 1, -1, -1):
            index = i
            node = elements[i].get("for")
            if i == 0 or node is None or not self.is_trusted(_split_node(node)[0] or node):
                break
        element = elements[index]
        host, port = _split_node(element["for"]) if "for" in element else (None, None)
        scheme = element.get("proto", "").lower()
        fwd_host = element.get("host") if self._host else None
        return ProxiedRequest(host, port, scheme if scheme in _SCHEMES else None,
                              fwd_host if fwd_host and _is_host(fwd_host) else None)


def parse_forwarded(value: str) -> list[dict[str, str]]:
    """The elements of a `Forwarded` field value (RFC 7239 §4), each as lower-cased
    parameter names to values, quotes removed. A malformed element is left out."""
    elements: list[dict[str, str]] = []
    for element in _split_quoted(value, ","):
        params: dict[str, str] = {}
        ok = True
        for pair in _split_quoted(element, ";"):
            name, sep, val = pair.strip().partition("=")
            name = name.strip().lower()
            val = val.strip()
            if not sep or not name:
                ok = ok and not pair.strip()
                continue
            if len(val) >= 2 and val[0] == '"' and val[-1] == '"':
                val = val[1:-1].replace('\\"', '"').replace("\\\\", "\\")
            params[name] = val
        if ok and params:
            elements.append(params)
    return elements


def _split_quoted(text: str, sep: str) -> list[str]:
    out: list[str] = []
    start = 0
    quoted = False
    escaped = False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\" and quoted:
            escaped = True
        elif ch == '"':
            quoted = not quoted
        elif ch == sep and not quoted:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return [part for part in out if part.strip()]


def _split_node(node: str) -> tuple[str | None, int | None]:
    """`1.2.3.4`, `1.2.3.4:80`, `[2001:db8::1]:80`, `2001:db8::1` -> (address, port)."""
    node = node.strip()
    if node.startswith("["):
        end = node.find("]")
        if end < 0:
            return None, None
        host, rest = node[1:end], node[end + 1:]
        port = rest[1:] if rest.startswith(":") else ""
    elif node.count(":") == 1:
        host, _, port = node.partition(":")
    else:
        host, port = node, ""
    if "%" in host:
        # An IPv6 zone ("fe80::1%eth0") names an interface of the proxy's host, nothing the
        # app can use, and ip_address() takes any text after the "%", quotes and line ends
        # included: not an address to report.
        return None, None
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return None, None  # "unknown" or an obfuscated identifier: no address to report
    # ASCII digits only, at most five: str.isdigit() also takes "²" (latin-1, so a header can
    # carry it) and int() refuses it, or thousands of digits (found by fuzzing).
    if len(port) <= 5 and port.isascii() and port.isdigit() and int(port) < 65536:
        return host, int(port)
    return host, None


def _pick(values: list[str], index: int, hops: int) -> str | None:
    """The entry of a list header that belongs to the chosen hop: the same position when the
    list is as long as X-Forwarded-For, else the one the nearest proxy set (the last)."""
    if not values:
        return None
    if len(values) == hops and index >= 0:
        return values[index]
    return values[-1]


def _is_host(host: str) -> bool:
    return 0 < len(host) <= 255 and all(33 <= ord(ch) < 127 and ch not in '"\\/?#@'
                                        for ch in host)
