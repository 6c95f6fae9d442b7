"""DNS resolution through a local DNS responder (dnslib) and SNTP against a local SNTP
responder: everything on loopback, nothing from the internet."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from dnslib import AAAA, QTYPE, RCODE, RR, A
from dnslib.server import BaseResolver, DNSLogger, DNSServer
from support.waiting import wait_for

import cymongoose as cm


def run_for(mgr: cm.Manager, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        mgr.poll(5)


class Zone(BaseResolver):  # type: ignore[misc]
    """Answers A/AAAA from a dict; NXDOMAIN for unknown names. Records every question."""

    def __init__(self, records: dict[str, list[tuple[str, str]]]) -> None:
        self.records = records
        self.queries: list[tuple[str, str]] = []

    def resolve(self, request: Any, handler: Any) -> Any:
        q = request.q
        name, qtype = str(q.qname).rstrip("."), QTYPE[q.qtype]
        self.queries.append((name, qtype))
        reply = request.reply()
        if name not in self.records:
            reply.header.rcode = RCODE.NXDOMAIN
            return reply
        for rtype, value in self.records[name]:
            if rtype == qtype == "A":
                reply.add_answer(RR(q.qname, QTYPE.A, rdata=A(value), ttl=60))
            elif rtype == qtype == "AAAA":
                reply.add_answer(RR(q.qname, QTYPE.AAAA, rdata=AAAA(value), ttl=60))
        return reply


@pytest.fixture
def dns() -> Iterator[tuple[str, Zone]]:
    zone = Zone({
        "svc.test": [("A", "127.0.0.1")],
        "other.test": [("A", "127.0.0.1")],
        "v6only.test": [("AAAA", "::1")],
    })
    server = DNSServer(zone, address="127.0.0.1", port=0,
                       logger=DNSLogger(log="-request,-reply,-truncated,-error,-recv,-send,"
                                        "-data", prefix=False, logf=lambda s: None))
    server.start_thread()
    try:
        port = server.server.server_address[1]
        yield f"udp://127.0.0.1:{port}", zone
    finally:
        server.stop()
        server.server.server_close()


class Log:
    def __init__(self) -> None:
        self.events: list[tuple[int, Any]] = []

    def __call__(self, conn: cm.Connection, ev: int, data: Any) -> None:
        if ev != cm.MG_EV_POLL:
            self.events.append((ev, data))

    def evs(self) -> list[int]:
        return [ev for ev, _ in self.events]

    def errors(self) -> list[str]:
        return [d for ev, d in self.events if ev == cm.MG_EV_ERROR]


def echo_listener(mgr: cm.Manager, url: str = "tcp://127.0.0.1:0") -> int:
    def echo(conn: cm.Connection, ev: int, data: Any) -> None:
        if ev == cm.MG_EV_READ:
            conn.send(conn.recv_data(consume=True))

    return int(mgr.listen(url, echo).local_addr[1])


def talk(mgr: cm.Manager, conn: cm.Connection, log: Log, payload: bytes) -> bytes:
    """Send payload on a connected conn and return what comes back (echo listener)."""
    got = bytearray()
    conn.send(payload)

    def done() -> bool:
        if conn.recv_len:
            got.extend(conn.recv_data(consume=True))
        return len(got) >= len(payload)

    wait_for(done, 5, "echo", manager=mgr)
    return bytes(got)


# DNS


def test_dns_server_property() -> None:
    with cm.Manager() as mgr:
        assert mgr.dns_server == "udp://8.8.8.8:53"  # Mongoose's default
        mgr.dns_server = "udp://127.0.0.1:5353"
        assert mgr.dns_server == "udp://127.0.0.1:5353"
        with pytest.raises(ValueError, match="udp://"):
            mgr.dns_server = "tcp://127.0.0.1:53"
        with pytest.raises(TypeError):
            mgr.dns_server = b"udp://127.0.0.1:53"  # type: ignore[assignment]
        with pytest.raises(ValueError, match="NUL"):
            mgr.dns_server = "udp://127.0.0.1:53\x00"
        assert mgr.dns_server == "udp://127.0.0.1:5353"
    assert mgr.dns_server == ""
    with pytest.raises(RuntimeError, match="Manager has been closed"):
        mgr.dns_server = "udp://127.0.0.1:53"


def test_connect_by_name_resolves_through_local_dns(dns: tuple[str, Zone]) -> None:
    url, zone = dns
    log = Log()
    with cm.Manager() as mgr:
        mgr.dns_server = url
        port = echo_listener(mgr)
        conn = mgr.connect(f"tcp://svc.test:{port}", log)
        wait_for(lambda: cm.MG_EV_CONNECT in log.evs(), 5, "connect by name", manager=mgr)
        assert log.evs().index(cm.MG_EV_RESOLVE) < log.evs().index(cm.MG_EV_CONNECT)
        assert all(d is None for ev, d in log.events if ev == cm.MG_EV_RESOLVE)
        assert conn.remote_addr == ("127.0.0.1", port, False)
        assert talk(mgr, conn, log, b"resolved") == b"resolved"
    assert zone.queries == [("svc.test", "A")]
    assert log.errors() == []


def test_nxdomain_is_an_error_event_not_a_query_loop(dns: tuple[str, Zone]) -> None:
    url, zone = dns
    log = Log()
    with cm.Manager() as mgr:
        mgr.dns_server = url
        mgr.connect("tcp://missing.test:80", log)
        wait_for(lambda: cm.MG_EV_CLOSE in log.evs(), 5, "error and close", manager=mgr)
        run_for(mgr, 0.2)  # would show further queries
    assert log.errors() == ["missing.test DNS lookup failed"]
    assert cm.MG_EV_RESOLVE not in log.evs() and cm.MG_EV_CONNECT not in log.evs()
    # Mongoose retries an unanswered A lookup as AAAA once; 7.23 alone would go on
    # sending AAAA queries for as long as the Manager lives.
    assert zone.queries == [("missing.test", "A"), ("missing.test", "AAAA")]


def test_aaaa_fallback_still_works(dns: tuple[str, Zone]) -> None:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback")
    url, zone = dns
    log = Log()
    with cm.Manager() as mgr:
        mgr.dns_server = url
        port = echo_listener(mgr, "tcp://[::1]:0")
        conn = mgr.connect(f"tcp://v6only.test:{port}", log)
        wait_for(lambda: cm.MG_EV_CONNECT in log.evs() or cm.MG_EV_CLOSE in log.evs(), 5,
                 "connect over IPv6", manager=mgr)
        assert log.errors() == []
        assert conn.remote_addr is not None and conn.remote_addr[2] is True
        assert talk(mgr, conn, log, b"six") == b"six"
    assert zone.queries == [("v6only.test", "A"), ("v6only.test", "AAAA")]


def test_resolve_cancel_then_resolve_again(dns: tuple[str, Zone]) -> None:
    url, zone = dns
    log = Log()
    with cm.Manager() as mgr:
        mgr.dns_server = url
        port = echo_listener(mgr)
        conn = mgr.connect(f"tcp://svc.test:{port}", log)
        conn.resolve_cancel()  # the query is already sent; its answer must be ignored
        wait_for(lambda: len(zone.queries) == 1, 5, "the first query", manager=mgr)
        run_for(mgr, 0.3)
        assert cm.MG_EV_RESOLVE not in log.evs() and cm.MG_EV_CONNECT not in log.evs()
        assert log.errors() == [] and not conn.is_closing  # waits for a new address
        conn.resolve(f"tcp://other.test:{port}")
        wait_for(lambda: cm.MG_EV_CONNECT in log.evs(), 5, "connect after resolve()", manager=mgr)
        assert log.evs().count(cm.MG_EV_RESOLVE) == 1
        assert talk(mgr, conn, log, b"again") == b"again"
        # Now that it has a socket, resolving again would leak it: refused.
        with pytest.raises(RuntimeError, match="no socket yet"):
            conn.resolve(f"tcp://svc.test:{port}")
        conn.resolve_cancel()  # harmless with nothing in flight
    assert zone.queries == [("svc.test", "A"), ("other.test", "A")]


def test_resolve_replaces_a_lookup_in_flight_and_accepts_an_ip(dns: tuple[str, Zone]) -> None:
    url, zone = dns
    log = Log()
    with cm.Manager() as mgr:
        mgr.dns_server = url
        port = echo_listener(mgr)
        conn = mgr.connect(f"tcp://svc.test:{port}", log)
        conn.resolve(f"tcp://127.0.0.1:{port}")  # an address: connects without DNS
        wait_for(lambda: cm.MG_EV_CONNECT in log.evs(), 5, "connect", manager=mgr)
        run_for(mgr, 0.2)  # the svc.test answer, if any, must change nothing
        assert log.evs().count(cm.MG_EV_RESOLVE) == 1
        assert log.evs().count(cm.MG_EV_CONNECT) == 1
        assert talk(mgr, conn, log, b"ip") == b"ip"
    assert log.errors() == []


def test_resolve_argument_and_state_errors() -> None:
    with cm.Manager() as mgr:
        lsn = mgr.listen("tcp://127.0.0.1:0")
        with pytest.raises(RuntimeError, match="client connection"):
            lsn.resolve("tcp://127.0.0.1:1")
        conn = mgr.connect("tcp://127.0.0.1:1")
        with pytest.raises(TypeError):
            conn.resolve(b"tcp://x:1")  # type: ignore[arg-type]
        conn.close()
        run_for(mgr, 0.05)
        with pytest.raises(RuntimeError, match="Connection has been closed"):
            conn.resolve("tcp://127.0.0.1:1")
        with pytest.raises(RuntimeError, match="Connection has been closed"):
            conn.resolve_cancel()


def test_changing_dns_server_takes_effect(dns: tuple[str, Zone]) -> None:
    url, zone = dns
    other = Zone({"svc.test": [("A", "127.0.0.1")]})
    server = DNSServer(other, address="127.0.0.1", port=0,
                       logger=DNSLogger(log="-request,-reply", logf=lambda s: None))
    server.start_thread()
    try:
        log1, log2 = Log(), Log()
        with cm.Manager() as mgr:
            mgr.dns_server = url
            port = echo_listener(mgr)
            mgr.connect(f"tcp://svc.test:{port}", log1)  # query sent to the first server
            # Switched while that lookup is in flight: it still completes (the old
            # resolver socket lingers until no lookup is pending), new ones go to `other`.
            mgr.dns_server = f"udp://127.0.0.1:{server.server.server_address[1]}"
            mgr.connect(f"tcp://svc.test:{port}", log2)
            wait_for(lambda: cm.MG_EV_CONNECT in log1.evs() and cm.MG_EV_CONNECT in log2.evs(), 5,
                     "both lookups", manager=mgr)
            assert log1.errors() == [] and log2.errors() == []
            mgr.connect(f"tcp://svc.test:{port}", Log())
            run_for(mgr, 0.2)
    finally:
        server.stop()
        server.server.server_close()
    assert zone.queries == [("svc.test", "A")]
    assert other.queries == [("svc.test", "A"), ("svc.test", "A")]


# SNTP


NTP_EPOCH_OFFSET = 2208988800


class SntpResponder:
    """A UDP SNTP server on loopback answering every request with a chosen time
    (RFC 4330: origin = the client's transmit timestamp; receive = transmit = the time)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port = int(self.sock.getsockname()[1])
        self.time_s: float = time.time()
        self.stratum = 1
        self.silent = False
        self.requests: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @staticmethod
    def ntp_ts(t: float) -> bytes:
        sec = int(t)
        frac = int(round((t - sec) * (1 << 32))) & 0xFFFFFFFF
        return struct.pack("!II", sec + NTP_EPOCH_OFFSET, frac)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                req, addr = self.sock.recvfrom(512)
            except (TimeoutError, OSError):
                continue
            self.requests.append(req)
            if self.silent or len(req) < 48:
                continue
            ts = self.ntp_ts(self.time_s)
            reply = (bytes([0x24, self.stratum, 6, 0xEC]) + b"\x00" * 8 + b"TEST" + ts
                     + req[40:48] + ts + ts)
            self.sock.sendto(reply, addr)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


@pytest.fixture
def sntp() -> Iterator[SntpResponder]:
    responder = SntpResponder()
    try:
        yield responder
    finally:
        # An SNTP reply also sets Mongoose's process-wide wall clock (used for TLS
        # validity checks): leave it on the real time again.
        if not responder.silent and responder.stratum:
            responder.time_s = time.time()
            with cm.Manager() as mgr:
                got: list[int] = []
                mgr.sntp_connect(f"udp://127.0.0.1:{responder.port}",
                                 lambda c, ev, d: got.append(d)
                                 if ev == cm.MG_EV_SNTP_TIME else None)
                wait_for(lambda: got, 3, "the clock put back", manager=mgr)
        responder.close()


def test_sntp_time_from_local_responder(sntp: SntpResponder) -> None:
    known = int(time.time()) - 37.25  # clearly not the local clock; whole milliseconds
    sntp.time_s = known
    log = Log()
    with cm.Manager() as mgr:
        conn = mgr.sntp_connect(f"udp://127.0.0.1:{sntp.port}", log)
        assert conn.is_udp and conn.is_client
        wait_for(lambda: cm.MG_EV_SNTP_TIME in log.evs(), 5, "SNTP time", manager=mgr)
        wait_for(lambda: cm.MG_EV_CLOSE in log.evs(), 5, "close after the reply", manager=mgr)
    times = [d for ev, d in log.events if ev == cm.MG_EV_SNTP_TIME]
    assert len(times) == 1 and type(times[0]) is int
    # Mongoose reports transmit time + half the round trip, in epoch milliseconds (the NTP
    # fraction is truncated, so allow one millisecond below).
    assert -1 <= times[0] - int(known * 1000) < 200, (times[0], known)
    assert log.errors() == []
    assert len(sntp.requests[0]) == 48 and sntp.requests[0][0] & 7 == 3  # client mode


def test_sntp_request_sends_another_request(sntp: SntpResponder) -> None:
    sntp.silent = True  # no reply, so the connection stays open for a second request
    log = Log()
    with cm.Manager() as mgr:
        conn = mgr.sntp_connect(f"udp://127.0.0.1:{sntp.port}", log)
        wait_for(lambda: len(sntp.requests) == 1, 5, "the automatic first request", manager=mgr)
        conn.sntp_request()
        wait_for(lambda: len(sntp.requests) == 2, 5, "the explicit request", manager=mgr)
        sntp.silent = False
        sntp.time_s = time.time()
        conn.sntp_request()
        wait_for(lambda: cm.MG_EV_SNTP_TIME in log.evs(), 5, "SNTP time", manager=mgr)
    assert len(sntp.requests) == 3


def test_sntp_unusable_reply_is_an_error(sntp: SntpResponder) -> None:
    sntp.stratum = 0  # "kiss of death": Mongoose rejects it
    log = Log()
    with cm.Manager() as mgr:
        mgr.sntp_connect(f"udp://127.0.0.1:{sntp.port}", log)
        wait_for(lambda: cm.MG_EV_CLOSE in log.evs(), 5, "close", manager=mgr)
    assert log.errors() == ["SNTP: invalid or unusable server reply"]
    assert cm.MG_EV_SNTP_TIME not in log.evs()


def test_sntp_no_reply_is_an_error(sntp: SntpResponder) -> None:
    sntp.silent = True
    log = Log()
    with cm.Manager() as mgr:
        mgr.sntp_connect(f"udp://127.0.0.1:{sntp.port}", log)
        wait_for(lambda: cm.MG_EV_CLOSE in log.evs(), 6, "timeout",
                 manager=mgr)  # Mongoose waits 3 s
    assert log.errors() == ["SNTP: no reply within 3 seconds"]


def test_sntp_by_name_through_local_dns(sntp: SntpResponder, dns: tuple[str, Zone]) -> None:
    url, zone = dns
    zone.records["ntp.test"] = [("A", "127.0.0.1")]
    sntp.time_s = time.time()
    log = Log()
    with cm.Manager() as mgr:
        mgr.dns_server = url
        conn = mgr.sntp_connect(f"udp://ntp.test:{sntp.port}", log)
        conn.sntp_request()  # still resolving: nothing is sent, nothing raised
        wait_for(lambda: cm.MG_EV_SNTP_TIME in log.evs(), 5, "SNTP time", manager=mgr)
    assert zone.queries == [("ntp.test", "A")]
    assert abs([d for ev, d in log.events if ev == cm.MG_EV_SNTP_TIME][0]
               - time.time() * 1000) < 2000


def test_sntp_connect_errors() -> None:
    with cm.Manager() as mgr:
        with pytest.raises(TypeError):
            mgr.sntp_connect(b"udp://127.0.0.1:123")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="handler"):
            mgr.sntp_connect("udp://127.0.0.1:123", 5)
        conn = mgr.sntp_connect("udp://127.0.0.1:9")
        conn.close()
        run_for(mgr, 0.05)
        with pytest.raises(RuntimeError, match="Connection has been closed"):
            conn.sntp_request()
    with pytest.raises(RuntimeError, match="Manager has been closed"):
        mgr.sntp_connect("udp://127.0.0.1:123")
