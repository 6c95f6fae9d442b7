"""proxy_headers.ProxyHeaders: who may speak for a client, and what a chain of proxies says
(X-Forwarded-* and RFC 7239 Forwarded), the way both app servers use it."""

from __future__ import annotations

import pytest

from cymongoose.proxy_headers import ProxiedRequest, ProxyHeaders, parse_forwarded


def test_trusted_addresses_networks_and_any() -> None:
    p = ProxyHeaders("127.0.0.1, 10.0.0.0/8,2001:db8::/32")
    assert p.is_trusted("127.0.0.1") and p.is_trusted("10.1.2.3")
    assert p.is_trusted("2001:db8::5") and p.is_trusted("::ffff:10.0.0.1")
    assert not p.is_trusted("127.0.0.2") and not p.is_trusted("unknown")
    assert p.is_trusted(None)  # a Unix socket peer is local
    assert ProxyHeaders("*").is_trusted("203.0.113.9")
    assert ProxyHeaders(["192.0.2.1"]).is_trusted("192.0.2.1")
    with pytest.raises(ValueError, match="not an IP address"):
        ProxyHeaders("10.0.0.0/33")


def test_untrusted_peer_is_ignored() -> None:
    got = ProxyHeaders("127.0.0.1").resolve(
        "192.0.2.7", x_forwarded_for="1.2.3.4", x_forwarded_proto="https",
        forwarded="for=1.2.3.4")
    assert got == ProxiedRequest()


@pytest.mark.parametrize("xff,client", [
    ("203.0.113.5", "203.0.113.5"),
    ("198.51.100.1, 203.0.113.5", "203.0.113.5"),  # the forged entry is never chosen
    ("198.51.100.1, 203.0.113.5, 10.0.0.2", "203.0.113.5"),  # behind two proxies
    ("10.0.0.9, 10.0.0.2", "10.0.0.9"),  # all trusted: the first
    ("[2001:db8::1]:443", "2001:db8::1"),
    ("203.0.113.5:8080", "203.0.113.5"),
])
def test_x_forwarded_for_chain(xff: str, client: str) -> None:
    got = ProxyHeaders("127.0.0.1,10.0.0.0/8").resolve("127.0.0.1", x_forwarded_for=xff)
    assert got.client_host == client


def test_proto_and_host_are_checked() -> None:
    p = ProxyHeaders(host=True)
    got = p.resolve("127.0.0.1", x_forwarded_proto="HTTPS", x_forwarded_host="a.example:8443")
    assert got == ProxiedRequest(None, None, "https", "a.example:8443")
    got = p.resolve("127.0.0.1", x_forwarded_proto="gopher", x_forwarded_host="bad host")
    assert got.scheme is None and got.host is None


def test_the_proxys_host_is_believed_only_when_asked() -> None:
    """nginx's usual block sets X-Forwarded-For/-Proto and passes a client's
    X-Forwarded-Host on: believed by default (c32a341, a083761), any client chose the Host.
    uvicorn and gunicorn never read it; Django and Werkzeug's ProxyFix leave it off."""
    x = ProxyHeaders()
    assert not x.host
    assert x.header_names == ("x-forwarded-for", "x-forwarded-proto")
    got = x.resolve("127.0.0.1", x_forwarded_for="203.0.113.5", x_forwarded_proto="https",
                    x_forwarded_host="evil.example")
    assert got == ProxiedRequest("203.0.113.5", None, "https", None)
    assert x.resolve("127.0.0.1", x_forwarded_host="evil.example") == ProxiedRequest()
    xh = ProxyHeaders(host=True)
    assert xh.host
    assert xh.header_names == ("x-forwarded-for", "x-forwarded-proto", "x-forwarded-host")
    assert xh.resolve("127.0.0.1", x_forwarded_host="shop.example") == \
        ProxiedRequest(None, None, None, "shop.example")
    # The same rule for Forwarded's host=.
    value = "for=203.0.113.5;proto=https;host=shop.example"
    assert ProxyHeaders(source="forwarded").resolve("127.0.0.1", forwarded=value) == \
        ProxiedRequest("203.0.113.5", None, "https", None)
    both = ProxyHeaders(source="forwarded", host=True)
    assert both.header_names == ("forwarded",)
    assert both.resolve("127.0.0.1", forwarded=value) == \
        ProxiedRequest("203.0.113.5", None, "https", "shop.example")
    with pytest.raises(TypeError, match="proxy-headers-host: 'yes' is not True or False"):
        ProxyHeaders(host="yes")  # type: ignore[arg-type]


def test_forwarded_rfc7239() -> None:
    p = ProxyHeaders("127.0.0.1", source="forwarded", host=True)
    got = p.resolve("127.0.0.1", forwarded='for=192.0.2.60;proto=https;by=203.0.113.43, '
                                           'for="[2001:db8:cafe::17]:4711";host="h.example"',
                    x_forwarded_for="6.6.6.6")
    assert got == ProxiedRequest("2001:db8:cafe::17", 4711, None, "h.example")
    got = p.resolve("127.0.0.1", forwarded="for=unknown;proto=http")
    assert got == ProxiedRequest(None, None, "http", None)
    assert parse_forwarded('for="a;b,c";proto=https, junk') == [
        {"for": "a;b,c", "proto": "https"}]


@pytest.mark.parametrize("port", ["\xb2", "\xb9\xb3", "9" * 5000, "065536", "+80", " 80"])
def test_a_port_that_is_not_ascii_digits_is_ignored(port: str) -> None:
    """Found by fuzzing: str.isdigit() takes "²" (latin-1, so a header can carry it), which
    int() refuses; 5,000 digits are past int()'s limit. Either raised out of resolve()."""
    got = ProxyHeaders().resolve("127.0.0.1", x_forwarded_for=f"192.0.2.1:{port}")
    assert got == ProxiedRequest("192.0.2.1", None, None, None)
    got = ProxyHeaders(source="forwarded").resolve(
        "127.0.0.1", forwarded=f'for="[2001:db8::1]:{port}"')
    assert got == ProxiedRequest("2001:db8::1", None, None, None)


# What nginx's recipe passes from a client who sent Forwarded (nginx passes it unchanged), and
# what a proxy that sets Forwarded passes from a client who sent X-Forwarded-*.
FORGED_FORWARDED = "for=6.6.6.6;proto=https;host=evil.example"


def test_one_family_is_believed_the_other_ignored() -> None:
    """0.3.0 as first written let Forwarded win whenever a request had it: behind nginx,
    which sets X-Forwarded-* and passes a client's Forwarded on, any client chose its
    address, scheme and Host."""
    x = ProxyHeaders()
    assert x.source == "x-forwarded"
    assert x.header_names == ("x-forwarded-for", "x-forwarded-proto")
    got = x.resolve("127.0.0.1", forwarded=FORGED_FORWARDED, x_forwarded_for="203.0.113.5",
                    x_forwarded_proto="http")
    assert got == ProxiedRequest("203.0.113.5", None, "http", None)
    assert x.resolve("127.0.0.1", forwarded=FORGED_FORWARDED) == ProxiedRequest()

    f = ProxyHeaders(source="forwarded", host=True)
    assert f.header_names == ("forwarded",)
    got = f.resolve("127.0.0.1", forwarded="for=203.0.113.5;proto=http",
                    x_forwarded_for="6.6.6.6", x_forwarded_proto="https",
                    x_forwarded_host="evil.example")
    assert got == ProxiedRequest("203.0.113.5", None, "http", None)
    assert f.resolve("127.0.0.1", x_forwarded_for="6.6.6.6") == ProxiedRequest()
    with pytest.raises(ValueError, match="proxy-headers-source: 'both' is not one of"):
        ProxyHeaders(source="both")


@pytest.mark.parametrize("node", ['fe80::1%eth0', 'fe80::1%"\nforged line', '[fe80::1%x]:80'])
def test_an_ipv6_zone_is_not_a_client_address(node: str) -> None:
    """ip_address() takes any text after "%", quotes and line ends included: such an address
    would have reached REMOTE_ADDR and the access log's client."""
    got = ProxyHeaders().resolve("127.0.0.1", x_forwarded_for=node)
    assert got.client_host is None
