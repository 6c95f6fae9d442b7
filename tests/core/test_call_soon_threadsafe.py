"""Manager.call_soon_threadsafe(): callbacks from any thread run on the polling thread, in
call order, with their arguments; and Manager.linger_ms, the other knob app servers set."""

from __future__ import annotations

import http.client
import sys
import threading
import time
from typing import Any

import pytest
from support.waiting import wait_for

from cymongoose import MG_EV_HTTP_MSG, MG_EV_POLL, Connection, Manager

pytestmark = pytest.mark.timeout(30)


def test_callbacks_run_on_the_polling_thread_in_order_with_args() -> None:
    calls: list[tuple[Any, ...]] = []
    threads: list[int] = []

    def record(*args: Any) -> None:
        calls.append(args)
        threads.append(threading.get_ident())

    with Manager(enable_wakeup=True) as mgr:
        # Queued from another thread; nothing runs until this thread polls.
        def producer() -> None:
            mgr.call_soon_threadsafe(record)
            mgr.call_soon_threadsafe(record, 1)
            mgr.call_soon_threadsafe(record, "two", b"2", None)
            payload = {"k": [3]}
            mgr.call_soon_threadsafe(record, payload)

        th = threading.Thread(target=producer)
        th.start()
        th.join(5)
        assert calls == []
        wait_for(lambda: len(calls) == 4, 5.0, "len(calls) == 4", manager=mgr)
    assert calls == [(), (1,), ("two", b"2", None), ({"k": [3]},)]
    assert set(threads) == {threading.get_ident()}


def test_callbacks_queued_before_a_poll_all_run_in_that_poll() -> None:
    order: list[int] = []
    with Manager(enable_wakeup=True) as mgr:
        for i in range(1000):
            mgr.call_soon_threadsafe(order.append, i)
        mgr.poll(100)
        assert order == list(range(1000))


def test_many_threads_every_call_runs_and_each_threads_order_is_kept() -> None:
    got: list[tuple[int, int]] = []
    per_thread = 2000
    n_threads = 4
    with Manager(enable_wakeup=True) as mgr:
        start = threading.Barrier(n_threads)

        def producer(t: int) -> None:
            start.wait()
            for i in range(per_thread):
                mgr.call_soon_threadsafe(got.append, (t, i))

        threads = [threading.Thread(target=producer, args=(t,)) for t in range(n_threads)]
        for th in threads:
            th.start()
        wait_for(lambda: len(got) == n_threads * per_thread
                 and not any(th.is_alive() for th in threads), 20,
                 "every call to run and every producer to end", manager=mgr)
        for th in threads:
            th.join()
        mgr.poll(10)  # nothing more arrives afterwards
    assert len(got) == n_threads * per_thread
    for t in range(n_threads):
        assert [i for tt, i in got if tt == t] == list(range(per_thread))


def test_a_call_wakes_a_poll_that_is_waiting() -> None:
    ran = threading.Event()
    with Manager(enable_wakeup=True) as mgr:
        threading.Timer(0.05, lambda: mgr.call_soon_threadsafe(ran.set)).start()
        t0 = time.monotonic()
        while not ran.is_set() and time.monotonic() - t0 < 5:
            mgr.poll(3000)
        assert ran.is_set()
        assert time.monotonic() - t0 < 1.0


def test_a_call_made_from_a_handler_runs_after_it_not_inside_it() -> None:
    log: list[str] = []

    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_POLL and not log:
            log.append("handler start")
            mgr.call_soon_threadsafe(log.append, "callback")
            log.append("handler end")

    with Manager(handler, enable_wakeup=True) as mgr:
        mgr.listen("tcp://127.0.0.1:0")
        wait_for(lambda: "callback" in log, 5.0, '"callback" in log', manager=mgr)
    assert log[:3] == ["handler start", "handler end", "callback"]


def test_callback_exception_goes_to_the_error_handler_and_later_calls_still_run() -> None:
    errors: list[BaseException] = []
    ran: list[str] = []

    def boom() -> None:
        raise ValueError("callback failed")

    with Manager(enable_wakeup=True, error_handler=errors.append) as mgr:
        mgr.call_soon_threadsafe(ran.append, "before")
        mgr.call_soon_threadsafe(boom)
        mgr.call_soon_threadsafe(ran.append, "after")
        wait_for(lambda: len(ran) == 2, 5.0, "len(ran) == 2", manager=mgr)
    assert ran == ["before", "after"]
    assert len(errors) == 1 and isinstance(errors[0], ValueError)
    assert str(errors[0]) == "callback failed"


def test_keyboard_interrupt_in_a_callback_surfaces_from_poll_and_the_rest_run_later() -> None:
    ran: list[str] = []

    def interrupt() -> None:
        raise KeyboardInterrupt

    with Manager(enable_wakeup=True) as mgr:
        mgr.call_soon_threadsafe(ran.append, "first")
        mgr.call_soon_threadsafe(interrupt)
        mgr.call_soon_threadsafe(ran.append, "third")
        with pytest.raises(KeyboardInterrupt):
            mgr.poll(100)
        assert ran == ["first"]
        wait_for(lambda: len(ran) == 2, 5.0, "len(ran) == 2", manager=mgr)
    assert ran == ["first", "third"]


@pytest.mark.parametrize("bad", [None, 3, "print", b"x"])
def test_non_callable_is_type_error(bad: Any) -> None:
    with Manager(enable_wakeup=True) as mgr:
        with pytest.raises(TypeError, match="callable"):
            mgr.call_soon_threadsafe(bad)
        mgr.poll(0)


def test_without_wakeup_channel_is_runtime_error() -> None:
    with Manager() as mgr:
        with pytest.raises(RuntimeError, match="enable_wakeup"):
            mgr.call_soon_threadsafe(print)


def test_after_close_is_runtime_error() -> None:
    ran: list[int] = []
    mgr = Manager(enable_wakeup=True)
    mgr.call_soon_threadsafe(ran.append, 1)  # queued, never run: close() drops it
    mgr.close()
    with pytest.raises(RuntimeError):
        mgr.call_soon_threadsafe(ran.append, 2)
    assert ran == []


def test_linger_ms_default_and_range() -> None:
    # 0 with the GIL off: no switch interval to save (docs/internals.md, "Without the GIL").
    gil_on = getattr(sys, "_is_gil_enabled", lambda: True)()
    with Manager() as mgr:
        assert mgr.linger_ms == (1 if gil_on else 0)
        for value in (0, 100, 37):
            mgr.linger_ms = value
            assert mgr.linger_ms == value
        for bad in (-1, 101, 10**6):
            with pytest.raises(ValueError, match="linger_ms"):
                mgr.linger_ms = bad
        bad_type: Any
        for bad_type in (1.5, "1", True, None):
            with pytest.raises(TypeError, match="linger_ms"):
                mgr.linger_ms = bad_type
        assert mgr.linger_ms == 37  # refused values change nothing


def test_linger_ms_zero_still_serves_requests(server_thread: Any) -> None:
    """linger_ms only decides whether an idle poll holds the GIL; 0 must not stall I/O."""

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            conn.reply(200, b"pong")

    st = server_thread(handler)
    st.manager.linger_ms = 0
    port = st.listen()
    st.start()
    client = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        for _ in range(20):
            client.request("GET", "/")
            resp = client.getresponse()
            assert (resp.status, resp.read()) == (200, b"pong")
    finally:
        client.close()
