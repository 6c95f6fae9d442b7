"""Reading the generic test app's per-token state (support.wsgi_apps) over HTTP."""

from __future__ import annotations

import json
import time
from typing import Any

from .http_client import HttpConnection, get


def app_state(port: int, token: str) -> dict[str, Any]:
    return json.loads(get(port, f"/_ctl/state?token={token}").body)  # type: ignore[no-any-return]


def wait_app_state(port: int, token: str, key: str, value: Any = None,
                   timeout: float = 5.0) -> dict[str, Any]:
    """Poll the state until it has `key` (equal to `value`, if given) or timeout; returns
    the last state read."""
    deadline = time.monotonic() + timeout
    while True:
        st = app_state(port, token)
        if key in st and (value is None or st[key] == value) or time.monotonic() > deadline:
            return st
        time.sleep(0.02)


def release(port: int, token: str) -> None:
    with HttpConnection(port) as c:
        assert c.request("POST", f"/_ctl/release?token={token}", body=b"").status == 200
