"""A rollout across hosts behind a load balancer, the way a cluster replaces its pods: three
hosts (network namespaces joined to a balancer's by veth pairs), each running
`cymongoose ... --workers 2 --health-path /healthz`, behind Debian's HAProxy with active
health checks, under a steady load from a client host. Each host in turn gets SIGTERM,
exits, and is started again once it is gone; the next one goes once the balancer has the
last one back.

With --drain-delay longer than the balancer's check interval times its fall count, no
request fails over the whole rollout: the balancer sees the 503 and takes the host out
while it still serves. Without the delay the host stops accepting within 0.1 s, before the
balancer knows, and its requests fail: the same test shows the failures, so it can fail.
Our own reverse proxy (--proxy with --proxy-health-path) runs the same rollout in front.

The figures are printed (pytest -s shows them) and quoted in docs/deployment.md.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.cli_run import HELLO_APP, cli_env
from support.netns import Network, can_make_namespaces
from support.process_start import start_bound
from support.waiting import wait_for

pytestmark = [pytest.mark.timeout(240),
              pytest.mark.skipif(can_make_namespaces() is not None,
                                 reason=str(can_make_namespaces()))]

TESTS = Path(__file__).resolve().parents[1]
HOSTS = 3
PORT = 8000  # every host's, on its own address
FRONT = ("10.38.0.1", 8080)  # the balancer, as the client host reaches it

# HAProxy checks each host every 200 ms and takes it out after 2 failed checks: out of
# rotation within about 0.4 s of the first 503 (plus a check's own time). The delay is
# several times that, so a loaded machine does not turn it into a race.
CHECK_INTER_MS = 200
CHECK_FALL = 2
DRAIN_DELAY_S = 2.0

# HAProxy forwards each request once (`retries 0`), as AWS's ALB does: by default it would
# retry a refused connection a second later, on the same host, and here (unlike a cluster,
# where the replacement comes up elsewhere) the host is back by then, which hides the race.

HAPROXY_CONF = """
global
    log stderr format raw local0 warning
    stats socket {tmp}/haproxy.sock mode 600 level admin
defaults
    mode http
    retries 0
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    http-reuse safe
frontend www
    bind {front_host}:{front_port}
    default_backend hosts
backend hosts
    balance roundrobin
    option httpchk GET /healthz
    http-check expect status 200
{servers}
"""


def _host_address(k: int) -> str:
    return f"10.38.{k}.2"


class Rig:
    """The hosts, the balancer's host and the client's, with a process log each in `tmp`."""

    def __init__(self, net: Network, tmp: Path) -> None:
        self.net = net
        self.tmp = tmp
        self.balancer = net.host("lb")
        self.client = net.host("client")
        net.link(self.balancer, FRONT[0], self.client, "10.38.0.2")
        self.hosts = []
        for k in range(1, HOSTS + 1):
            host = net.host(f"h{k}")
            net.link(self.balancer, f"10.38.{k}.1", host, _host_address(k))
            self.hosts.append(host)
        self.procs: list[subprocess.Popen[bytes]] = []
        # Host k's servers, first and each one started again: their worker pids.
        self.generations: dict[int, list[set[str]]] = {}
        (tmp / "cli_app.py").write_text(HELLO_APP)

    def start(self, ns: str, argv: list[str], log: str) -> subprocess.Popen[bytes]:
        """`argv` in namespace `ns`, its output in `tmp/log` (appended: a host started
        again keeps one log)."""
        with open(self.tmp / log, "ab") as out:
            proc = subprocess.Popen(self.net.run_in(ns, argv), cwd=self.tmp, env=cli_env(),
                                    stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
        self.procs.append(proc)
        return proc

    def log(self, name: str) -> str:
        return (self.tmp / name).read_text(errors="replace")

    def start_host(self, k: int, drain_delay: float) -> subprocess.Popen[bytes]:
        """Host k's server, once its workers are ready."""
        name = f"h{k}.log"
        before = self.log(name) if (self.tmp / name).exists() else ""
        seen = before.count(" ready (supervisor pid")
        proc = self.start(self.hosts[k - 1], [
            sys.executable, "-m", "cymongoose", "cli_app:app", "--host", _host_address(k),
            "--port", str(PORT), "--workers", "2", "--threads", "4",
            "--health-path", "/healthz", "--drain-delay", str(drain_delay),
            "--graceful-timeout", "10"], name)
        wait_for(lambda: self.log(name).count(" ready (supervisor pid") > seen
                 or proc.poll() is not None, start_bound(60),
                 lambda: f"host {k} ready ({self.log(name)[-2000:]})")
        assert proc.poll() is None, self.log(name)
        workers = set(re.findall(r"\[(\d+)\] INFO cymongoose\.error: serving ",
                                 self.log(name)[len(before):]))
        self.generations.setdefault(k, []).append(workers)
        return proc

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)


@contextmanager
def _rig(tmp: Path) -> Iterator[Rig]:
    with Network() as net:
        rig = Rig(net, tmp)
        try:
            yield rig
        finally:
            rig.close()


class Load:
    """support/steady_load.py on the client host, until stop()."""

    def __init__(self, rig: Rig) -> None:
        env = cli_env(PYTHONPATH=str(TESTS))
        self.proc = subprocess.Popen(
            rig.net.run_in(rig.client, [sys.executable, "-m", "support.steady_load",
                                        FRONT[0], str(FRONT[1])]),
            cwd=TESTS, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.strip() == "started", (line, self.proc.stderr and self.proc.stderr.read())

    def stop(self) -> dict[str, object]:
        out, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, err
        result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
        return result


def _haproxy_states(sock_path: Path) -> dict[str, str]:
    """Each host's state as HAProxy's stats say it (UP, DOWN, or on the way: "UP 1/2")."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(5)
        s.connect(str(sock_path))
        s.sendall(b"show stat\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    rows = csv.DictReader(io.StringIO(data.decode().lstrip("# ")))
    return {row["svname"]: row["status"] for row in rows if row["pxname"] == "hosts"
            and row["svname"] not in ("FRONTEND", "BACKEND")}


class HAProxyFront:
    name = "HAProxy"

    def __init__(self, rig: Rig) -> None:
        servers = "\n".join(
            f"    server h{k} {_host_address(k)}:{PORT} check inter {CHECK_INTER_MS}ms "
            f"fall {CHECK_FALL} rise 2" for k in range(1, HOSTS + 1))
        self.sock = rig.tmp / "haproxy.sock"
        (rig.tmp / "haproxy.cfg").write_text(HAPROXY_CONF.format(
            tmp=rig.tmp, front_host=FRONT[0], front_port=FRONT[1], servers=servers))
        self.proc = rig.start(rig.balancer, [shutil.which("haproxy") or "/usr/sbin/haproxy",
                                             "-db", "-f", str(rig.tmp / "haproxy.cfg")],
                              "haproxy.log")
        self._rig = rig
        wait_for(lambda: self.sock.exists() or self.proc.poll() is not None, 20,
                 "HAProxy's stats socket")
        assert self.proc.poll() is None, rig.log("haproxy.log")

    def state(self, k: int) -> str:
        try:
            return _haproxy_states(self.sock).get(f"h{k}", "?")
        except ConnectionRefusedError:
            # The stats socket's queue is full for a moment (HAProxy serves it between its
            # other work): asked again at the next check.
            return "?"

    def wait(self, k: int, up: bool) -> None:
        want = "UP" if up else "DOWN"
        wait_for(lambda: self.state(k) == want, start_bound(60),
                 lambda: f"HAProxy to see host {k} {want} (it says {self.state(k)})",
                 interval=0.05)


class CymongooseFront:
    """Our own reverse proxy, its health checks as often as HAProxy's; a host is out at its
    first failed check (proxy/health.py)."""

    name = "cymongoose --proxy"

    def __init__(self, rig: Rig) -> None:
        upstreams = ",".join(f"http://{_host_address(k)}:{PORT}" for k in range(1, HOSTS + 1))
        self._rig = rig
        self.proc = rig.start(rig.balancer, [
            sys.executable, "-m", "cymongoose", "--proxy", f"/={upstreams}",
            "--proxy-health-path", "/healthz",
            "--proxy-health-interval", str(CHECK_INTER_MS / 1000),
            "--host", FRONT[0], "--port", str(FRONT[1])], "proxy.log")
        wait_for(lambda: "proxying" in rig.log("proxy.log") or self.proc.poll() is not None,
                 start_bound(30), lambda: f"the proxy serving ({rig.log('proxy.log')})")
        assert self.proc.poll() is None, rig.log("proxy.log")

    def _changes(self, k: int) -> tuple[int, int]:
        log = self._rig.log("proxy.log")
        label = re.escape(f"{_host_address(k)}:{PORT}")
        return (len(re.findall(label + r"\S* failed its health check", log)),
                len(re.findall(label + r"\S* passes its health check again", log)))

    def wait(self, k: int, up: bool) -> None:
        # A host is in while every failed check it had was followed by a passing one.
        def seen() -> bool:
            out, back = self._changes(k)
            return (out == back) if up else (out > back)

        wait_for(seen, start_bound(60),
                 lambda: f"the proxy to see host {k} {'up' if up else 'down'} "
                         f"({self._changes(k)}: {self._rig.log('proxy.log')[-2000:]})")


def _rollout(rig: Rig, make_front: Callable[[Rig], HAProxyFront | CymongooseFront],
             drain_delay: float) -> dict[str, object]:
    """Start the hosts and the front, roll every host under load; the load's result."""
    hosts = {k: rig.start_host(k, drain_delay) for k in range(1, HOSTS + 1)}
    front = make_front(rig)
    for k in hosts:
        front.wait(k, up=True)
    load = Load(rig)
    started = time.monotonic()
    try:
        for k in list(hosts):
            hosts[k].send_signal(signal.SIGTERM)
            front.wait(k, up=False)
            hosts[k].wait(timeout=start_bound(drain_delay + 30))
            assert hosts[k].returncode == 0, rig.log(f"h{k}.log")
            hosts[k] = rig.start_host(k, drain_delay)
            front.wait(k, up=True)
    finally:
        result = load.stop()
    result["seconds"] = round(time.monotonic() - started, 1)
    result["front"] = front.name
    result["drain_delay"] = drain_delay
    result["generations"] = dict(rig.generations)
    for proc in hosts.values():
        proc.send_signal(signal.SIGKILL)
    front.proc.send_signal(signal.SIGKILL)
    return result


def _report(result: dict[str, object]) -> str:
    failed = result["failed"]
    assert isinstance(failed, list)
    return (f"{result['front']}, --drain-delay {result['drain_delay']}: {result['ok']} "
            f"requests answered, {len(failed)} failed, in {result['seconds']} s "
            f"(first failures: {failed[:3]})")


def test_a_rollout_behind_haproxy_fails_no_request_with_a_drain_delay(tmp_path: Path) -> None:
    with _rig(tmp_path) as rig:
        without = _rollout(rig, HAProxyFront, 0.0)
    print(_report(without))
    with _rig(tmp_path) as rig:
        with_delay = _rollout(rig, HAProxyFront, DRAIN_DELAY_S)
    print(_report(with_delay))
    # Without the delay, each host stops accepting before HAProxy's checks see it go.
    assert without["failed"], _report(without)
    # With it, HAProxy has each host out before it stops: nothing fails, nothing is cut.
    assert with_delay["failed"] == [] and with_delay["partial"] == [], _report(with_delay)
    assert with_delay["retried"] == 0, _report(with_delay)
    _assert_spread(with_delay)


def _assert_spread(result: dict[str, object]) -> None:
    """The load reached every host's first server, and every host's second but the last
    one's (the load ends as soon as that is back)."""
    answered = result["pids"]
    generations = result["generations"]
    assert isinstance(answered, list) and isinstance(generations, dict)
    pids_of: dict[str, set[str]] = {}
    for entry in answered:
        pid, address = entry.split("|")
        pids_of.setdefault(address, set()).add(pid)
    for k in range(1, HOSTS + 1):
        served = pids_of.get(f"10.38.{k}.1", set())
        first, second = generations[k]
        assert served & first, (k, answered, generations)
        assert k == HOSTS or served & second, (k, answered, generations)


def test_a_rollout_behind_our_own_proxy_fails_no_request(tmp_path: Path) -> None:
    with _rig(tmp_path) as rig:
        result = _rollout(rig, CymongooseFront, DRAIN_DELAY_S)
    print(_report(result))
    assert result["failed"] == [] and result["partial"] == [], _report(result)
    assert result["retried"] == 0, _report(result)
    _assert_spread(result)


def test_the_namespaces_are_gone_after_a_failed_test(tmp_path: Path) -> None:
    """A test that fails half-way leaves no namespace (nor process in one) behind."""
    names: list[str] = []
    with pytest.raises(RuntimeError, match="on purpose"), _rig(tmp_path) as rig:
        names = [rig.balancer, rig.client, *rig.hosts]
        sleeper = rig.start(rig.hosts[0], ["sleep", "60"], "sleep.log")
        raise RuntimeError("on purpose")
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert names and not [n for n in names if n in listed], listed
    assert sleeper.poll() is not None  # what ran in them went too
