"""A raw HTTP/2 client with prior knowledge (h2c) on a socket, on the `h2` library's state
machine: streams opened and answered one frame at a time, for the tests that must see what
a high-level client hides (resets, GOAWAY, windows), and raw frames for the bad input the
library would refuse to send."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.events
import h2.settings

from .ports import HOST


@dataclass
class H2Answer:
    """What came back on one stream."""

    status: int = 0
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytes = b""
    ended: bool = False  # END_STREAM seen
    reset: int | None = None  # RST_STREAM's error code, if reset
    interim: list[int] = field(default_factory=list)  # 1xx statuses
    trailers: list[tuple[bytes, bytes]] = field(default_factory=list)

    def header(self, name: bytes) -> bytes | None:
        for k, v in self.headers:
            if k == name:
                return v
        return None

    @property
    def done(self) -> bool:
        return self.ended or self.reset is not None


class H2Peer:
    """One HTTP/2 connection to 127.0.0.1:`port`. Reads happen only inside wait()."""

    def __init__(self, port: int, timeout: float = 10.0, validate: bool = True,
                 settings: dict[int, int] | None = None) -> None:
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        config = h2.config.H2Configuration(
            client_side=True, header_encoding=None, validate_outbound_headers=validate,
            normalize_outbound_headers=validate, validate_inbound_headers=False)
        self.conn = h2.connection.H2Connection(config)
        self.conn.initiate_connection()
        if settings:
            self.conn.update_settings(settings)
        self.answers: dict[int, H2Answer] = {}
        self.goaway: h2.events.ConnectionTerminated | None = None
        self.closed = False  # the server closed the socket
        self.remote_settings: dict[int, int] = {}
        self.flush()

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def request(self, path: str, method: str = "GET",
                headers: Iterable[tuple[str, str]] = (), body: bytes | None = None,
                end: bool = True, authority: str = "localhost") -> int:
        """Open a stream; `end=False` leaves the body open (send_data() goes on)."""
        sid = self.conn.get_next_available_stream_id()
        fields = [(":method", method), (":path", path), (":scheme", "http"),
                  (":authority", authority), *headers]
        self.conn.send_headers(sid, fields, end_stream=end and body is None)
        self.answers[sid] = H2Answer()
        if body is not None:
            self.send_data(sid, body, end=end)
        self.flush()
        return sid

    def send_data(self, sid: int, data: bytes, end: bool = False) -> None:
        """As much of `data` as the window allows now; the rest is the caller's to retry
        (send_all() waits for window)."""
        while data:
            room = min(self.conn.local_flow_control_window(sid),
                       self.conn.max_outbound_frame_size)
            if room <= 0:
                raise BlockingIOError("no window")
            self.conn.send_data(sid, data[:room])
            data = data[room:]
        if end:
            self.conn.end_stream(sid)
        self.flush()

    def send_all(self, sid: int, data: bytes, timeout: float = 30.0) -> None:
        """Send `data` and END_STREAM, waiting for the server's WINDOW_UPDATEs."""
        deadline = time.monotonic() + timeout
        while data:
            room = min(self.conn.local_flow_control_window(sid),
                       self.conn.max_outbound_frame_size, len(data))
            if room > 0:
                self.conn.send_data(sid, data[:room])
                data = data[room:]
                self.flush()
                continue
            if time.monotonic() > deadline:
                raise AssertionError("the server gave no window within the timeout")
            self._read_once(deadline)
        self.conn.end_stream(sid)
        self.flush()

    def reset(self, sid: int, code: int = 8) -> None:
        self.conn.reset_stream(sid, code)
        self.flush()

    def wait(self, done: Callable[[H2Peer], bool], timeout: float = 10.0) -> None:
        """Read until done(self) holds; AssertionError after `timeout` seconds or when the
        server closes first."""
        deadline = time.monotonic() + timeout
        while not done(self):
            if self.closed:
                raise AssertionError(f"server closed first; answers: {self.answers}")
            self._read_once(deadline)

    def wait_answers(self, *sids: int, timeout: float = 10.0) -> list[H2Answer]:
        self.wait(lambda p: all(p.answers[s].done for s in sids), timeout)
        return [self.answers[s] for s in sids]

    def wait_closed(self, timeout: float = 10.0) -> None:
        """Read (and process) until the server closes the connection."""
        deadline = time.monotonic() + timeout
        while not self.closed:
            self._read_once(deadline)

    def _read_once(self, deadline: float) -> None:
        data = recv_by(self.sock, deadline, lambda: f"answers so far: {self.answers}")
        if not data:
            self.closed = True
            return
        for ev in self.conn.receive_data(data):
            self._on(ev)
        self.flush()

    def _on(self, ev: h2.events.Event) -> None:
        if isinstance(ev, h2.events.ResponseReceived | h2.events.InformationalResponseReceived):
            a = self.answers.setdefault(ev.stream_id, H2Answer())
            headers = [(bytes(k), bytes(v)) for k, v in ev.headers]
            status = int(dict(headers)[b":status"])
            if isinstance(ev, h2.events.InformationalResponseReceived):
                a.interim.append(status)
            else:
                a.status = status
                a.headers = headers
        elif isinstance(ev, h2.events.DataReceived):
            a = self.answers.setdefault(ev.stream_id, H2Answer())
            a.body += ev.data
            # Give the window back at once: these tests read as fast as they can.
            self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.TrailersReceived):
            a = self.answers.setdefault(ev.stream_id, H2Answer())
            a.trailers = [(bytes(k), bytes(v)) for k, v in ev.headers]
        elif isinstance(ev, h2.events.StreamEnded):
            self.answers.setdefault(ev.stream_id, H2Answer()).ended = True
        elif isinstance(ev, h2.events.StreamReset):
            self.answers.setdefault(ev.stream_id, H2Answer()).reset = int(ev.error_code)
        elif isinstance(ev, h2.events.ConnectionTerminated):
            self.goaway = ev
        elif isinstance(ev, h2.events.RemoteSettingsChanged):
            for k, v in ev.changed_settings.items():
                self.remote_settings[int(k)] = v.new_value

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> H2Peer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def recv_by(sock: socket.socket, deadline: float, state: Callable[[], str]) -> bytes:
    """What the server sent next (b"": it closed, or reset); AssertionError, saying
    state(), once `deadline` (time.monotonic()) passes first."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise AssertionError(f"timed out; {state()}")
    sock.settimeout(left)
    try:
        return sock.recv(65536)
    except ConnectionResetError:
        return b""
    except TimeoutError:
        raise AssertionError(f"timed out; {state()}") from None


def frame(kind: int, flags: int, sid: int, payload: bytes = b"") -> bytes:
    """One raw HTTP/2 frame (RFC 9113 section 4.1)."""
    return struct.pack(">I", len(payload))[1:] + bytes((kind, flags)) + struct.pack(
        ">I", sid & 0x7FFFFFFF) + payload


PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def raw_connection(port: int, timeout: float = 10.0) -> socket.socket:
    """A socket that has sent the preface and an empty SETTINGS frame: a client that writes
    its own frames (and whose server's answers no state machine checks)."""
    sock = socket.create_connection((HOST, port), timeout=timeout)
    sock.sendall(PREFACE + frame(4, 0, 0))
    return sock


Frame = tuple[int, int, int, bytes]  # type, flags, stream, payload


class FrameReader:
    """The frames a server sends on a raw connection, read as they come."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.frames: list[Frame] = []
        self.closed = False
        self._data = b""

    def read_until(self, done: Callable[[list[Frame]], bool], timeout: float = 10.0) -> None:
        """Read until done(frames) holds or the server closes (then done must hold)."""
        deadline = time.monotonic() + timeout
        while not done(self.frames):
            if self.closed:
                raise AssertionError(f"closed first; frames: {self.frames}")
            chunk = recv_by(self.sock, deadline, lambda: f"frames: {self.frames}")
            if not chunk:
                self.closed = True
                continue
            self._data += chunk
            while len(self._data) >= 9:
                n = int.from_bytes(self._data[:3], "big")
                if len(self._data) < 9 + n:
                    break
                d = self._data
                self.frames.append((d[3], d[4], int.from_bytes(d[5:9], "big") & 0x7FFFFFFF,
                                    d[9:9 + n]))
                self._data = d[9 + n:]

    def until_closed(self, timeout: float = 10.0) -> list[Frame]:
        self.read_until(lambda _: self.closed, timeout)
        return self.frames


def read_until_closed(sock: socket.socket, timeout: float = 10.0) -> list[Frame]:
    """Every frame the server sends until it closes."""
    return FrameReader(sock).until_closed(timeout)


def goaway_code(frames: list[Frame]) -> int | None:
    """The error code of the server's GOAWAY among `frames` (None: none came)."""
    for kind, _, _, payload in frames:
        if kind == 7:
            return int.from_bytes(payload[4:8], "big")
    return None
