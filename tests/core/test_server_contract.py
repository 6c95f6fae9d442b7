"""The contract between the core and the servers' Python is typed (_mongoose.pxd): every
object the C code calls a method of has a C base declaring its hooks, the servers' classes
derive from those bases and override every hook, a base hook raises NotImplementedError
naming itself, and a subclass that misses one fails at its class statement, not at a
request."""

from __future__ import annotations

import asyncio
import collections
import re
import time
from pathlib import Path
from typing import Any

import pytest

from cymongoose import _mongoose as core
from cymongoose._mongoose import (
    ASGICycle,
    ASGIHTTPExchange,
    ASGILoop,
    ASGIServerState,
    ASGIWaiter,
    WSGIExchange,
    WSGILoop,
    WSGITurns,
)
from cymongoose.asgi.admission import Admission
from cymongoose.asgi.http import _HTTPCycle
from cymongoose.asgi.shared import _Waiter
from cymongoose.asgi.state import ServerState as ASGIState
from cymongoose.asgi.websocket import _WSCycle
from cymongoose.wsgi.exchange import _Exchange
from cymongoose.wsgi.loop import ServerLoop
from cymongoose.wsgi.turns import _LoopTurns

PXD = Path(__file__).resolve().parents[2] / "src" / "cymongoose" / "_mongoose.pxd"

# Each hook base and the servers' classes the core gets in its place.
SERVER_CLASSES: dict[type, tuple[type, ...]] = {
    WSGIExchange: (_Exchange,),
    WSGITurns: (_LoopTurns,),
    WSGILoop: (ServerLoop,),
    ASGIServerState: (ASGIState,),
    ASGIWaiter: (_Waiter,),
    ASGICycle: (_HTTPCycle, _WSCycle),
    ASGIHTTPExchange: (_HTTPCycle,),
    ASGILoop: (Admission,),
}
# Hooks that are Python attributes rather than cpdef methods: the app is given them.
ASYNC_HOOKS: dict[type, tuple[str, ...]] = {ASGICycle: ("receive", "send")}


def _declared_hooks(base: type) -> tuple[str, ...]:
    """The cpdef hooks `base` declares in _mongoose.pxd (a leading underscore marks a method
    the C class implements itself, such as ASGIHTTPExchange._finish)."""
    text = PXD.read_text()
    block = re.search(rf"^cdef class {base.__name__}\b.*?(?=^\S)", text + "\nend",
                      re.S | re.M)
    assert block, f"{base.__name__} is not declared in _mongoose.pxd"
    names = re.findall(r"^\s+cpdef (?:\w+ )?([a-z]\w*)\(", block.group(0), re.M)
    return (*ASYNC_HOOKS.get(base, ()), *names)


def _bare(base: type) -> Any:
    """An instance of the base itself, whose hooks are all unimplemented."""
    if base is WSGIExchange:
        return WSGIExchange(None, None, {}, False)
    if base is ASGIHTTPExchange:
        return ASGIHTTPExchange(ASGIServerState(), None, {})
    return base()


def _hook_args(base: type, name: str) -> tuple[Any, ...]:
    if name in ("protocol_error", "app_failed"):
        return (None, ValueError("x"))
    if name in ("write_step",):
        return (None, 1, None)
    if name in ("finish_app", "timed_out_app_returned", "admit_request"):
        return (None, None)
    if name == "admit_websocket":
        return (None, None, {})
    if name in ("log_access", "stream", "app_done", "send", "send_slow", "resume_app"):
        return (None,)
    return ()


def test_the_hook_bases_are_the_core_classes_the_pxd_declares() -> None:
    for base in SERVER_CLASSES:
        assert getattr(core, base.__name__) is base
        assert _declared_hooks(base), f"{base.__name__} declares no hook"


@pytest.mark.parametrize("base", list(SERVER_CLASSES), ids=lambda b: b.__name__)
def test_the_servers_classes_derive_from_the_base_and_override_every_hook(base: type) -> None:
    for cls in SERVER_CLASSES[base]:
        assert issubclass(cls, base), f"{cls.__qualname__} does not derive from {base.__name__}"
        for name in _declared_hooks(base):
            owner = next(k for k in cls.__mro__ if name in k.__dict__)
            assert owner is not base, f"{cls.__qualname__} leaves {name}() to {base.__name__}"


@pytest.mark.parametrize("base", list(SERVER_CLASSES), ids=lambda b: b.__name__)
def test_a_base_hook_raises_not_implemented_error_naming_itself(base: type) -> None:
    obj = _bare(base)
    for name in _declared_hooks(base):
        if name in base.__dict__:  # (ASGIHTTPExchange implements ASGICycle's receive/send)
            with pytest.raises(NotImplementedError, match=rf"^{base.__name__}\.{name}\(\)"):
                result = getattr(obj, name)(*_hook_args(base, name))
                if asyncio.iscoroutine(result):
                    asyncio.run(result)


def test_a_subclass_missing_a_hook_fails_at_its_class_statement() -> None:
    with pytest.raises(TypeError, match=r"WSGITurns\.wake_standby\(\)"):
        class Renamed(WSGITurns):  # the Python side renamed its hook
            def wake_the_standby(self) -> None:
                pass

    with pytest.raises(TypeError, match=r"ASGIHTTPExchange\.receive_slow\(\), "
                                        r"ASGICycle\.cancelled\(\);"):
        class Incomplete(ASGIHTTPExchange):  # receive()/send() come from the C class
            def gone(self) -> None:
                pass

            def app_done(self, exc: BaseException | None) -> None:
                pass

            async def send_slow(self, message: Any) -> None:
                pass


def test_mixins_say_partial_and_the_class_combining_them_is_checked() -> None:
    class Loop(WSGILoop, partial=True):
        def write_step(self, ex: Any, op: int, arg: Any) -> None:
            pass

    with pytest.raises(TypeError, match=r"WSGILoop\.protocol_error\(\)"):
        class Combined(Loop):
            pass


class _Turns(WSGITurns):
    def __init__(self) -> None:
        self.woken = 0
        self.waits_seen = 0

    def wake_standby(self) -> None:
        self.woken += 1
        self.standby_asleep = False

    def apps_wait(self) -> None:
        self.waits_seen += 1


class _Ex(WSGIExchange):
    def stream(self, data: Any) -> None:
        pass

    def feed_input(self) -> None:
        pass

    def gone(self) -> None:
        pass


class _Loop(WSGILoop):
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def write_step(self, ex: Any, op: int, arg: Any) -> None:
        self.calls.append(("write_step", op))

    def protocol_error(self, ex: Any, exc: BaseException) -> None:
        self.calls.append(("protocol_error", exc))

    def log_access(self, ex: Any) -> None:
        self.calls.append(("log_access", ex))

    def finish_app(self, ex: Any, result: Any) -> None:
        self.calls.append(("finish_app", result))

    def app_failed(self, ex: Any, exc: BaseException) -> None:
        self.calls.append(("app_failed", exc))

    def timed_out_app_returned(self, ex: Any, slots: Any) -> None:
        self.calls.append(("timed_out_app_returned", ex))

    def resume_app(self, ex: Any) -> None:
        self.calls.append(("resume_app", ex.resumed))


def test_run_batch_reaches_the_python_overrides_through_the_typed_bases() -> None:
    loop, turns, me = _Loop(), _Turns(), object()
    loop.pending = collections.deque([_Ex(None, None, {}, False), _Ex(None, None, {}, False)])
    loop.outbox = collections.deque()
    turns.owner, turns.standby_asleep = me, True
    failure = ValueError("app failed")
    results: list[Any] = [iter(()), failure]

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        result = results.pop(0)
        if isinstance(result, BaseException):
            raise result
        return result

    slots: collections.deque[None] = collections.deque([None])
    loop.run_batch(turns, me, app, slots)
    assert turns.woken == 1  # the standby slept: woken for the first inline app only
    assert [c[0] for c in loop.calls] == ["finish_app", "app_failed"]
    assert loop.calls[1][1] is failure
    assert turns.current is None and list(slots) == [None]
    with pytest.raises(TypeError):
        loop.run_batch(object(), me, app, slots)  # type: ignore[arg-type]


def test_run_batch_gives_a_resumed_exchange_to_resume_app_not_the_app() -> None:
    loop, turns, me = _Loop(), _Turns(), object()
    ex = _Ex(None, None, {}, False)
    ex.resumed = pair = ([b"x"], iter([b"x"]))
    loop.pending = collections.deque([ex])
    loop.outbox = collections.deque()
    turns.owner = me

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        raise AssertionError("a resumed exchange's app must not run again")

    slots: collections.deque[None] = collections.deque([None])
    loop.run_batch(turns, me, app, slots, True)
    assert loop.calls == [("resume_app", pair)]
    assert list(slots) == [None] and ex.app_phase == 2


def test_run_batch_tells_apps_that_wait_off_cpu_from_apps_that_compute() -> None:
    # The owner's inline apps: ones that sleep 1 ms (off CPU, as a database round trip)
    # make run_batch() call apps_wait() and leave the rest of the queue to the threads;
    # apps that only compute never do.
    loop, turns, me = _Loop(), _Turns(), object()
    loop.outbox = collections.deque()
    turns.owner = me

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("wait"):
            time.sleep(0.001)
        else:
            sum(range(2000))
        return iter(())

    slots: collections.deque[None] = collections.deque([None])
    loop.pending = collections.deque(_Ex(None, None, {}, False) for _ in range(50))
    loop.run_batch(turns, me, app, slots)
    assert turns.waits_seen == 0 and not loop.pending

    # Judged after each app that waited (each takes over the 0.15 ms between checks); the
    # second in a row starts the mode (one alone may be the owner held up by a thread).
    loop.pending = collections.deque(_Ex(None, None, {"wait": True}, False) for _ in range(4))
    loop.run_batch(turns, me, app, slots)
    assert turns.waits_seen == 1
    assert len(loop.pending) == 2  # the rest: for the threads, not one after another here


class _Cycle(ASGICycle):
    __slots__ = ("ended",)

    def __init__(self) -> None:
        self.scope = {"type": "http"}
        self.ended: list[Any] = []

    async def receive(self) -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        pass

    def gone(self) -> None:
        self.ended.append("gone")

    def app_done(self, exc: BaseException | None) -> None:
        self.ended.append(exc)

    def cancelled(self) -> None:
        self.ended.append("cancelled")


class _Admission(ASGILoop):
    def admit_request(self, conn: Any, msg: Any) -> None:
        pass

    def admit_websocket(self, conn: Any, msg: Any, scope: dict[str, Any]) -> None:
        pass


def test_run_app_reaches_the_cycles_python_hooks() -> None:
    failure = RuntimeError("the app failed")

    async def failing(scope: Any, receive: Any, send: Any) -> None:
        assert await receive() == {"type": "http.disconnect"}
        raise failure

    async def returning(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200})

    for app, expected in ((failing, [failure]), (returning, [None])):
        loop = _Admission()
        loop.app = app
        loop.tasks = set()
        loop.exchange_type = _HTTPCycle
        cycle = _Cycle()
        asyncio.run(loop.run_app(cycle))
        assert cycle.ended == expected
    with pytest.raises(TypeError):
        asyncio.run(_Admission().run_app(object()))  # type: ignore[arg-type]
