"""tests/benchmarks/app_cost.py, the in-process floor docs/performance.md divides by: an ASGI
app that listens for the client leaving while it answers (Django's ASGIHandler does) is
called as a server would call it, not told a second request arrived."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.no_asan

APP_COST = Path(__file__).resolve().parents[2] / "tests" / "benchmarks" / "app_cost.py"


def _app_cost() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_app_cost", APP_COST)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_app_cost", module)
    spec.loader.exec_module(module)
    return module


def test_an_app_listening_for_the_client_leaving_hears_it_once_answered() -> None:
    heard: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        first = await receive()
        assert first["type"] == "http.request" and not first["more_body"]
        listener = asyncio.ensure_future(receive())
        await asyncio.sleep(0)  # the listener waits: the answer is not complete yet
        assert not listener.done()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"ok"})
        heard.append((await listener)["type"])

    check, run = _app_cost().asgi_runner(app, "/other")
    check()
    run(3)
    assert heard == ["http.disconnect"] * 4
