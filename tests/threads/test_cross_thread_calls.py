"""The core's entry points for other threads, hammered from many at once: Manager.wakeup(),
call_soon_threadsafe() and Timer.cancel() against a polling loop, and wakeups racing close().

They run on every interpreter; what they are for is free-threaded Python with the GIL off
(make test-py313t), where nothing but the core's own atomics and locks orders the threads
(docs/internals.md, "Without the GIL"). Each is bounded in count and time, and waits on the
state it checks, never on a clock."""

from __future__ import annotations

import select
import socket
import threading
from typing import Any

from support.waiting import wait_for

from cymongoose import MG_EV_WAKEUP, Connection, Manager

THREADS = 8
PER_THREAD = 400


def _start_together(targets: list[Any]) -> list[threading.Thread]:
    """Start one thread per target, all released at once by a barrier."""
    barrier = threading.Barrier(len(targets))

    def run(target: Any) -> None:
        barrier.wait(timeout=30)
        target()

    threads = [threading.Thread(target=run, args=(t,), daemon=True) for t in targets]
    for t in threads:
        t.start()
    return threads


def _join(threads: list[threading.Thread]) -> None:
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive(), f"{t.name} did not finish in 60 s"


def test_wakeups_from_many_threads_each_arrive_once() -> None:
    got: list[bytes] = []

    def on_event(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_WAKEUP:
            got.append(bytes(data))

    with Manager(on_event, enable_wakeup=True) as mgr:
        target = mgr.listen("tcp://127.0.0.1:0").id

        def send(k: int) -> Any:
            return lambda: [mgr.wakeup(target, b"%d:%d" % (k, i)) for i in range(PER_THREAD)]

        threads = _start_together([send(k) for k in range(THREADS)])
        expected = THREADS * PER_THREAD
        # Polled here, while the senders run: a lost wake would leave some undelivered.
        wait_for(lambda: len(got) >= expected and not any(t.is_alive() for t in threads), 60,
                 lambda: f"{expected} wakeups (got {len(got)})", manager=mgr, poll_ms=50)
        _join(threads)
        mgr.poll(0)
    assert len(got) == expected
    assert set(got) == {b"%d:%d" % (k, i) for k in range(THREADS) for i in range(PER_THREAD)}
    # Each thread's own wakeups arrive in the order it sent them.
    for k in range(THREADS):
        mine = [int(g.split(b":")[1]) for g in got if g.startswith(b"%d:" % k)]
        assert mine == sorted(mine)


def test_calls_from_many_threads_each_run_once_on_the_loop_thread() -> None:
    ran: list[tuple[int, int]] = []
    loop_thread = threading.get_ident()
    wrong_thread: list[int] = []

    def record(k: int, i: int) -> None:
        if threading.get_ident() != loop_thread:
            wrong_thread.append(k)
        ran.append((k, i))

    with Manager(enable_wakeup=True) as mgr:
        def call(k: int) -> Any:
            return lambda: [mgr.call_soon_threadsafe(record, k, i) for i in range(PER_THREAD)]

        threads = _start_together([call(k) for k in range(THREADS)])
        expected = THREADS * PER_THREAD
        wait_for(lambda: len(ran) >= expected and not any(t.is_alive() for t in threads), 60,
                 lambda: f"{expected} calls (ran {len(ran)})", manager=mgr, poll_ms=50)
        _join(threads)
    assert not wrong_thread
    assert sorted(ran) == [(k, i) for k in range(THREADS) for i in range(PER_THREAD)]


def test_wakeups_racing_close_raise_or_arrive_and_never_write_elsewhere() -> None:
    # Many rounds: each closes a Manager while threads wake it. After close(), the wakeup
    # pipe's descriptor numbers are free: socket pairs made at once take them, and must
    # never receive a stray wake datagram from a wakeup() that lost the race.
    for _ in range(20):
        mgr = Manager(enable_wakeup=True)
        target = mgr.listen("tcp://127.0.0.1:0").id
        outcomes: list[str] = []
        stop = threading.Event()

        def hammer(mgr: Manager = mgr, target: int = target,
                   outcomes: list[str] = outcomes, stop: threading.Event = stop) -> None:
            while not stop.is_set():
                try:
                    mgr.wakeup(target, b"x")
                except RuntimeError:
                    outcomes.append("closed")
                    return
            outcomes.append("stopped")

        threads = _start_together([hammer for _ in range(4)])
        mgr.poll(0)
        mgr.close()
        pairs = [socket.socketpair() for _ in range(4)]  # may reuse the pipe's numbers
        try:
            stop.set()
            _join(threads)
            readable, _, _ = select.select([s for p in pairs for s in p], [], [], 0)
            assert readable == [], "a wakeup() after close() wrote into a reused descriptor"
        finally:
            for a, b in pairs:
                a.close()
                b.close()
        assert len(outcomes) == 4


def test_cancelled_timers_never_fire_again_while_others_cancel_them() -> None:
    fired = [0] * 200
    with Manager() as mgr:
        timers = [mgr.timer_add(1, lambda i=i: fired.__setitem__(i, fired[i] + 1), repeat=True)
                  for i in range(len(fired))]

        def cancel(part: int) -> Any:
            return lambda: [t.cancel() for t in timers[part::4]]

        threads = _start_together([cancel(k) for k in range(4)])
        wait_for(lambda: not any(t.is_alive() for t in threads), 30, "the cancellers",
                 manager=mgr, poll_ms=2)
        _join(threads)
        assert not any(t.active for t in timers)
        mgr.poll(0)  # a firing already under way when the last cancel() returned ends here
        seen = list(fired)
        for _ in range(20):  # each poll waits up to 5 ms: 1 ms timers would fire in it
            mgr.poll(5)
        assert fired == seen, "a timer fired after cancel() returned"
