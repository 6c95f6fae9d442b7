"""Reading the generic test apps' per-token state over HTTP (`GET /_ctl/state?token=`:
support.wsgi_apps and support.asgi_apps both record it so)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .http_client import HttpConnection, get
from .waiting import wait_for


def app_state(port: int, token: str) -> dict[str, Any]:
    """The state recorded under `token`; {} while nothing is."""
    state = json.loads(get(port, f"/_ctl/state?token={token}").body)
    return state or {}


def wait_state(port: int, token: str, done: Callable[[dict[str, Any]], bool],
               timeout: float = 5.0) -> dict[str, Any]:
    """Poll the state until `done(state)` holds for a non-empty one and return it; fails
    showing the last state read after `timeout`."""
    st: dict[str, Any] = {}

    def reached() -> bool:
        nonlocal st
        st = app_state(port, token)
        return bool(st) and done(st)

    wait_for(reached, timeout, lambda: f"the app's state for {token} (last {st})",
             interval=0.02)
    return st


def wait_app_state(port: int, token: str, key: str, value: Any = None,
                   timeout: float = 5.0) -> dict[str, Any]:
    """Poll the state until it has `key` (equal to `value`, if given); fails after timeout."""
    return wait_state(port, token,
                      lambda st: key in st and (value is None or st[key] == value), timeout)


def release(port: int, token: str) -> None:
    with HttpConnection(port) as c:
        assert c.request("POST", f"/_ctl/release?token={token}", body=b"").status == 200
