"""The TechEmpower-style apps on our servers against a real PostgreSQL (issue 35): Flask and
Django on the WSGI server, FastAPI and Django on the ASGI server, each started by the command
line. Every endpoint passes TechEmpower's verify step; updates reach the table; many clients
at once all get their rows; and when the database goes away the apps answer 500 while the
server keeps serving, then recover once it is back. No timing is asserted: every wait is on a
condition, bounded."""

from __future__ import annotations

import http.client
import json
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support.ports import free_port
from support.waiting import wait_for

from realworld.postgres_cluster import PostgresCluster
from realworld.served_app import APPS, ServedApp
from realworld.techempower_verify import verify

pytestmark = pytest.mark.timeout(180)

# A request's bound: the apps' pools give up on a gone database within a few seconds.
REQUEST_TIMEOUT_S = 30.0
RECOVERY_TIMEOUT_S = 60.0
CLIENTS = 16
REQUESTS_EACH = 20
POOL_SIZE = 16  # the apps' pools (REALWORLD_POOL's default, served_app.py)


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresCluster]:
    # Not tmp_path: pytest's folder is closed to the postgres user the cluster runs as.
    directory = Path(tempfile.mkdtemp(prefix="cymongoose-realworld-"))
    with PostgresCluster(directory, free_port()) as pg:
        pg.start()
        pg.seed()
        yield pg


@pytest.fixture(scope="module", params=list(APPS))
def app(request: pytest.FixtureRequest, cluster: PostgresCluster) -> Iterator[ServedApp]:
    with ServedApp(request.param, cluster.dsn) as served:
        yield served


def _get(app: ServedApp, target: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", app.port, timeout=REQUEST_TIMEOUT_S)
    try:
        conn.request("GET", target)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _table(cluster: PostgresCluster) -> dict[int, int]:
    import psycopg

    with psycopg.connect(cluster.dsn, connect_timeout=10) as conn:
        return dict(conn.execute("SELECT id, randomnumber FROM world").fetchall())


def test_every_endpoint_passes_techempowers_verify_step(app: ServedApp) -> None:
    assert verify(app.base_url) == [], app.log()


def test_updates_write_the_numbers_they_answer(app: ServedApp,
                                               cluster: PostgresCluster) -> None:
    before = _table(cluster)
    status, body = _get(app, "/updates?queries=20")
    assert status == 200, body
    answered = {row["id"]: row["randomNumber"] for row in json.loads(body)}
    after = _table(cluster)
    assert len(answered) == 20
    assert {i: after[i] for i in answered} == answered
    # Only those rows moved, and (each keeping its number by chance 1 in 10,000) they did.
    assert {i for i in after if after[i] != before[i]} <= set(answered)
    assert any(after[i] != before[i] for i in answered)


def test_many_clients_at_once_all_get_their_rows(app: ServedApp) -> None:
    failures: list[str] = []
    counts = {"ok": 0}
    lock = threading.Lock()

    def client(k: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", app.port, timeout=REQUEST_TIMEOUT_S)
        try:
            for n in range(REQUESTS_EACH):
                target, rows = ("/db", None) if (k + n) % 2 else ("/queries?queries=5", 5)
                conn.request("GET", target)
                resp = conn.getresponse()
                body = resp.read()
                value = json.loads(body) if resp.status == 200 else None
                good = value is not None and (
                    isinstance(value, dict) if rows is None else len(value) == rows)
                with lock:
                    if good:
                        counts["ok"] += 1
                    else:
                        failures.append(f"{target}: {resp.status} {body[:200]!r}")
        except (OSError, http.client.HTTPException, ValueError) as exc:
            with lock:
                failures.append(repr(exc))
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(REQUEST_TIMEOUT_S * REQUESTS_EACH)
    assert not any(t.is_alive() for t in threads), "a client is still waiting"
    assert failures == [], app.log()[-3000:]
    assert counts["ok"] == CLIENTS * REQUESTS_EACH


def test_clients_that_leave_before_their_answer_cost_the_app_no_pooled_connection(
        app: ServedApp) -> None:
    # wrk ends each run by closing its 64 keep-alive connections, their requests queued for
    # the pool (16 connections) or running. On the ASGI server an answer sent after that
    # raised an OSError (spec 2.4), and Django's handler then skipped request_finished: the
    # request's pooled connection never came back (6 to 14 per 3 s run), and two or three
    # runs later every query waited for the pool and failed (500). Now, as on uvicorn, such
    # a send is dropped quietly. wrk, not a script: its ending is what found it (by hand,
    # server and wrk pinned to a CPU each; here the old build did not always leak, so
    # tests/adapters/asgi's send-after-disconnect test is the one that must fail on it).
    if app.name != "django-asgi":
        pytest.skip("the leak was Django's ASGI handler's; the others' pools are checked "
                    "by the many-clients test")
    for _ in range(3):
        subprocess.run(["wrk", "-t1", "-c64", "-d2s", "--timeout", "10s",
                        f"http://127.0.0.1:{app.port}/db"],
                       check=True, capture_output=True, timeout=60)

    def pool_whole() -> bool:
        # Every pooled connection in use at once, each query answered: none went missing.
        with ThreadPoolExecutor(POOL_SIZE) as pool:
            return all(status == 200 for status, _ in pool.map(
                lambda _: _get(app, "/db"), range(POOL_SIZE)))

    wait_for(pool_whole, RECOVERY_TIMEOUT_S, f"{app.name}'s pool whole again after "
             "clients left early", interval=0.2)
    assert "Traceback" not in app.log(), app.log()[-3000:]


def test_a_gone_database_is_a_500_and_the_server_keeps_serving(
        app: ServedApp, cluster: PostgresCluster) -> None:
    assert _get(app, "/db")[0] == 200
    cluster.stop()
    try:
        # The pooled connections die with the server, then the pool finds none: both a 500,
        # each within the request's bound (an unanswered request fails the test by timeout).
        for _ in range(3):
            status, body = _get(app, "/db")
            assert status == 500, body
        status, body = _get(app, "/json")
        assert status == 200 and json.loads(body) == {"message": "Hello, World!"}
        wait_for(lambda: "Traceback" in app.log(), 10, "the error in the server's log")
    finally:
        cluster.start()
    wait_for(lambda: _get(app, "/db")[0] == 200, RECOVERY_TIMEOUT_S,
             f"{app.name} to answer /db again", interval=0.2)
