"""An h2c client (HTTP/2 after an HTTP/1.1 `Upgrade: h2c`, RFC 7540 §3.2) on a raw socket,
with the `h2` library: what an attacker sends to smuggle requests through a proxy that
turns the upgrade into a tunnel."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.events

from .ports import HOST


@dataclass
class H2cResult:
    """`status_line`: the first line of the HTTP/1.1 answer to the upgrade request (101 when
    the server switched). `answers`: path -> (status, body) of each request answered over
    HTTP/2 (the upgrade request's own is stream 1, under its path). `after`: without a
    101, the bytes that came after the head (the HTTP/1.1 body, and with `insist` whatever
    came until the server closed)."""

    status_line: bytes
    head: bytes
    answers: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    after: bytes = b""


def h2c_upgrade(port: int, path: str, then: tuple[str, ...] = (), host: str = "backend",
                insist: bool = False, timeout: float = 10.0) -> H2cResult:
    """GET `path` asking to upgrade to h2c; if the answer is 101, send the HTTP/2 preface and
    GET each path of `then` on its own stream, and wait for every answer (at most
    `timeout`). Otherwise the HTTP/1.1 answer's head is returned and, with `insist`, the
    HTTP/2 is sent all the same (a client trying its luck), and everything read until the
    server closes."""
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    settings = conn.initiate_upgrade_connection()
    deadline = time.monotonic() + timeout
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n"
                     f"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
                     f"HTTP2-Settings: ".encode() + settings + b"\r\n\r\n")
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                raise AssertionError(f"closed before an answer's head: {data!r}")
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        result = H2cResult(head.split(b"\r\n")[0], head)
        switched = b" 101 " in result.status_line + b" "
        streams = {1: path}
        for p in then:
            sid = conn.get_next_available_stream_id()
            conn.send_headers(sid, [(":method", "GET"), (":path", p), (":scheme", "http"),
                                    (":authority", host)], end_stream=True)
            streams[sid] = p
        if not switched:
            result.after = rest
            if insist:
                try:
                    sock.sendall(conn.data_to_send())
                    while chunk := sock.recv(65536):
                        result.after += chunk
                except ConnectionResetError:
                    pass
            return result
        sock.sendall(conn.data_to_send())
        status: dict[int, int] = {}
        bodies: dict[int, bytes] = {sid: b"" for sid in streams}
        ended: set[int] = set()
        while ended != set(streams):
            if time.monotonic() > deadline:
                raise AssertionError(f"h2c: streams {set(streams) - ended} unanswered")
            for event in conn.receive_data(rest):
                if isinstance(event, h2.events.ResponseReceived):
                    status[event.stream_id] = int(dict(event.headers)[b":status"])
                elif isinstance(event, h2.events.DataReceived):
                    bodies[event.stream_id] += event.data
                    conn.acknowledge_received_data(event.flow_controlled_length,
                                                   event.stream_id)
                elif isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset)):
                    ended.add(event.stream_id)
            sock.sendall(conn.data_to_send())
            if ended == set(streams):
                break
            rest = sock.recv(65536)
            if not rest:
                raise AssertionError(f"h2c: closed with streams {set(streams) - ended} open")
        result.answers = {streams[sid]: (status.get(sid, 0), bodies[sid]) for sid in streams}
        return result
