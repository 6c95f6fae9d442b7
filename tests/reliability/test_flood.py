"""The TLS flood in short (make flood runs every flood for a minute, flood.py): garbage and
stalled TLS clients beside HTTPS requests. It passes with the probe never failing and the
server's descriptors back to their level before the flood and its RSS within 5% of it: the
burst left 10 MB of freed heap that glibc kept until the loop gave it back (manager.pxi
_heap_release_due)."""

from __future__ import annotations

from pathlib import Path

import pytest

from . import flood

pytestmark = [
    pytest.mark.no_asan,  # subprocess servers of the normal build; ASan's allocator keeps RSS
    pytest.mark.timeout(120),
]


# The raw handler's loop blocks in poll(); FastAPI's is polled by asyncio (aio.LoopDriver),
# which gives heap back from next_poll_ms().
@pytest.mark.parametrize("app", [("hello_apps:raw_hello", "raw"),
                                 ("hello_apps:fastapi_app", "asgi")], ids=["raw", "asgi"])
def test_short_tls_flood(app: tuple[str, str], tmp_path: Path) -> None:
    result = flood.run_flood("tls", seconds=2, idle_count=0, accept_count=0, tmp=tmp_path,
                             app=app, quiet_s=0.5)
    assert result.during.get("probes"), result
    assert not result.failures, (result.failures, result.rss_kib_before, result.rss_kib_after)
