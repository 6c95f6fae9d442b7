"""Clients that stop reading a streamed response do not hold the app threads (issue 35, item
3): the response is parked, its thread goes back to work, and a thread takes the next items
once the client has read (docs/wsgi.md, "Slow clients"). Real clients over 127.0.0.1 with tiny
receive buffers; every wait is on a condition, bounded."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

from support.patterns import pattern_chunks
from support.waiting import wait_for
from support.wsgi_server import RunningServer, running_wsgi_server

# Far more than the high mark (1 MiB) plus what the kernel buffers for a non-reader.
STREAM = 16 << 20
READERS = 20
THREADS = 8
EXPECTED = b"".join(pattern_chunks(STREAM))


class _Stream:
    """The app's iterable, recording its close() (PEP 3333: exactly once)."""

    def __init__(self, log: _Log) -> None:
        self._log = log
        self._items = pattern_chunks(STREAM)

    def __iter__(self) -> Iterator[bytes]:
        return self._items

    def close(self) -> None:
        with self._log.lock:
            self._log.closed += 1


class _Log:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started = 0
        self.closed = 0


def _app(log: _Log) -> Any:
    def app(environ: dict[str, Any], start_response: Any) -> Any:
        if environ["PATH_INFO"] == "/hello":
            start_response("200 OK", [("Content-Length", "5")])
            return [b"hello"]
        with log.lock:
            log.started += 1
        start_response("200 OK", [("Content-Length", str(STREAM))])
        return _Stream(log)
    return app


def _slow_reader(port: int, tail: bytes = b"") -> socket.socket:
    """A client with a tiny receive buffer that asks for the stream and reads nothing."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n" + tail)
    return sock


def _parked(running: RunningServer) -> int:
    return int(running.server.parked_responses)


def _read_exactly(sock: socket.socket, n: int, timeout: float) -> bytes:
    sock.settimeout(timeout)
    got = bytearray()
    while len(got) < n:
        chunk = sock.recv(min(1 << 20, n - len(got)))
        if not chunk:
            break
        got += chunk
    return bytes(got)


def _read_response(sock: socket.socket, timeout: float) -> tuple[bytes, bytes]:
    """(head, body) of one Content-Length response."""
    sock.settimeout(timeout)
    head = bytearray()
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        assert chunk, f"closed after {bytes(head)!r}"
        head += chunk
    length = next(int(line.split(b":")[1]) for line in bytes(head).split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    return bytes(head), _read_exactly(sock, length, timeout)


def _hello(port: int, timeout: float) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        return _read_response(sock, timeout)[1]


def test_fresh_request_is_answered_while_slow_readers_are_parked() -> None:
    log = _Log()
    # stream_timeout far longer than the test: a server whose threads wait for these
    # clients would starve the fresh request for a minute. send_timeout too: the clients
    # read one after another, so the last waits for 19 x 16 MiB to be read first, which on a
    # loaded machine under ASan took longer than the default 60 s, and the core then closed
    # it for making no progress (a truncated body, not the behaviour under test).
    with running_wsgi_server(_app(log), threads=THREADS, send_timeout_ms=600_000,
                             server_kwargs={"stream_timeout": 120}) as running:
        clients = [_slow_reader(running.port) for _ in range(READERS)]
        try:
            # More readers than threads: every stream started, and each is parked.
            wait_for(lambda: _parked(running) == READERS, 60,
                     lambda: f"{READERS} parked responses ({_parked(running)}, "
                             f"{log.started} started)")
            assert log.started == READERS and log.closed == 0
            assert _hello(running.port, 20) == b"hello"
            # Each reads its whole response, complete and in order.
            for sock in clients:
                head, body = _read_response(sock, 60)
                assert head.startswith(b"HTTP/1.1 200 ")
                assert body == EXPECTED
            wait_for(lambda: log.closed == READERS, 20,
                     lambda: f"{READERS} iterables closed ({log.closed})")
            assert _parked(running) == 0
        finally:
            for sock in clients:
                sock.close()
    assert log.closed == READERS


def test_pipelined_request_behind_a_parked_response_is_answered_in_order() -> None:
    log = _Log()
    with running_wsgi_server(_app(log), threads=2) as running:
        sock = _slow_reader(running.port, tail=b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        with sock:
            wait_for(lambda: _parked(running) == 1, 30, "a parked response")
            head, body = _read_response(sock, 60)
            assert body == EXPECTED
            head, body = _read_response(sock, 20)
            assert head.startswith(b"HTTP/1.1 200 ") and body == b"hello"
        wait_for(lambda: log.closed == 1, 20, "the iterable closed")


def test_parked_client_that_disconnects_gets_its_iterable_closed() -> None:
    log = _Log()
    with running_wsgi_server(_app(log), threads=2,
                             server_kwargs={"stream_timeout": 120}) as running:
        sock = _slow_reader(running.port)
        wait_for(lambda: _parked(running) == 1, 30, "a parked response")
        # Unread data in its buffer: the close resets the connection.
        sock.close()
        wait_for(lambda: log.closed == 1, 20, lambda: f"the iterable closed ({log.closed})")
        wait_for(lambda: _parked(running) == 0, 20, "nothing parked")
        assert _hello(running.port, 20) == b"hello"
    assert log.closed == 1


def test_parked_client_that_reads_nothing_is_closed_after_stream_timeout() -> None:
    log = _Log()
    errors: list[BaseException] = []
    with running_wsgi_server(_app(log), threads=2,
                             server_kwargs={"stream_timeout": 0.5,
                                            "error_handler": errors.append}) as running:
        sock = _slow_reader(running.port)
        with sock:
            wait_for(lambda: _parked(running) == 1, 30, "a parked response")
            start = time.monotonic()
            wait_for(lambda: log.closed == 1, 20, lambda: f"the iterable closed ({log.closed})")
            assert time.monotonic() - start >= 0.4
            # The connection was closed: reading ends short of the body.
            got = _read_exactly(sock, STREAM + 4096, 20)
            assert 0 < len(got) < STREAM
    assert log.closed == 1
    assert [type(e) for e in errors] == [TimeoutError]


def test_shutdown_closes_parked_iterables() -> None:
    log = _Log()
    count = 3
    clients: list[socket.socket] = []
    try:
        with running_wsgi_server(_app(log), threads=2,
                                 server_kwargs={"stream_timeout": 120,
                                                "graceful_timeout": 0.2}) as running:
            clients = [_slow_reader(running.port) for _ in range(count)]
            wait_for(lambda: _parked(running) == count, 30,
                     lambda: f"{count} parked responses ({_parked(running)})")
            assert log.closed == 0
        # run() returned and close() ran: nothing is left open.
        assert log.closed == count
    finally:
        for sock in clients:
            sock.close()


def _flask_streams() -> Any:
    """A Flask app whose stream reads `request` after every piece (stream_with_context)."""
    from flask import Flask, Response, request, stream_with_context

    app = Flask(__name__)

    @app.get("/stream")
    def stream() -> Response:
        def pieces() -> Iterator[bytes]:
            for _ in range(STREAM // 65536):
                # The request context, pushed by stream_with_context in the first piece,
                # must still be this request's when a later piece runs on another thread.
                yield request.args["n"].encode().ljust(65536, b".")
        return Response(stream_with_context(pieces()),
                        headers={"Content-Length": str(STREAM)})

    @app.get("/hello")
    def hello() -> str:
        return "hello"

    return app


def test_flask_stream_with_context_keeps_its_request_across_threads() -> None:
    count = 6
    errors: list[BaseException] = []
    with running_wsgi_server(_flask_streams(), threads=2,
                             server_kwargs={"stream_timeout": 120,
                                            "error_handler": errors.append}) as running:
        clients = []
        for n in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", running.port))
            sock.sendall(f"GET /stream?n={n} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            clients.append(sock)
        try:
            wait_for(lambda: _parked(running) == count, 60,
                     lambda: f"{count} parked responses ({_parked(running)})")
            assert _hello(running.port, 20) == b"hello"
            for n, sock in enumerate(clients):
                head, body = _read_response(sock, 60)
                assert head.startswith(b"HTTP/1.1 200 ")
                assert body == str(n).encode().ljust(65536, b".") * (STREAM // 65536)
        finally:
            for sock in clients:
                sock.close()
        assert not running.errors
    assert errors == []  # nor did a close() fail (Flask pops its request context there)


def test_without_park_streams_the_thread_waits_for_the_client() -> None:
    from cymongoose.config import Config

    log = _Log()
    with running_wsgi_server(_app(log), threads=2, server_kwargs={
            "config": Config(park_streams=False, stream_timeout=120)}) as running:
        clients = [_slow_reader(running.port) for _ in range(3)]
        try:
            # Two threads, each held by a stream whose client reads nothing: the third
            # request waits for one of them, and nothing is parked.
            wait_for(lambda: log.started == 2, 30, lambda: f"2 streams ({log.started})")
            assert _parked(running) == 0
            # Which two got the threads is the server's choice: read all three at once.
            bodies: list[bytes] = []

            def read(sock: socket.socket) -> None:
                bodies.append(_read_response(sock, 60)[1])

            readers = [threading.Thread(target=read, args=(sock,)) for sock in clients]
            for t in readers:
                t.start()
            for t in readers:
                t.join(120)
            assert bodies == [EXPECTED] * 3 and log.started == 3
        finally:
            for sock in clients:
                sock.close()
    assert log.closed == 3
