"""The production options end to end, through the supervisor in a subprocess: memory
recycling under a request loop, health answers and refused connections while the workers
drain, and the metrics document of every worker (read with prometheus_client's parser;
HTTP/1.1 and HTTP/2 requests apart) across a worker killed between two scrapes."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import time
import urllib.request
from pathlib import Path

import h11
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.cli_run import CLI, LoadClient, run_cli
from support.http_client import IncompleteResponse, get
from support.ports import free_port
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(90)

OPS_APP = '''\
import os
import time

HOARD = []


def app(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/grow" and len(HOARD) < 120:
        HOARD.append(b"x" * (1 << 20))  # written, so resident: 1 MiB per request
    elif path == "/sleep":
        time.sleep(0.1)
    elif path == "/wait":
        gate = environ["QUERY_STRING"]  # answered once the test creates this file
        open(gate + ".in", "w").close()  # the test waits for this: the app has the request
        deadline = time.monotonic() + 30
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.01)
    body = f"{os.getpid()}|{path}".encode()
    status = "404 Not Found" if path == "/missing" else "200 OK"
    start_response(status, [("Content-Type", "text/plain"),
                            ("Content-Length", str(len(body)))])
    return [body]
'''


def _start(tmp_path: Path, port: int, *options: str) -> CLI:
    (tmp_path / "ops_app.py").write_text(OPS_APP)
    cli = CLI(tmp_path, "ops_app:app", "--port", str(port), *options)
    cli.wait_http(port)
    return cli


def test_a_worker_past_the_memory_limit_is_replaced_without_a_failed_request(
        tmp_path: Path) -> None:
    port = free_port()
    cli = _start(tmp_path, port, "--workers", "1", "--threads", "2",
                 "--workers-max-rss", "80", "--graceful-timeout", "10")
    try:
        first = get(port, "/").body.split(b"|")[0].decode()
        with LoadClient(port, "/grow", threads=2, max_requests=1_000_000) as load:
            cli.log_until(rf"worker {first} uses \d+ MiB \(--workers-max-rss 80\): "
                            "replacing it")
            # The successor serves: its pid answers, the old one is gone.
            wait_for(lambda: len(load.result.pids - {first}) >= 1, 30,
                     "len(load.result.pids - {first}) >= 1")
            wait_for(lambda: first not in map(str, cli.worker_pids()), 30,
                     "first not in map(str, cli.worker_pids())")
        result = load.result
        print(f"\n--workers-max-rss: ok={result.ok} retried={result.retried} "
              f"failed={len(result.failed)} pids={sorted(result.pids)}")
        assert not result.failed and not result.partial, (result.failed, result.partial)
    finally:
        assert cli.stop() == 0, cli.err


def test_while_workers_drain_health_says_503_and_new_clients_are_refused(
        tmp_path: Path) -> None:
    port = free_port()
    gate = tmp_path / "gate"
    cli = _start(tmp_path, port, "--workers", "2", "--threads", "2", "--health-path",
                 "/healthz", "--graceful-timeout", "20")
    try:
        wait_for(lambda: get(port, "/healthz").status == 200, 10,
                 'get(port, "/healthz").status == 200')
        slow = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        slow.request("GET", f"/wait?{gate}")
        # The signal comes once a worker runs the app on it: a request still on its way
        # (accepted, not yet read) is not in flight, and may be closed by the drain.
        wait_for(lambda: (tmp_path / "gate.in").exists(), 20,
                 lambda: f'(tmp_path / "gate.in").exists() ({cli.err})')
        probe = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        probe.request("GET", "/healthz")
        assert probe.getresponse().read() == b"ok\n"
        cli.send(signal.SIGTERM)
        # Every new client, from now until the workers are gone, is refused at once or told
        # 503; none is accepted and left waiting (a probe would read that as a hang).
        outcomes: list[str] = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and "refused" not in outcomes:
            try:
                answer = get(port, "/healthz", timeout=2.0)
                outcomes.append(str(answer.status))
            except ConnectionRefusedError:
                outcomes.append("refused")
            except TimeoutError:
                outcomes.append("left waiting")
            except (OSError, h11.RemoteProtocolError, IncompleteResponse):
                # Connected just as the last listener closed: the kernel resets what was
                # still in its accept queue. Ended at once: a refusal too.
                outcomes.append("reset")
        assert "refused" in outcomes, (outcomes[:5], len(outcomes), outcomes[-5:])
        assert not [o for o in outcomes if o not in ("200", "503", "refused", "reset")], \
            outcomes
        # The request in flight is still answered, then the server ends.
        gate.touch()
        response = slow.getresponse()
        assert response.status == 200 and response.read().endswith(b"|/wait")
    finally:
        gate.touch()
        assert cli.stop() == 0, cli.err


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The document at `url`, parsed by prometheus_client: {(sample, labels): value}."""
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def _requests(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float],
              status: str, protocol: str = "1.1") -> float:
    return samples.get(("cymongoose_requests_total",
                        (("interface", "wsgi"), ("protocol", protocol), ("status", status))), 0.0)


def test_metrics_add_up_every_worker_and_survive_a_killed_one(tmp_path: Path) -> None:
    port = free_port()
    access = tmp_path / "access.log"
    cli = _start(tmp_path, port, "--workers", "2", "--threads", "2", "--metrics",
                 "--metrics-port", "0", "--access-log", "--access-log-file", str(access))
    try:
        url = cli.log_until(r"metrics of all the workers at (http://\S+)").group(1)
        wait_for(lambda: _scrape(url)[("cymongoose_workers", ())] == 2, 30,
                 '_scrape(url)[("cymongoose_workers", ())] == 2')
        start = _scrape(url)  # the start-up's own request (CLI.wait_http) is counted
        started = _requests(start, "200")
        assert started >= 1
        for i in range(30):
            assert get(port, "/missing" if i % 3 == 0 else "/").status in (200, 404)
        # Four more on one h2c connection: counted apart by the protocol label.
        with httpx.Client(http1=False, http2=True, timeout=10) as h2:
            assert {h2.get(f"http://127.0.0.1:{port}/").http_version
                    for _ in range(4)} == {"HTTP/2"}
        with socket.create_connection(("127.0.0.1", port)) as bad:
            bad.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")
            assert bad.recv(100).startswith(b"HTTP/1.1 400")
        wait_for(lambda: _requests(_scrape(url), "400") == 1, 10,
                 '_requests(_scrape(url), "400") == 1')
        wait_for(lambda: _scrape(url)[("cymongoose_http2_connections_open", ())] == 0, 10,
                 '_scrape(url)[("cymongoose_http2_connections_open", ())] == 0')
        before = _scrape(url)
        assert _requests(before, "200") == started + 20 and _requests(before, "404") == 10
        assert _requests(before, "200", "2") == 4 and _requests(before, "404", "2") == 0
        assert before[("cymongoose_requests_refused_total",
                       (("interface", "wsgi"), ("status", "400")))] == 1
        assert before[("cymongoose_request_duration_seconds_count",
                       (("interface", "wsgi"),))] == started + 34
        assert before[("cymongoose_connections_total", ())] == \
            start[("cymongoose_connections_total", ())] + 32
        assert before[("cymongoose_http2_connections_total", ())] == 1
        assert before[("cymongoose_requests_in_flight", ())] == 0
        assert before[("cymongoose_received_bytes_total", ())] > 30 * 20
        # Every response counted is a line of the access log, and the reverse.
        counted = started + 35
        wait_for(lambda: len(access.read_text().splitlines()) == counted, 10,
                 lambda: f"len(access.read_text().splitlines()) == counted ({access.read_text()})")

        victim = cli.worker_pids()[0]
        os.kill(victim, signal.SIGKILL)
        scrapes = 0
        while True:  # every scrape while the worker is replaced is a whole document
            now = _scrape(url)
            scrapes += 1
            for key, value in before.items():
                if key[0].endswith(("_total", "_count", "_sum", "_bucket")):
                    assert now.get(key, 0.0) >= value, (key, value, now.get(key))
            if (now[("cymongoose_worker_restarts_total", (("reason", "died"),))] == 1
                    and now[("cymongoose_workers", ())] == 2):
                break
            assert scrapes < 2000, now
        assert _requests(now, "200") == started + 20 and _requests(now, "404") == 10
        assert _requests(now, "200", "2") == 4
        assert victim not in cli.worker_pids()
    finally:
        assert cli.stop() == 0, cli.err


def test_a_metrics_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        done = run_cli(tmp_path, "cli_app:app", "--port", str(free_port()), "--metrics",
                       "--metrics-port", str(busy))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"cymongoose: --metrics-port {busy}: cannot listen on 127.0.0.1:{busy} (Address "
        "already in use): the port is in use"]


@pytest.mark.parametrize(("option", "value", "must"), [
    ("--limit-concurrency", "-1", "must be an int >= 1, not -1"),
    ("--request-timeout", "0", "must be a number of seconds > 0, not 0.0"),
    ("--workers-max-rss", "0", "must be a number of MiB (an int >= 1), not 0"),
    ("--health-path", "healthz",
     "must be a path starting with '/', without spaces, '?' or '#', not 'healthz'"),
    ("--health-path", "/healthz?full",
     "must be a path starting with '/', without spaces, '?' or '#', not '/healthz?full'"),
])
def test_a_wrong_production_option_is_one_line_and_exit_2(tmp_path: Path, option: str,
                                                           value: str, must: str) -> None:
    done = run_cli(tmp_path, "cli_app:app", option, value)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"cymongoose: {option} {must}"]


def test_a_request_past_the_deadline_gets_504_logged_with_its_request_line(
        tmp_path: Path) -> None:
    port = free_port()
    cli = CLI(tmp_path, "cli_app:slow", "--port", str(port), "--request-timeout", "0.5",
              "--access-log")
    cli.wait_http(port, "/?0")
    assert get(port, "/?0.8").status == 504
    assert cli.stop() == 0
    assert '"GET /?0.8 HTTP/1.1" 504' in cli.out, cli.out
    assert "GET /?0.8 HTTP/1.1: no response after" in cli.err, cli.err


def test_utilisation_is_the_share_of_app_threads_busy(tmp_path: Path) -> None:
    """Two clients, each always waiting on a 0.1 s request, on 2 workers of 2 app threads:
    half the capacity is busy. Idle before the load, the gauge says 0."""
    port = free_port()
    cli = _start(tmp_path, port, "--workers", "2", "--threads", "2", "--metrics",
                 "--metrics-port", "0")
    try:
        url = cli.log_until(r"metrics of all the workers at (http://\S+)").group(1)
        wait_for(lambda: _scrape(url)[("cymongoose_workers", ())] == 2, 30,
                 '_scrape(url)[("cymongoose_workers", ())] == 2')
        idle = _scrape(url)
        assert idle[("cymongoose_capacity", ())] == 4
        assert idle[("cymongoose_utilisation", ())] < 0.05
        with LoadClient(port, path="/sleep", threads=2, max_requests=10**6) as load:
            # The window fills: after a few seconds of load the gauge is near 2 / 4 (less
            # the clients' own time between requests, which a busy machine stretches).
            def settled() -> float:
                value = _scrape(url)[("cymongoose_utilisation", ())]
                return value if 0.3 <= value <= 0.55 else 0.0

            seen = wait_for(settled, 30, lambda: f"utilisation near 0.5 ({_scrape(url)})",
                            interval=0.5)
        assert load.result.failed == [], load.result.failed
        assert seen
    finally:
        assert cli.stop() == 0, cli.err


def test_capacity_and_the_utilisation_window() -> None:
    from cymongoose.config import Config
    from cymongoose.metrics import Utilisation
    from cymongoose.process.supervisor import process_capacity

    assert process_capacity(Config(threads=8), "wsgi") == 8
    assert process_capacity(Config(threads=8, limit_concurrency=3), "wsgi") == 3
    assert process_capacity(Config(limit_concurrency=50), "asgi") == 50
    assert process_capacity(Config(), "asgi") is None  # the loop's CPU bounds it
    assert process_capacity(Config(), "raw") is None

    window = Utilisation(window=10.0)
    assert window.value(4) == 0.0  # no samples yet
    for second in range(30):  # 2 requests always in flight: 2 request-seconds a second
        window.sample(float(second), 2.0 * second)
    assert window.value(4) == 0.5
    for second in range(30, 45):  # idle for longer than the window: back to 0
        window.sample(float(second), 58.0)
    assert window.value(4) == 0.0
    assert window.value(0) == 0.0
