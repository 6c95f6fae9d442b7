"""Many clients at once: thousands of keep-alive connections, and running out of descriptors.

The 1,000 and 10,000 connection runs against nginx and Mongoose in C are a benchmark phase
(tests/benchmarks/run.py --phase connections); these are the bounded versions for make test.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from support.many_clients import open_many, raise_own_fd_limit, request_round
from support.waiting import wait_for

from .support import Server, ServerProcess, cm, fd_count, get, read_response

REQUEST = b"GET /scale HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
CLIENTS = 2500


def test_thousands_of_keep_alive_clients_all_answered() -> None:
    # The server starts with a soft limit of 1024 open files: only listen() raising it to the
    # hard limit lets it hold 2,500 clients.
    raise_own_fd_limit(CLIENTS)
    with ServerProcess(nofile=(1024, 8192), keepalive_timeout_ms=30000) as server:
        assert server.nofile_soft == 8192
        baseline = fd_count(server.pid)
        socks = open_many(server.port, CLIENTS, timeout=20)
        try:
            for round_no in range(2):  # the second round proves every connection kept alive
                answers = request_round(socks, REQUEST, timeout=30)
                bad = [a[:40] for a in answers if not a.startswith(b"HTTP/1.1 200 ")]
                assert not bad, (round_no, len(bad), bad[:3])
            assert fd_count(server.pid) >= baseline + CLIENTS
        finally:
            for s in socks:
                s.close()
        wait_for(lambda: fd_count(server.pid) <= baseline, 10,
                 lambda: f"fd_count(server.pid) <= baseline ({(fd_count(server.pid), baseline)})")
        assert get(server.port)[0] == 200
        summary = server.stop()
    assert summary["requests"] == 2 * CLIENTS + 1
    assert summary["errors"] == 0


def test_out_of_descriptors_pauses_accepting_without_spinning() -> None:
    # 48 descriptors, soft and hard: listen() cannot raise it, so accept() fails with EMFILE
    # while clients wait in the backlog. The server must log once, idle (no busy loop on the
    # ever-readable listener), keep its accepted clients served, and accept again once
    # descriptors are free.
    with ServerProcess(nofile=(48, 48), capture_stderr=True,
                       keepalive_timeout_ms=60000) as server:
        held = open_many(server.port, 60, timeout=10)
        try:
            # Some of them were accepted and can be served; the others are in the backlog.
            time.sleep(0.5)
            cpu_before = server.cpu_seconds()
            time.sleep(1.5)
            spent = server.cpu_seconds() - cpu_before
            assert spent < 0.5, f"server used {spent:.2f} s of CPU in 1.5 s while out of fds"
            assert fd_count(server.pid) <= 48
            answered = request_round(held[:5], REQUEST, timeout=10)
            assert all(a.startswith(b"HTTP/1.1 200 ") for a in answered)
        finally:
            for s in held[5:]:
                s.close()
        # Descriptors are free again: the clients of the first five are still served, and
        # a fresh client is accepted (after the pause) and answered.
        assert all(a.startswith(b"HTTP/1.1 200 ") for a in request_round(held[:5], REQUEST, 10))
        for s in held[:5]:
            s.close()
        assert get(server.port, timeout=10)[0] == 200
        fresh = open_many(server.port, 20, timeout=10)
        try:
            assert all(a.startswith(b"HTTP/1.1 200 ") for a in request_round(fresh, REQUEST, 10))
        finally:
            for s in fresh:
                s.close()
        server.stop()
        log = server.stderr_text()
    assert log.count("accept() failed") >= 1, log
    # Once per episode, not once per attempt: a spinning loop would log thousands of times.
    assert log.count("accept() failed") <= 3, log[:2000]
    assert "Too many open files" in log


def test_listen_raises_the_soft_open_file_limit() -> None:
    with ServerProcess(nofile=(256, 4096)) as server:
        assert server.nofile_soft == 4096
        assert get(server.port)[0] == 200


def test_idle_connections_skipped_by_the_loop_still_keep_their_rules() -> None:
    # A handler that does not take MG_EV_POLL lets the loop skip idle keep-alive connections
    # until their deadline (build_fixes.py QUIET_SKIP). Each must still time out on time,
    # answer its next request, close when told, and take MG_EV_POLL again once its handler
    # wants it.
    polled: list[int] = []

    @cm.handles(cm.MG_EV_HTTP_MSG)
    def app(conn: Any, ev: int, msg: Any) -> None:
        conn.reply(200, b"hi")

    def wants_poll(conn: Any, ev: int, data: Any) -> None:
        if ev == cm.MG_EV_POLL:
            polled.append(conn.id)

    with Server(app, keepalive_timeout_ms=400) as server:
        request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
        # Times out at its keep-alive deadline although nothing polls it in between.
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(request)
            buf = bytearray()
            assert read_response(sock, buf)[0] == 200
            start = time.monotonic()
            assert sock.recv(1) == b""
            assert 0.3 < time.monotonic() - start < 1.5
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            buf = bytearray()
            sock.sendall(request)
            assert read_response(sock, buf)[0] == 200
            time.sleep(0.15)  # quiet now: its next request still wakes it
            sock.sendall(request)
            assert read_response(sock, buf)[0] == 200
            time.sleep(0.15)
            conns = server.call(lambda: [c for c in server.mgr.connections
                                         if c is not server.listener])
            assert len(conns) == 1
            server.call(lambda: conns[0].set_handler(wants_poll))
            wait_for(lambda: len(polled) >= 3, 2, "len(polled) >= 3")  # polled again at once
            server.call(conns[0].close)  # and closed when told, well before its deadline
            start = time.monotonic()
            assert sock.recv(1) == b""
            assert time.monotonic() - start < 0.3


def test_a_quiet_connection_whose_client_leaves_is_closed_at_once() -> None:
    # Found by the soak: the loop marked an idle keep-alive connection quiet in the same
    # iteration that then read the client's EOF, so the connection (and its descriptor)
    # waited, skipped, for its keep-alive deadline. The WSGI server's handler is such a
    # handler (no MG_EV_POLL).
    @cm.handles(cm.MG_EV_HTTP_MSG)
    def app(conn: Any, ev: int, msg: Any) -> None:
        conn.reply(200, b"hi")

    with Server(app, keepalive_timeout_ms=60000) as server:
        for pause in (0.0, 0.15):  # before and after the loop marks it quiet
            with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
                sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                assert read_response(sock, bytearray())[0] == 200
                time.sleep(pause)
            wait_for(lambda: server.connection_count() == 0, 10,
                     f"server.connection_count() == 0 (pause {pause})")
