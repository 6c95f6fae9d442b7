"""AsyncManager: a Manager polled by the asyncio loop on its own thread."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import pytest

from cymongoose import MG_EV_HTTP_MSG, MG_EV_WAKEUP, AsyncManager, Connection

pytestmark = pytest.mark.timeout(30)


def test_serves_http_while_the_loop_runs_and_schedules_back() -> None:
    async def main() -> None:
        loop_side: list[str] = []
        done = asyncio.Event()

        def handler(conn: Connection, ev: int, data: Any) -> None:
            if ev == MG_EV_HTTP_MSG:
                conn.reply(200, b"from thread")
                am.schedule(lambda: loop_side.append("callback"))

                async def coro() -> None:
                    loop_side.append("coroutine")
                    done.set()

                am.schedule(coro())

        am = AsyncManager(handler, poll_interval=50)
        async with am:
            assert am.running
            port = am.listen("http://127.0.0.1:0").local_addr[1]
            async with httpx.AsyncClient() as client:
                resp = await client.get(f"http://127.0.0.1:{port}/")
            assert resp.status_code == 200 and resp.content == b"from thread"
            await asyncio.wait_for(done.wait(), 5)
        assert sorted(loop_side) == ["callback", "coroutine"]
        assert not am.running
        with pytest.raises(RuntimeError, match="not started"):
            am.listen("http://127.0.0.1:0")

    asyncio.run(main())


def test_wakeup_and_timer_from_async_code() -> None:
    async def main() -> None:
        got: list[bytes] = []
        fired = asyncio.Event()
        all_in = asyncio.Event()

        def handler(conn: Connection, ev: int, data: Any) -> None:
            if ev == MG_EV_WAKEUP:
                got.append(data)
                if len(got) == 100:
                    loop.call_soon_threadsafe(all_in.set)

        async with AsyncManager(handler, poll_interval=1000) as am:
            target = am.listen("tcp://127.0.0.1:0")
            loop = asyncio.get_running_loop()
            am.timer_add(10, lambda: loop.call_soon_threadsafe(fired.set))
            await asyncio.wait_for(fired.wait(), 5)
            for i in range(100):
                assert am.wakeup(target.id, b"%d" % i)
            await asyncio.wait_for(all_in.wait(), 5)
        assert got == [b"%d" % i for i in range(100)]

    asyncio.run(main())


def test_not_started_errors() -> None:
    am = AsyncManager()
    for call in (lambda: am.manager, lambda: am.wakeup(1), lambda: am.schedule(print),
                 lambda: am.timer_add(1, print)):
        with pytest.raises(RuntimeError, match="not started"):
            call()
    with pytest.raises(ValueError):
        AsyncManager(poll_interval=-1)


def test_handlers_run_on_the_loops_own_thread() -> None:
    async def main() -> None:
        threads: set[int] = set()
        got = asyncio.Event()

        def handler(conn: Connection, ev: int, data: Any) -> None:
            if ev == MG_EV_HTTP_MSG:
                threads.add(threading.get_ident())
                got.set()  # an asyncio object, touched directly: no thread crossed
                conn.reply(200, b"ok")

        async with AsyncManager(handler) as am:
            port = am.listen("http://127.0.0.1:0").local_addr[1]
            async with httpx.AsyncClient() as client:
                for _ in range(5):
                    assert (await client.get(f"http://127.0.0.1:{port}/")).content == b"ok"
            await asyncio.wait_for(got.wait(), 5)
        assert threads == {threading.get_ident()}

    asyncio.run(main())
