"""@handles(): a handler receives only the events it declares; bookkeeping is unchanged."""

from __future__ import annotations

import http.client
import socket
from typing import Any

import pytest
from support.waiting import wait_for

from cymongoose import (
    MG_EV_ACCEPT,
    MG_EV_HTTP_MSG,
    MG_EV_POLL,
    MG_EV_WAKEUP,
    Connection,
    Manager,
    handles,
)

pytestmark = pytest.mark.timeout(30)


def test_only_declared_events_arrive_and_500_still_works(server_thread: Any) -> None:
    seen: list[int] = []

    @handles(MG_EV_HTTP_MSG)
    def handler(conn: Connection, ev: int, msg: Any) -> None:
        seen.append(ev)
        if msg.uri == "/boom":
            raise ValueError("boom")
        conn.reply(200, b"ok")

    st = server_thread(handler, error_handler=lambda exc: None)
    port = st.listen()
    st.start()
    for path, status in (("/", 200), ("/boom", 500), ("/", 200)):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", path)
        assert c.getresponse().status == status
        c.close()
    st.stop()
    assert seen == [MG_EV_HTTP_MSG] * 3
    assert st.manager.connections == ()


def test_switching_handler_switches_the_selection() -> None:
    seen: dict[str, set[int]] = {"a": set(), "b": set()}

    @handles(MG_EV_ACCEPT, MG_EV_WAKEUP)
    def picky(conn: Connection, ev: int, data: Any) -> None:
        seen["a"].add(ev)
        if ev == MG_EV_ACCEPT:
            conn.set_handler(everything)

    def everything(conn: Connection, ev: int, data: Any) -> None:
        seen["b"].add(ev)

    with Manager(enable_wakeup=True) as mgr:
        lst = mgr.listen("tcp://127.0.0.1:0", picky)
        assert mgr.wakeup(lst.id, b"x")
        with socket.create_connection(("127.0.0.1", lst.local_addr[1])):
            wait_for(lambda: MG_EV_POLL in seen["b"], 5.0, 'MG_EV_POLL in seen["b"]', manager=mgr)
    assert seen["a"] == {MG_EV_ACCEPT, MG_EV_WAKEUP}
    assert MG_EV_POLL in seen["b"]


def test_bad_selections() -> None:
    with pytest.raises(ValueError):
        handles(64)
    with pytest.raises(TypeError):
        handles("http")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        handles(MG_EV_POLL)(42)  # type: ignore[type-var]
