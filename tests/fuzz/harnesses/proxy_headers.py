"""The proxy-header resolver (X-Forwarded-For/-Proto/-Host, or Forwarded, RFC 7239) with
arbitrary values from a trusted or untrusted peer. Never an exception; an untrusted peer
changes nothing; only the family the resolver's source names is read, and the proxy's host
only when the resolver believes it (host=True); the client it names
is an address (no IPv6 zone) that appears at or right of the nearest hop no trusted proxy
vouches for (a client cannot forge past a trusted proxy); the port, scheme and host are
each valid or None."""

from __future__ import annotations

import ipaddress

from cymongoose.proxy_headers import ProxiedRequest, ProxyHeaders, parse_forwarded

from ..wire import fields

TRUSTS = [ProxyHeaders("127.0.0.1", host=True), ProxyHeaders("10.0.0.0/8, ::1", host=True),
          ProxyHeaders("*", host=True), ProxyHeaders("127.0.0.1, ::1", source="forwarded"),
          ProxyHeaders("*"), ProxyHeaders("*", source="forwarded", host=True)]
PEERS = ["127.0.0.1", "10.1.2.3", "::1", "192.0.2.7", None]
SEEDS = [
    b"\x00\x001.2.3.4, 10.0.0.1\x00https\x00example.com",
    b"\x01\x01[2001:db8::1]:8080, 10.9.9.9:1\x00http, https\x00a, b",
    b"\x03\x00\x00\x00\x00for=192.0.2.60;proto=http;by=203.0.113.43, for=\"[::1]:80\"",
    b"\x00\x031.2.3.4:\xb2\x00\x00",
]
SCHEMES = {"http", "https", "ws", "wss"}


def _hosts(value: str) -> list[str]:
    return [h.strip() for h in value.split(",")]


def one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    trust = TRUSTS[data[0] % len(TRUSTS)]
    peer = PEERS[data[1] % len(PEERS)]
    xff, proto, host, fwd = (f.decode("latin-1") or None for f in fields(data[2:], 4))
    got = trust.resolve(peer, forwarded=fwd, x_forwarded_for=xff, x_forwarded_proto=proto,
                        x_forwarded_host=host)
    assert isinstance(got, ProxiedRequest)
    if not trust.is_trusted(peer):
        assert got == ProxiedRequest(), got
        return
    forwarded = trust.source == "forwarded"
    if not trust.host:
        assert got.host is None, got  # the proxy's Host: only when believed
        host = None
    if not (fwd if forwarded else (xff or proto or host)):
        assert got == ProxiedRequest(), got  # the other family alone says nothing
    if got.client_host is not None:
        ipaddress.ip_address(got.client_host)
        assert "%" not in got.client_host, got
        if forwarded:
            nodes = [e.get("for", "") for e in parse_forwarded(fwd)]
        else:
            nodes = _hosts(xff or "")
        assert any(got.client_host in node for node in nodes), (got, nodes)
        # Right of the chosen hop, every hop is a trusted proxy.
        chosen = max(i for i, node in enumerate(nodes) if got.client_host in node)
        for node in nodes[chosen + 1:]:
            bare = node.strip()
            if bare.startswith("[") and "]" in bare:
                bare = bare[1:bare.index("]")]
            elif bare.count(":") == 1:
                bare = bare.partition(":")[0]
            assert trust.is_trusted(bare), (got, nodes)
    assert got.client_port is None or 0 <= got.client_port < 65536
    assert got.scheme is None or got.scheme in SCHEMES
    assert got.host is None or (got.host.isprintable() and " " not in got.host), got.host
