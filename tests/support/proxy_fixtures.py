"""Fixtures of the reverse-proxy tests (tests/proxy): upstreams and proxies that are always
stopped."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cymongoose import ReverseProxy

from .proxy_rig import Proxy, RawUpstream, Upstream


@pytest.fixture
def upstream() -> Iterator[Callable[..., Upstream]]:
    made: list[Upstream] = []

    def make(name: str = "up", **kw: Any) -> Upstream:
        up = Upstream(name, **kw).start()
        made.append(up)
        return up

    yield make
    for up in made:
        up.stop()


@pytest.fixture
def raw_upstream() -> Iterator[Callable[..., RawUpstream]]:
    made: list[RawUpstream] = []

    def make(reply: Callable[[bytes], bytes | None], **kw: Any) -> RawUpstream:
        up = RawUpstream(reply, **kw)
        made.append(up)
        return up

    yield make
    for up in made:
        up.close()


@pytest.fixture
def proxy() -> Iterator[Callable[..., Proxy]]:
    made: list[Proxy] = []

    def make(routes: Any = (), app: Any = None, limits: dict[str, Any] | None = None,
             tls: Any = None, **options: Any) -> Proxy:
        p = Proxy(ReverseProxy(routes, **options), app, tls, **(limits or {}))
        made.append(p)
        return p

    yield make
    for p in made:
        p.stop()
