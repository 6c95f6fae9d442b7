"""The suite's one bounded wait: ask a predicate until it says yes, fail naming what was awaited.

Every wait on a condition in the tests goes through `wait_for`: state a server thread or a
child process updates (sleep between checks), or state that only moves while this thread
polls a Manager (`manager=`: poll it between checks). A timeout raises AssertionError with
what was awaited and for how long, so a test reads `wait_for(...)` instead of asserting a
boolean that says nothing when it is false."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any, TypeVar

from cymongoose import Manager

T = TypeVar("T")

# Between two checks: how long to sleep, or how long one Manager.poll() may block (ms).
SLEEP_S = 0.005
POLL_MS = 5


def wait_for(predicate: Callable[[], T], timeout: float, what: str | Callable[[], str], *,
             manager: Manager | None = None, poll_ms: int = POLL_MS,
             interval: float = SLEEP_S) -> T:
    """Call predicate() until it returns something true and return that. Between checks
    sleep `interval` (longer for a predicate that costs, e.g. an HTTP probe), or, given a
    `manager`, poll it on this thread for `poll_ms` at most (0 for work no socket event
    announces, such as a paused connection's buffered data). predicate() is called once per
    check: a predicate that acts (sends a probe) is not asked again after a yes. After
    `timeout` seconds raise AssertionError naming `what` (a string, or a callable asked then
    to describe the state seen). An exception from predicate() ends the wait: a predicate
    can fail at once when what it waits on has died."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            said = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout} s waiting for {said}")
        if manager is None:
            time.sleep(interval)
        else:
            manager.poll(poll_ms)


def recv_until(mgr: Manager, sock: socket.socket, done: Callable[[bytes], bool],
               timeout: float, what: str) -> bytes:
    """Read from a non-blocking client socket while polling mgr in this thread until
    done(bytes read so far); returns them, or fails showing what was read."""
    got = bytearray()

    def complete() -> bool:
        try:
            got.extend(sock.recv(65536))
        except BlockingIOError:
            pass
        return done(bytes(got))

    wait_for(complete, timeout, lambda: f"{what}, read {bytes(got)!r}", manager=mgr)
    return bytes(got)


def recv_polling(mgr: Manager, sock: socket.socket, want: bytes, timeout: float = 5.0) -> bytes:
    """recv_until the bytes read equal `want`."""
    return recv_until(mgr, sock, lambda got: got == want, timeout, repr(want))


def polls_within(mgr: Manager, seconds: float, poll_ms: int) -> int:
    """How many `mgr.poll(poll_ms)` calls return within `seconds`: a loop with nothing to
    do sleeps each one out, a spinning loop returns thousands of times."""
    polls = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        mgr.poll(poll_ms)
        polls += 1
    return polls


async def wait_until(predicate: Callable[[], Any], timeout: float,
                     what: str | Callable[[], str], interval: float = SLEEP_S) -> Any:
    """wait_for() for a test running on an event loop: between checks it yields to the loop
    (asyncio.sleep), so the servers and clients on that loop go on meanwhile. `predicate`
    may be a coroutine function (a probe that connects)."""
    import asyncio
    import inspect

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if loop.time() >= deadline:
            said = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout} s waiting for {said}")
        await asyncio.sleep(interval)
