"""Timers: one-shot, repeating, run_now, thread-safe cancel, precise waits, errors."""

from __future__ import annotations

import threading
import time

import pytest
from support.waiting import wait_for

from cymongoose import Manager

pytestmark = pytest.mark.timeout(30)


def test_one_shot_fires_once_and_goes_inactive(manager: Manager) -> None:
    fired: list[float] = []
    t0 = time.monotonic()
    timer = manager.timer_add(50, lambda: fired.append(time.monotonic() - t0))
    assert timer.active
    wait_for(lambda: bool(fired), 2, "bool(fired)", manager=manager)
    for _ in range(10):
        manager.poll(10)
    assert len(fired) == 1 and 0.04 <= fired[0] < 0.5
    assert not timer.active


def test_repeat_and_cancel(manager: Manager) -> None:
    count = [0]
    timer = manager.timer_add(10, lambda: count.__setitem__(0, count[0] + 1), repeat=True)
    wait_for(lambda: count[0] >= 5, 3, "count[0] >= 5", manager=manager)
    timer.cancel()
    timer.cancel()  # idempotent
    frozen = count[0]
    for _ in range(10):
        manager.poll(10)
    assert count[0] == frozen and not timer.active


def test_run_now_fires_on_next_poll(manager: Manager) -> None:
    fired: list[int] = []
    manager.timer_add(10_000, lambda: fired.append(1), run_now=True)
    manager.poll(0)
    assert fired == [1]


def test_poll_wakes_for_a_timer_instead_of_sleeping_the_full_timeout(manager: Manager) -> None:
    fired: list[float] = []
    t0 = time.monotonic()
    manager.timer_add(30, lambda: fired.append(time.monotonic() - t0))
    while not fired and time.monotonic() - t0 < 3:
        manager.poll(1000)
    assert fired and fired[0] < 0.5


def test_cancel_from_another_thread(manager: Manager) -> None:
    count = [0]
    timer = manager.timer_add(5, lambda: count.__setitem__(0, count[0] + 1), repeat=True)
    threading.Timer(0.1, timer.cancel).start()
    wait_for(lambda: not timer.active, 5, "the other thread's cancel", manager=manager)
    frozen = count[0]
    assert frozen > 0 and not timer.active
    for _ in range(10):
        manager.poll(5)
    assert count[0] == frozen


def test_timer_exception_goes_to_error_handler() -> None:
    errors: list[BaseException] = []
    with Manager(error_handler=errors.append) as mgr:
        mgr.timer_add(0, lambda: 1 / 0, run_now=True)
        wait_for(lambda: bool(errors), 5.0, "bool(errors)", manager=mgr)
    assert isinstance(errors[0], ZeroDivisionError)


def test_arguments_and_close(manager: Manager) -> None:
    with pytest.raises(ValueError):
        manager.timer_add(-1, lambda: None)
    with pytest.raises(TypeError):
        manager.timer_add(1, lambda: None, True)  # type: ignore[misc]
    timer = manager.timer_add(1000, lambda: None, repeat=True)
    manager.close()
    assert not timer.active
    timer.cancel()  # still safe after the manager is gone
