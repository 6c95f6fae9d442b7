"""Apps that block (a database, a remote call): once one stalls the loop, the WSGI server's
blocking mode runs the queued apps on the other threads, several at once, while the loop's
owner keeps polling (wsgi/turns.py). How fast is `make bench-operations`' business; here:
every app of a burst runs at once on its own thread, the answers are whole and in order per
connection, and quick apps are served right after the mode ends."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from support.http_client import HttpConnection, get
from support.waiting import wait_for
from support.wsgi_server import running_wsgi_server

from cymongoose.wsgi.turns import _STALL_S

THREADS = 6


def test_a_burst_of_blocking_apps_runs_at_once_on_every_thread() -> None:
    # Every app waits until all THREADS of them run: only a server that runs them at once
    # answers (the barrier's timeout fails the others with 500).
    barrier = threading.Barrier(THREADS, timeout=20)
    ran_on: set[int] = set()

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        if environ["PATH_INFO"] == "/block":
            barrier.wait()
            ran_on.add(threading.get_ident())
        body = environ["PATH_INFO"].encode()
        start_response("200 OK", [("Content-Type", "text/plain"),
                                  ("Content-Length", str(len(body)))])
        return [body]

    with running_wsgi_server(app, threads=THREADS) as running:
        with ThreadPoolExecutor(THREADS) as pool:
            answers = list(pool.map(lambda _: get(running.port, "/block", timeout=30),
                                    range(THREADS)))
        assert [(a.status, a.body) for a in answers] == [(200, b"/block")] * THREADS
        assert len(ran_on) == THREADS
        assert running.server._turns.blocking_until > 0  # the mode this file is about
        # Quick apps, one connection, several requests: whole answers, in order.
        with HttpConnection(running.port) as c:
            for i in range(20):
                assert c.request("GET", f"/quick{i}").body == f"/quick{i}".encode()


def test_an_idle_server_lets_its_standby_sleep_and_wakes_it_for_the_next_app() -> None:
    # Idle, the standby stops checking the owner every stall_s (200 wake-ups a second) and
    # sleeps; the first app the owner runs inline wakes it, so an app that then blocks is
    # still taken over at once (the quick request behind it is answered while it blocks),
    # not after the standby's long sleep.
    release = threading.Event()
    blocking = threading.Event()

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        if environ["PATH_INFO"] == "/block":
            blocking.set()
            release.wait(20)
        body = environ["PATH_INFO"].encode()
        start_response("200 OK", [("Content-Type", "text/plain"),
                                  ("Content-Length", str(len(body)))])
        return [body]

    with running_wsgi_server(app, threads=THREADS) as running:
        turns = running.server._turns
        assert get(running.port, "/warm").status == 200
        # Idle means the blocking mode is over too: on a starved machine /warm can take
        # longer than stall_s, which starts that mode for a second (apps then run on the
        # other threads, never inline), while the standby, scheduled only after /warm
        # ended, falls back asleep at once.
        wait_for(lambda: turns.standby_asleep and time.monotonic() >= turns.blocking_until,
                 10, "the standby asleep and the blocking mode over")
        blocked = threading.Thread(target=lambda: get(running.port, "/block", timeout=30))
        blocked.start()
        try:
            # The app's own word, not turns.current: the takeover clears that field a
            # stall_s or two after the app started, and a check of it every few ms could
            # miss that window on a starved machine (1 run in about 60 under a CPU hog).
            assert blocking.wait(10), "the blocking app never started"
            started = time.monotonic()
            answer = get(running.port, "/quick", timeout=10)
            assert answer.body == b"/quick"
            # Taken over within a few stall_s of the block; without the wake-up, the
            # standby's sleep of up to a second came first.
            assert time.monotonic() - started < 0.5
        finally:
            release.set()
            blocked.join(30)


def _apps_at_once(wait_s: float, requests_per_client: int) -> tuple[list[int], int]:
    """8 keep-alive clients on 8 threads, each app waiting `wait_s` off CPU (GIL released,
    as a socket read would be): the statuses, and the most apps seen in flight at once. The
    clients stop once two were, or after `requests_per_client` each (the bound)."""
    lock = threading.Lock()
    in_flight = 0
    most = 0
    seen_two = threading.Event()

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        nonlocal in_flight, most
        with lock:
            in_flight += 1
            most = max(most, in_flight)
            if most >= 2:
                seen_two.set()
        try:
            time.sleep(wait_s)
        finally:
            with lock:
                in_flight -= 1
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
        return [b"ok"]

    def client(port: int) -> list[int]:
        statuses = []
        with HttpConnection(port, timeout=30) as c:
            for _ in range(requests_per_client):
                if seen_two.is_set():
                    break
                statuses.append(c.request("GET", "/wait").status)
        return statuses

    with running_wsgi_server(app, threads=8) as running:
        with ThreadPoolExecutor(8) as pool:
            answers = [s for got in pool.map(client, [running.port] * 8) for s in got]
    return answers, most


def test_apps_that_wait_briefly_run_at_once() -> None:
    # An app that waits 0.3 ms per request (a database round trip's order) never stalls the
    # owner for a whole stall_s: the owner sees it waited off CPU and hands the queue to
    # the threads. Before, 8 clients on 8 threads never had two such apps in flight.
    answers, most = _apps_at_once(0.0003, 100)  # at most 800 requests
    assert answers and set(answers) == {200}
    assert most >= 2, f"{len(answers)} requests, never two apps at once"


def test_apps_that_wait_most_of_a_stall_run_at_once() -> None:
    # An app that waits 3/4 of stall_s (Django's ORM around a 1 ms query, 4 ms in all)
    # spans a look of the standby in nearly every run: the owner's check skipped each such
    # stretch, and too short to be taken over, these apps ran one at a time for good
    # (256 requests a second, the server 0.37 busy; 917 once they ran at once).
    answers, most = _apps_at_once(_STALL_S * 0.75, 10)  # at most 80 requests
    assert answers and set(answers) == {200}
    assert most >= 2, f"{len(answers)} requests, never two apps at once"


class _CountingEvent(threading.Event):
    """Counts the wake-ups made while requests are queued and no slot is free. A wake-up
    with nothing queued is not one of those: the owner may have seen the last free slot (as
    the second blocking app was about to take it) and be woken only now to act on it."""

    def __init__(self, turns: Any) -> None:
        super().__init__()
        self.sets = 0
        self._turns = turns

    def set(self) -> None:
        if self._turns.pending and not self._turns._slots:
            self.sets += 1
        super().set()


def test_queued_apps_wait_for_a_slot_without_waking_threads_and_run_when_one_frees() -> None:
    # Blocking mode, every slot taken: each poll that queues a request used to wake the
    # standby (a thread switch and a GIL hand-over, about one per request under load) to
    # find no slot. Now nobody is woken for them; the thread whose app ends takes the next
    # queued one itself, so they are still all answered once the blocked apps return.
    release = threading.Event()
    blocked_in = threading.Semaphore(0)

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        if environ["PATH_INFO"] == "/block":
            blocked_in.release()
            release.wait(20)
        body = environ["PATH_INFO"].encode()
        start_response("200 OK", [("Content-Type", "text/plain"),
                                  ("Content-Length", str(len(body)))])
        return [body]

    with running_wsgi_server(app, threads=2) as running:
        turns = running.server._turns
        with ThreadPoolExecutor(6) as pool:
            try:
                blocked = [pool.submit(get, running.port, "/block", timeout=30)
                           for _ in range(2)]
                for _ in range(2):
                    assert blocked_in.acquire(timeout=10), "the blocking apps never started"
                # Both slots are taken (and a takeover started the blocking mode; it may
                # end meanwhile on a slow machine: no slot means no wake-up either way).
                wait_for(lambda: not turns._slots, 10, "no free slot")
                turns._standby_wake = counting = _CountingEvent(turns)
                quick = [pool.submit(get, running.port, f"/quick{i}", timeout=30)
                         for i in range(4)]
                wait_for(lambda: len(turns.pending) == 4, 10, "the 4 quick requests queued")
                assert counting.sets == 0, "a thread was woken with no slot to run an app"
            finally:
                release.set()
            assert [f.result().body for f in quick] == [f"/quick{i}".encode() for i in range(4)]
            assert [f.result().status for f in blocked] == [200, 200]

