"""Manager lifecycle, argument checking, exception routing and signals."""

from __future__ import annotations

import gc
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from typing import Any

import pytest
from support.kernel_view import in_socket_wait
from support.waiting import wait_for

import cymongoose
from cymongoose import (
    MG_EV_ACCEPT,
    MG_EV_CLOSE,
    MG_EV_HTTP_MSG,
    MG_EV_OPEN,
    MG_EV_POLL,
    Connection,
    Manager,
)

pytestmark = pytest.mark.timeout(30)


def test_context_manager_closes_and_close_is_idempotent() -> None:
    with Manager() as mgr:
        listener = mgr.listen("tcp://127.0.0.1:0")
        assert listener.id > 0
    mgr.close()
    with pytest.raises(RuntimeError, match="closed"):
        mgr.poll(0)
    with pytest.raises(RuntimeError, match="closed"):
        mgr.listen("tcp://127.0.0.1:0")
    with pytest.raises(RuntimeError, match="closed"):
        mgr.timer_add(10, lambda: None)
    assert listener.id == 0 and listener.is_closing and listener.local_addr is None


def test_close_fires_close_event_for_every_connection() -> None:
    events: list[tuple[int, int]] = []
    mgr = Manager(lambda c, ev, d: events.append((c.id, ev)) if ev == MG_EV_CLOSE else None)
    a = mgr.listen("tcp://127.0.0.1:0")
    b = mgr.listen("http://127.0.0.1:0")
    ids = {a.id, b.id}
    mgr.close()
    assert {cid for cid, _ in events} == ids


def test_argument_types_are_checked(manager: Manager) -> None:
    with pytest.raises(TypeError, match="url"):
        manager.listen(b"tcp://127.0.0.1:0")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        manager.listen(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="handler"):
        manager.listen("tcp://127.0.0.1:0", handler=42)
    with pytest.raises(TypeError, match="handler"):
        Manager(handler="not callable")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="error_handler"):
        Manager(error_handler=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        manager.poll("10")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="callback"):
        manager.timer_add(10, None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="NUL"):
        manager.listen("tcp://127.0.0.1:0\x00junk")


def test_bad_listen_url_raises_runtime_error(manager: Manager) -> None:
    taken = manager.listen("tcp://127.0.0.1:0")
    port = taken.local_addr[1]
    with pytest.raises(RuntimeError, match="Failed to listen"):
        manager.listen(f"tcp://127.0.0.1:{port}")
    with pytest.raises(RuntimeError):
        manager.listen("http://999.1.1.1:80")


def test_connections_snapshot_and_wakeup_pipe_hidden() -> None:
    with Manager(enable_wakeup=True) as mgr:
        mgr.poll(0)
        assert mgr.connections == ()
        assert mgr.wakeup_id > 0
        a = mgr.listen("tcp://127.0.0.1:0")
        b = mgr.listen("udp://127.0.0.1:0")
        assert mgr.connections == (a, b)
        assert all(c.id != mgr.wakeup_id for c in mgr.connections)
    assert mgr.wakeup_id == 0
    with Manager() as plain:
        assert plain.wakeup_id == 0


def test_same_connection_object_for_every_event_and_userdata() -> None:
    seen: dict[int, set[int]] = {}
    objs: dict[int, Connection] = {}

    def handler(conn: Connection, ev: int, data: Any) -> None:
        if conn.is_listening:
            return
        if ev == MG_EV_ACCEPT:
            conn.userdata = {"accepted_at": time.monotonic()}
        if conn.id in objs:
            assert objs[conn.id] is conn
            assert "accepted_at" in conn.userdata
        objs.setdefault(conn.id, conn)
        seen.setdefault(conn.id, set()).add(ev)

    with Manager(handler) as mgr:
        port = mgr.listen("tcp://127.0.0.1:0").local_addr[1]
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(b"hello")
            wait_for(lambda: any(MG_EV_POLL in evs for evs in seen.values()), 5.0,
                     "any(MG_EV_POLL in evs for evs in seen.values())", manager=mgr)
        wait_for(lambda: any(MG_EV_CLOSE in evs for evs in seen.values()), 5.0,
                 "any(MG_EV_CLOSE in evs for evs in seen.values())", manager=mgr)
    (events,) = seen.values()
    assert {MG_EV_OPEN, MG_EV_ACCEPT, MG_EV_CLOSE} <= events


def test_listener_handler_is_inherited_and_set_handler_changes_it() -> None:
    calls: list[str] = []

    def first(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_ACCEPT:
            calls.append("first")

    def second(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_ACCEPT:
            calls.append("second")

    with Manager() as mgr:
        lst = mgr.listen("tcp://127.0.0.1:0", first)
        port = lst.local_addr[1]
        assert lst.handler is first
        with socket.create_connection(("127.0.0.1", port)):
            wait_for(lambda: calls == ["first"], 5.0, 'calls == ["first"]', manager=mgr)
        lst.set_handler(second)
        with socket.create_connection(("127.0.0.1", port)):
            wait_for(lambda: calls == ["first", "second"], 5.0, 'calls == ["first", "second"]',
                     manager=mgr)
        lst.set_handler(None)
        with socket.create_connection(("127.0.0.1", port)):
            for _ in range(10):
                mgr.poll(5)
    assert calls == ["first", "second"]


def test_reentrant_poll_and_close_inside_handler_raise(manager: Manager) -> None:
    outcomes: list[str] = []

    def on_timer() -> None:
        for call in (lambda: manager.poll(0), manager.close):
            try:
                call()
                outcomes.append("allowed")
            except RuntimeError as exc:
                outcomes.append("RuntimeError")
                messages.append(str(exc))

    messages: list[str] = []
    manager.timer_add(0, on_timer, run_now=True)
    wait_for(lambda: len(outcomes) == 2, 5.0, "len(outcomes) == 2", manager=manager)
    assert outcomes == ["RuntimeError", "RuntimeError"]
    assert "not reentrant" in messages[0]


def test_poll_from_second_thread_while_polling_raises() -> None:
    with Manager() as mgr:
        errors: list[BaseException] = []

        def poller() -> None:
            mgr.poll(400)

        t = threading.Thread(target=poller)
        t.start()
        assert t.native_id is not None
        # The first thread blocks in poll() (in epoll, or poll(), the GIL released).
        wait_for(lambda: in_socket_wait(t.native_id), 5, "the first thread in its wait")
        try:
            mgr.poll(0)
        except RuntimeError as exc:
            errors.append(exc)
        t.join(5)
    assert errors and "already running" in str(errors[0])
    assert "not reentrant" in str(errors[0])  # the 0.2.x phrase, which callers match on


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit])
def test_fatal_exceptions_propagate_out_of_poll(exc_type: type[BaseException]) -> None:
    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_ACCEPT:
            raise exc_type()

    with Manager(handler) as mgr:
        port = mgr.listen("tcp://127.0.0.1:0").local_addr[1]
        with socket.create_connection(("127.0.0.1", port)):
            with pytest.raises(exc_type):
                for _ in range(200):
                    mgr.poll(10)
            mgr.poll(0)  # the loop is usable again afterwards


def test_fatal_exception_in_timer_propagates(manager: Manager) -> None:
    def stop() -> None:
        raise KeyboardInterrupt

    manager.timer_add(0, stop, run_now=True)
    with pytest.raises(KeyboardInterrupt):
        for _ in range(50):
            manager.poll(5)


def test_error_handler_receives_exceptions_and_its_own_failure_is_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    received: list[BaseException] = []

    def error_handler(exc: BaseException) -> None:
        received.append(exc)
        raise RuntimeError("error handler broke too")

    def boom() -> None:
        raise ZeroDivisionError("timer")

    with Manager(error_handler=error_handler) as mgr, \
            caplog.at_level("ERROR", logger="cymongoose"):
        mgr.timer_add(0, boom, run_now=True)
        wait_for(lambda: bool(received), 5.0, "bool(received)", manager=mgr)
    assert isinstance(received[0], ZeroDivisionError)
    assert any(r.exc_info and r.exc_info[0] is RuntimeError for r in caplog.records)


def test_run_stops_on_sigint_and_restores_handlers() -> None:
    before = signal.getsignal(signal.SIGINT)
    mgr = Manager()
    mgr.listen("tcp://127.0.0.1:0")
    mgr.timer_add(50, lambda: os.kill(os.getpid(), signal.SIGINT))
    t0 = time.monotonic()
    mgr.run(poll_ms=1000)
    assert time.monotonic() - t0 < 2.0, "run() should wake from the signal, not the timeout"
    assert signal.getsignal(signal.SIGINT) is before
    with pytest.raises(RuntimeError):
        mgr.poll(0)


def test_keyboard_interrupt_signal_interrupts_a_long_poll() -> None:
    with Manager() as mgr:
        threading.Timer(0.1, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            for _ in range(10):
                mgr.poll(2000)
        assert time.monotonic() - t0 < 1.5


def test_unclosed_manager_warns_and_frees_its_sockets() -> None:
    mgr = Manager(lambda c, e, d: None)
    port = mgr.listen("tcp://127.0.0.1:0").local_addr[1]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del mgr
        gc.collect()
    assert any(issubclass(w.category, ResourceWarning) for w in caught)
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0, "listener socket leaked"


def test_process_with_live_managers_exits_cleanly() -> None:
    code = textwrap.dedent("""
        import cymongoose
        from cymongoose import MG_EV_HTTP_MSG
        def h(c, ev, d):
            if ev == MG_EV_HTTP_MSG:
                c.reply(200, b"x")
        keep = [cymongoose.Manager(h, enable_wakeup=True) for _ in range(3)]
        for m in keep:
            m.listen("http://127.0.0.1:0")
            m.timer_add(10, lambda: None, repeat=True)
            m.poll(1)
        orphan = cymongoose.Manager(h)
        orphan.listen("tcp://127.0.0.1:0")
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-W", "ignore", "-c", code],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_exception_inside_listen_open_event_surfaces() -> None:
    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_OPEN:
            raise KeyboardInterrupt

    with Manager(handler) as mgr, pytest.raises(KeyboardInterrupt):
        mgr.listen("tcp://127.0.0.1:0")


def test_version_and_public_names() -> None:
    assert cymongoose.__version__
    assert len(cymongoose.__all__) >= 74
    for name in cymongoose.__all__:
        assert hasattr(cymongoose, name), name
    assert callable(cymongoose.Manager) and MG_EV_HTTP_MSG == 11
