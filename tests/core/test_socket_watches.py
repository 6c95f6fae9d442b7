"""`Manager.watch_changes()` / `unwatch_all()`: the per-socket watches an outer loop keeps when
Mongoose has no epoll descriptor (aio.LoopDriver on macOS; make test-poll on Linux). The
primitive walks the connections whatever the backend, so these run on both builds."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from support.waiting import wait_for
from support.watched_sockets import assert_watched_are_the_managers, socket_names

from cymongoose import MG_EV_CLOSE, MG_EV_CONNECT, Connection, Manager
from cymongoose._mongoose import WATCH_READ, WATCH_WRITE

pytestmark = pytest.mark.timeout(60)

RW = WATCH_READ | WATCH_WRITE


def apply(model: dict[int, int], changes: list[tuple[int, int, int]] | None) -> None:
    """What an outer loop does with the changes, checking each against what it holds."""
    for fd, was, now in changes or ():
        assert model.get(fd, 0) == was, (fd, was, now, model)
        if now:
            model[fd] = now
        else:
            del model[fd]


def test_a_listener_is_watched_for_reading_and_dropped_when_closed(manager: Manager) -> None:
    assert manager.watch_changes() is None
    lsn = manager.listen("tcp://127.0.0.1:0")
    changes = manager.watch_changes()
    assert changes is not None and len(changes) == 1 and changes[0][1:] == (0, WATCH_READ)
    assert manager.watch_changes() is None  # nothing changed since
    lsn.close()
    manager.poll(0)
    assert manager.watch_changes() == [(changes[0][0], WATCH_READ, 0)]


def test_a_connecting_client_is_watched_for_writing_until_it_connects(
        manager: Manager) -> None:
    model: dict[int, int] = {}
    port = manager.listen("tcp://127.0.0.1:0").local_addr[1]
    connected: list[Connection] = []

    def on_client(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_CONNECT:
            connected.append(conn)

    manager.connect(f"tcp://127.0.0.1:{port}", on_client)
    changes = manager.watch_changes()
    apply(model, changes)
    assert sorted(model.values()) == [WATCH_READ, RW]  # the listener; the pending connect
    wait_for(lambda: connected, 5, "the client to connect", manager=manager)
    apply(model, manager.watch_changes())
    assert sorted(model.values()) == [WATCH_READ] * 3  # listener, client, accepted
    assert_watched_are_the_managers(manager, model)


def test_queued_output_is_watched_for_writing_and_a_paused_reader_is_not_read(
        manager: Manager) -> None:
    model: dict[int, int] = {}
    port = manager.listen("tcp://127.0.0.1:0").local_addr[1]
    with socket.create_connection(("127.0.0.1", port)) as client:
        wait_for(lambda: len(manager.connections) == 2, 5, "the accept", manager=manager)
        apply(model, manager.watch_changes())
        accepted = next(c for c in manager.connections if not c.is_listening)
        fd = next(fd for fd in model if socket_names(fd)[1] is not None)
        accepted.send(b"x")  # queued: it leaves in the next poll
        apply(model, manager.watch_changes())
        assert model[fd] == RW
        manager.poll(0)
        apply(model, manager.watch_changes())
        assert model[fd] == WATCH_READ
        assert client.recv(1) == b"x"
        accepted.pause_reading()
        apply(model, manager.watch_changes())
        assert fd not in model
        accepted.pause_reading(False)
        apply(model, manager.watch_changes())
        assert model[fd] == WATCH_READ


def test_udp_sockets_and_the_wakeup_pipe_are_watched() -> None:
    with Manager(enable_wakeup=True) as manager:
        model: dict[int, int] = {}
        apply(model, manager.watch_changes())
        assert list(model.values()) == [WATCH_READ]  # the wakeup pipe
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as peer:
            peer.bind(("127.0.0.1", 0))
            conn = manager.connect(f"udp://127.0.0.1:{peer.getsockname()[1]}")
            apply(model, manager.watch_changes())
            assert sorted(model.values()) == [WATCH_READ, WATCH_READ]
            conn.send(b"ping")  # a datagram leaves at once: nothing queued to watch for
            assert manager.watch_changes() is None
            assert peer.recv(10) == b"ping"


def test_a_number_taken_again_in_the_same_poll_is_dropped_before_it_is_added(
        manager: Manager) -> None:
    # A handler opens a socket at the MG_EV_CLOSE of another, whose descriptor Mongoose has
    # just closed: the new socket takes the same number within one poll.
    model: dict[int, int] = {}
    port = manager.listen("tcp://127.0.0.1:0").local_addr[1]
    reopened: list[Connection] = []

    def on_close(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_CLOSE and not reopened:
            reopened.append(manager.connect(f"tcp://127.0.0.1:{port}"))

    first = manager.connect(f"tcp://127.0.0.1:{port}", on_close)
    apply(model, manager.watch_changes())
    fd = next(fd for fd, events in model.items() if events == RW)
    first.close()
    manager.poll(0)
    assert reopened
    changes = manager.watch_changes()
    assert changes is not None
    mine = [change for change in changes if change[0] == fd]
    assert mine == [(fd, RW, 0), (fd, 0, RW)], changes
    first_add = next(i for i, change in enumerate(changes) if change[1] == 0)
    assert all(change[2] == 0 for change in changes[:first_add])  # drops, then adds
    apply(model, changes)


def test_hundreds_of_connections_opening_and_closing_keep_the_watches_right(
        manager: Manager) -> None:
    model: dict[int, int] = {}
    port = manager.listen("tcp://127.0.0.1:0").local_addr[1]
    clients: list[socket.socket] = []
    try:
        for round_ in range(10):
            for _ in range(40):
                clients.append(socket.create_connection(("127.0.0.1", port)))
            # Close some of the old ones and some of the new ones, unevenly.
            for client in clients[round_ % 3::3]:
                client.close()
            clients = [c for c in clients if c.fileno() >= 0]
            open_now = len(clients)
            wait_for(lambda n=open_now: len(manager.connections) == n + 1, 10,
                     "the server to see every open client, and no closed one",
                     manager=manager)
            apply(model, manager.watch_changes())
            assert_watched_are_the_managers(manager, model)
    finally:
        for client in clients:
            client.close()
    wait_for(lambda: len(manager.connections) == 1, 10, "every client's close",
             manager=manager)
    apply(model, manager.watch_changes())
    assert_watched_are_the_managers(manager, model)


def test_unwatch_all_lists_every_watch_and_works_after_close() -> None:
    manager = Manager(enable_wakeup=True)
    model: dict[int, int] = {}
    manager.listen("tcp://127.0.0.1:0")
    apply(model, manager.watch_changes())
    assert len(model) == 2
    manager.close()
    with pytest.raises(RuntimeError):
        manager.watch_changes()
    apply(model, manager.unwatch_all())
    assert model == {}
    assert manager.unwatch_all() == []
