"""Several Managers, each polled by a thread of its own, serving at once: what one loop
remembers between requests (the last client address's text, header names and their WSGI and
ASGI forms) must never leak into another's requests, and Managers must start, serve and close
side by side. On free-threaded Python with the GIL off (make test-py313t) the loops really
run in parallel; with the GIL they interleave, which checks the same bookkeeping."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from typing import Any

from support.poll_thread import ServerThread
from support.waiting import wait_for

from cymongoose import MG_EV_HTTP_MSG, Connection, HttpMessage, Manager

LOOPS = 3
CLIENTS_PER_LOOP = 4
REQUESTS = 60


def _echo(conn: Connection, ev: int, msg: Any) -> None:
    # What the WSGI and ASGI servers build from the request, made by the core's C.
    if ev != MG_EV_HTTP_MSG:
        return
    assert isinstance(msg, HttpMessage)
    env = msg.wsgi_environ({}, conn)
    scope = msg.asgi_scope({}, conn, {})
    body = json.dumps({
        "remote": env["REMOTE_ADDR"],
        "client": scope["client"][0],
        "environ": {k: v for k, v in env.items() if k.startswith("HTTP_X_")},
        "scope": [[n.decode(), v.decode()] for n, v in scope["headers"] if n.startswith(b"x-")],
    })
    conn.reply(200, body, headers={"Content-Type": "application/json"})


class _SourceConnection(http.client.HTTPConnection):
    """An HTTP client bound to a loopback source address of its own (127.0.0.x)."""

    def __init__(self, port: int, source: str) -> None:
        super().__init__("127.0.0.1", port, timeout=30, source_address=(source, 0))


def _client(loop: int, k: int, port: int, failures: list[str]) -> None:
    source = f"127.0.0.{2 + k}"
    conn = _SourceConnection(port, source)
    try:
        for i in range(REQUESTS):
            # Names and their order differ per client and per request: a header-name slot
            # or cache shared by two loops would hand one the other's names.
            names = [f"X-L{loop}-C{k}-{j}" for j in range((i % 5) + 1)]
            if i % 2:
                names.reverse()
            headers = {n: f"{loop}.{k}.{i}.{n}" for n in names}
            conn.request("GET", "/", headers=headers)
            got = json.loads(conn.getresponse().read())
            want_env = {"HTTP_" + n.upper().replace("-", "_"): v for n, v in headers.items()}
            want_scope = [[n.lower(), v] for n, v in headers.items()]
            if (got["remote"], got["client"]) != (source, source):
                failures.append(f"loop {loop} client {k}: address {got['remote']!r} / "
                                f"{got['client']!r}, not {source}")
            if got["environ"] != want_env or got["scope"] != want_scope:
                failures.append(f"loop {loop} client {k} request {i}: headers {got}")
    except BaseException as exc:  # reported by the test
        failures.append(f"loop {loop} client {k}: {exc!r}")
    finally:
        conn.close()


def _sources_available() -> bool:
    # Linux routes all of 127.0.0.0/8 to loopback; elsewhere only 127.0.0.1 may exist.
    try:
        with socket.socket() as s:
            s.bind((f"127.0.0.{1 + CLIENTS_PER_LOOP}", 0))
        return True
    except OSError:
        return False


def test_loops_on_threads_keep_client_addresses_and_header_names_apart() -> None:
    assert _sources_available(), "127.0.0.2-5 must be usable as source addresses"
    loops = [ServerThread(_echo) for _ in range(LOOPS)]  # each a Manager on its own thread
    ports = [lp.listen() for lp in loops]
    for lp in loops:
        lp.start()
    failures: list[str] = []
    try:
        clients = [threading.Thread(target=_client, args=(n, k, port, failures), daemon=True)
                   for n, port in enumerate(ports) for k in range(CLIENTS_PER_LOOP)]
        for c in clients:
            c.start()
        for c in clients:
            c.join(timeout=120)
        assert not any(c.is_alive() for c in clients), "clients still running after 120 s"
    finally:
        for lp in loops:
            lp.stop()
    assert failures == []
    assert [lp.errors for lp in loops] == [[]] * LOOPS


def test_managers_start_serve_and_close_side_by_side() -> None:
    # Each thread makes a Manager, serves one request from its own client thread, closes it;
    # all at once, several rounds.
    results: list[str] = []

    def one_loop() -> None:
        mgr = Manager(_echo)
        try:
            port = mgr.listen("http://127.0.0.1:0").local_addr[1]
            reply: list[Any] = []

            def ask() -> None:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                try:
                    c.request("GET", "/", headers={"X-Side": "by-side"})
                    reply.append(json.loads(c.getresponse().read()))
                except BaseException as exc:  # reported below
                    reply.append(exc)
                finally:
                    c.close()

            asker = threading.Thread(target=ask, daemon=True)
            asker.start()
            wait_for(lambda: reply, 30, "the reply", manager=mgr, poll_ms=20)
            asker.join(timeout=30)
            ok = isinstance(reply[0], dict) and reply[0]["environ"] == {"HTTP_X_SIDE": "by-side"}
            results.append("ok" if ok else repr(reply[0]))
        except BaseException as exc:  # reported by the test
            results.append(repr(exc))
        finally:
            mgr.close()

    for _ in range(3):
        barrier = threading.Barrier(6)

        def start(barrier: threading.Barrier = barrier) -> None:
            barrier.wait(timeout=30)
            one_loop()

        threads = [threading.Thread(target=start, daemon=True) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=90)
        assert not any(t.is_alive() for t in threads)
    assert results == ["ok"] * 18
