"""aio.LoopDriver watching each socket (no epoll descriptor: macOS, make test-poll), on
asyncio's loop and uvloop's. The driver picks that mode when `Manager.fileno()` is -1; here a
Manager that says so runs it on the epoll build too, where Mongoose's own wait is then only a
zero-timeout probe."""

from __future__ import annotations

import asyncio
import selectors
import threading
from collections.abc import Callable
from typing import Any

import pytest
from support.event_loops import LOOP_KINDS
from support.watched_sockets import assert_watched_are_the_managers

from cymongoose import MG_EV_CLOSE, MG_EV_CONNECT, MG_EV_READ, Connection, Manager
from cymongoose.aio import LoopDriver

pytestmark = pytest.mark.timeout(60)



def _uvloop() -> asyncio.AbstractEventLoop:
    import uvloop  # not installed everywhere: LOOP_KINDS skips it there

    return uvloop.new_event_loop()


LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop, "uvloop": _uvloop}


class SocketWatchedManager(Manager):
    """A Manager whose epoll descriptor the driver does not see: it watches each socket."""

    def fileno(self) -> int:
        return -1


def echo(conn: Connection, ev: int, data: Any) -> None:
    if ev == MG_EV_READ:
        payload = conn.recv_data(consume=True)
        conn.send(payload)
        if payload.endswith(b"bye\n"):
            conn.close()  # inside the handler: its watch goes with the socket


def run(loop_name: str, main: Callable[[Manager, LoopDriver], Any]) -> Any:
    loop = LOOPS[loop_name]()
    manager = SocketWatchedManager(echo, enable_wakeup=True)
    driver = LoopDriver(manager, loop)

    async def body() -> Any:
        driver.attach()
        try:
            return await asyncio.wait_for(main(manager, driver), 45)
        finally:
            driver.detach()

    try:
        return loop.run_until_complete(body())
    finally:
        manager.close()
        loop.close()


def selector_fds(loop: asyncio.AbstractEventLoop) -> set[int] | None:
    """The descriptors asyncio's own loop watches, less its self-pipe (None for uvloop)."""
    selector = getattr(loop, "_selector", None)
    if not isinstance(selector, selectors.BaseSelector):
        return None
    return set(selector.get_map()) - {loop._ssock.fileno()}  # type: ignore[attr-defined]


async def until(predicate: Callable[[], object], what: str, timeout: float = 10) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


@pytest.mark.parametrize("loop_name", LOOP_KINDS)
def test_hundreds_of_clients_opening_and_closing_keep_the_watches_right(loop_name: str) -> None:
    async def main(manager: Manager, driver: LoopDriver) -> None:
        port = manager.listen("tcp://127.0.0.1:0").local_addr[1]
        driver.kick()

        async def client(i: int) -> None:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            line = b"bye\n" if i % 2 else b"hello %d\n" % i
            writer.write(line)
            assert await reader.readline() == line
            writer.close()  # half of them were closed by the server first
            await writer.wait_closed()

        for _ in range(6):
            await asyncio.gather(*(client(i) for i in range(60)))
        await until(lambda: len(manager.connections) == 1, "every connection's close")
        driver.poll()
        fds = selector_fds(asyncio.get_running_loop())
        if fds is not None:
            assert_watched_are_the_managers(manager, fds, wakeup_pipe=True)

    run(loop_name, main)


@pytest.mark.parametrize("loop_name", LOOP_KINDS)
def test_a_client_connection_timers_and_wakeups_run_on_the_loop(loop_name: str) -> None:
    async def main(manager: Manager, driver: LoopDriver) -> None:
        port = manager.listen("tcp://127.0.0.1:0").local_addr[1]
        got: list[bytes] = []
        events: list[int] = []

        def on_client(conn: Connection, ev: int, data: Any) -> None:
            events.append(ev)
            if ev == MG_EV_CONNECT:
                conn.send(b"over mongoose\n")  # from a connecting socket's write watch
            elif ev == MG_EV_READ:
                got.append(conn.recv_data(consume=True))

        client = manager.connect(f"tcp://127.0.0.1:{port}", on_client)
        driver.kick()
        await until(lambda: b"".join(got) == b"over mongoose\n", "the echo")
        fired = asyncio.Event()
        manager.timer_add(20, fired.set)
        driver.reschedule()
        await asyncio.wait_for(fired.wait(), 5)
        on_loop = threading.Event()
        loop_thread = threading.current_thread()

        def from_a_thread() -> None:
            manager.call_soon_threadsafe(
                lambda: on_loop.set() if threading.current_thread() is loop_thread else None)

        threading.Thread(target=from_a_thread).start()
        await until(on_loop.is_set, "the call from another thread, through the wakeup pipe")
        client.close()
        driver.kick()
        await until(lambda: MG_EV_CLOSE in events, "the client's close")

    run(loop_name, main)


@pytest.mark.parametrize("loop_name", LOOP_KINDS)
def test_detach_drops_every_watch(loop_name: str) -> None:
    async def main(manager: Manager, driver: LoopDriver) -> tuple[int, set[int] | None]:
        manager.listen("tcp://127.0.0.1:0")
        driver.kick()
        await until(lambda: driver.attached, "attach")
        driver.poll()
        loop = asyncio.get_running_loop()
        watched = selector_fds(loop)
        driver.detach()
        if watched is not None:
            assert len(watched) == 2  # the listener and the wakeup pipe
            assert selector_fds(loop) == set()
        return len(manager.connections), watched

    run(loop_name, main)
