"""Manager.wakeup(): lossless, ordered, many messages per poll, thread-safe."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from support.waiting import wait_for

from cymongoose import MG_EV_WAKEUP, WAKEUP_MAX_PAYLOAD, Connection, Manager

pytestmark = pytest.mark.timeout(30)


def _target(mgr: Manager) -> Connection:
    return mgr.listen("tcp://127.0.0.1:0")


def test_many_messages_in_one_poll_in_order() -> None:
    got: list[bytes] = []
    with Manager(lambda c, ev, d: got.append(d) if ev == MG_EV_WAKEUP else None,
                 enable_wakeup=True) as mgr:
        target = _target(mgr)
        for i in range(1000):
            assert mgr.wakeup(target.id, b"%d" % i)
        mgr.poll(100)  # one poll delivers everything queued
        assert got == [b"%d" % i for i in range(1000)]


def test_large_payloads_arrive_whole() -> None:
    got: list[bytes] = []
    big = bytes(range(256)) * 4096 * 4  # 4 MiB: far beyond a datagram
    with Manager(lambda c, ev, d: got.append(d) if ev == MG_EV_WAKEUP else None,
                 enable_wakeup=True) as mgr:
        target = _target(mgr)
        mgr.wakeup(target.id, big)
        mgr.wakeup(target.id, b"")
        wait_for(lambda: len(got) == 2, 5.0, "len(got) == 2", manager=mgr)
    assert got == [big, b""]


def test_from_many_threads_nothing_lost_per_thread_order_kept() -> None:
    got: list[tuple[int, int]] = []

    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_WAKEUP:
            t, i = data.split(b":")
            got.append((int(t), int(i)))

    with Manager(handler, enable_wakeup=True) as mgr:
        target = _target(mgr)
        per_thread = 2000

        def producer(t: int) -> None:
            for i in range(per_thread):
                mgr.wakeup(target.id, b"%d:%d" % (t, i))

        threads = [threading.Thread(target=producer, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        wait_for(lambda: len(got) == 4 * per_thread and not any(th.is_alive() for th in threads),
                 20, "len(got) == 4 * per_thread and not any(th.is_alive() for th in threads)",
                 manager=mgr)
        for th in threads:
            th.join()
    assert len(got) == 4 * per_thread
    for t in range(4):
        assert [i for tt, i in got if tt == t] == list(range(per_thread))


def test_wakeup_interrupts_a_long_poll() -> None:
    import time
    got: list[bytes] = []
    with Manager(lambda c, ev, d: got.append(d) if ev == MG_EV_WAKEUP else None,
                 enable_wakeup=True) as mgr:
        target = _target(mgr)
        threading.Timer(0.05, lambda: mgr.wakeup(target.id, b"now")).start()
        t0 = time.monotonic()
        while not got and time.monotonic() - t0 < 5:
            mgr.poll(3000)
        assert got == [b"now"]
        assert time.monotonic() - t0 < 1.0


def test_limits_and_disabled_wakeup() -> None:
    with Manager(enable_wakeup=True) as mgr:
        target = _target(mgr)
        assert mgr.wakeup(0, b"x") is False
        assert mgr.wakeup(987654, b"x") is True  # unknown id: accepted, dropped quietly
        mgr.poll(10)
        with pytest.raises(ValueError, match="limit"):
            mgr.wakeup(target.id, b"\0" * (WAKEUP_MAX_PAYLOAD + 1))
        with pytest.raises(TypeError):
            mgr.wakeup(target.id, "text")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            mgr.wakeup(target.id, None)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError):
        mgr.wakeup(1, b"x")
    with Manager() as plain:
        # False, as in 0.2.x, and said once (issue 33): the wake can never arrive.
        with pytest.warns(RuntimeWarning, match=r"enable_wakeup=True"):
            assert plain.wakeup(_target(plain).id, b"x") is False
