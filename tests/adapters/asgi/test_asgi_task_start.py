"""When an HTTP request's app starts. On Python 3.12+ its task starts eagerly: the app runs at
once, inside the event of the request's head (within the loop driver's poll), and an app
that answers without waiting is done before the loop turns. On 3.10 and 3.11 the task runs
on the loop's next turn. Either way a finished app leaves no task behind, an app that waits
goes on as a task, and pipelined requests are answered in order."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from support.asgi_server import running_asgi_server
from support.http_client import HttpConnection, get, raw_request

pytestmark = pytest.mark.timeout(60)

EAGER = sys.version_info >= (3, 12)


def _inside_poll() -> bool:
    """Whether the caller runs inside cymongoose.aio's LoopDriver.poll()."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "poll" and Path(code.co_filename).name == "aio.py":
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _make_app(seen: list[tuple[str, bool]]) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await receive()  # lifespan.startup
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
            await send({"type": "lifespan.shutdown.complete"})
            return
        path = scope["path"]
        seen.append((path, _inside_poll()))
        if path == "/wait":
            await asyncio.sleep(0.01)
        elif path == "/fail":
            raise RuntimeError("the app fails before it waits")
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": path.encode()})
    return app


def test_an_app_starts_eagerly_from_312_and_leaves_no_task() -> None:
    seen: list[tuple[str, bool]] = []
    with running_asgi_server(_make_app(seen)) as running:
        for path in ("/now", "/wait", "/now"):
            resp = get(running.port, path)
            assert (resp.status, resp.body) == (200, path.encode()), resp
        assert get(running.port, "/fail").status == 500
        # Three pipelined requests in one write: answered in order on one connection.
        with HttpConnection(running.port) as c:
            c.send_raw(b"".join(raw_request("GET", p) for p in ("/a", "/wait", "/b")))
            for path in ("/a", "/wait", "/b"):
                resp = c.read_response("GET", "1.1")
                assert (resp.status, resp.body) == (200, path.encode()), resp
        assert running.task_count() == 0
    assert [p for p, _ in seen] == ["/now", "/wait", "/now", "/fail", "/a", "/wait", "/b"]
    # Where the app's first step ran: in the poll that read the head (3.12+), or after it.
    assert [inside for _, inside in seen] == [EAGER] * len(seen), seen
