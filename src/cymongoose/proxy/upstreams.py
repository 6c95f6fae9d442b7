"""Upstream URLs and mounts of the reverse proxy: parsed, checked and resolved once, at start.

An upstream is `http://host[:port][/path]`, or `https://...` (TLS, verified). Its host is
resolved here through the system resolver (`getaddrinfo`: /etc/hosts, a container's or a
cluster's service names), never by Mongoose's own DNS client, and never by the loop:
start-up is the one moment that may wait. A path replaces the mount's prefix in the request
target (nginx's `proxy_pass` with a URI).
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["Upstream", "parse_upstream", "parse_route", "check_route", "resolve"]


@dataclass(frozen=True)
class Upstream:
    """One upstream as configured (`label`) and as the core connects to it."""

    label: str
    host: str
    port: int
    path: str  # "" or "/x/y", without a trailing '/'
    tls: bool = False

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == (443 if self.tls else 80) else f"{host}:{self.port}"


def parse_upstream(url: str) -> Upstream:
    """An upstream from its URL; ValueError saying what is wrong."""
    text = url.strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"upstream {url!r}: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"upstream {url!r} must start with http:// or https://")
    if not parts.hostname:
        raise ValueError(f"upstream {url!r} has no host")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"upstream {url!r}: credentials in the URL are not supported")
    if parts.query or parts.fragment:
        raise ValueError(f"upstream {url!r}: a query or fragment is not allowed")
    path = parts.path.rstrip("/")
    if any(ch in path for ch in " \t\r\n"):
        raise ValueError(f"upstream {url!r}: the path has whitespace")
    tls = parts.scheme == "https"
    return Upstream(label=text, host=parts.hostname, port=port or (443 if tls else 80),
                    path=path, tls=tls)


def check_route(spec: str) -> str | None:
    """The rule of `--proxy`: None when `spec` is PREFIX=URL[,URL...], else why not."""
    try:
        parse_route(spec)
    except ValueError as exc:
        return str(exc)
    return None


def parse_route(spec: str) -> tuple[str, list[Upstream]]:
    """`PREFIX=URL[,URL...]` as (prefix, upstreams)."""
    prefix, sep, urls = spec.partition("=")
    prefix = prefix.strip()
    if not sep or not prefix.startswith("/"):
        raise ValueError(f"{spec!r} is not PREFIX=URL[,URL...] with PREFIX starting with '/'")
    if any(ch in prefix for ch in " \t?#"):
        raise ValueError(f"prefix {prefix!r} may not hold spaces, '?' or '#'")
    upstreams = [parse_upstream(u) for u in urls.split(",") if u.strip()]
    if not upstreams:
        raise ValueError(f"{spec!r} names no upstream URL")
    return prefix, upstreams


def resolve(upstream: Upstream) -> str:
    """Where the core connects: `tcp://ADDRESS:PORT`, the first address the system resolver
    gives (IPv4 first, as curl and nginx try it). OSError when the name does not resolve."""
    try:
        ip = ipaddress.ip_address(upstream.host)
        address = str(ip)
    except ValueError:
        infos = socket.getaddrinfo(upstream.host, upstream.port, type=socket.SOCK_STREAM)
        infos.sort(key=lambda info: info[0] != socket.AF_INET)
        address = str(infos[0][4][0])
    host = f"[{address}]" if ":" in address else address
    return f"tcp://{host}:{upstream.port}"
