"""The reverse proxy: path prefixes answered by upstream HTTP servers through pooled
keep-alive connections, with the bytes moved in C (docs/proxy.md)."""

from .reverse_proxy import LB_POLICIES, ReverseProxy, RouteHook
from .upstreams import Upstream, parse_route, parse_upstream

__all__ = ["ReverseProxy", "RouteHook", "LB_POLICIES", "Upstream", "parse_route",
           "parse_upstream"]
