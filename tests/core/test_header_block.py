"""`HeaderBlock`: header fields checked and rendered once, then copied into responses as
`more_headers` (the WSGI and ASGI servers' Date and Server)."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from support.http_client import raw_request
from support.poll_thread import ServerThread

from cymongoose import MG_EV_HTTP_MSG, Connection
from cymongoose._mongoose import HeaderBlock

pytestmark = pytest.mark.timeout(30)


def _exchange(block: HeaderBlock, requests: int) -> bytes:
    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            conn.http_respond(200, [("Content-Type", "text/plain")], b"ok",
                              more_headers=block)

    st = ServerThread()
    port = st.listen("http://127.0.0.1:0", handler)
    st.start()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(raw_request("GET", "/") * requests)
            data = b""
            while data.count(b"HTTP/1.1 200") < requests:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
            return data
    finally:
        st.stop()


def test_block_is_copied_into_each_response() -> None:
    block = HeaderBlock([(b"Date", b"Tue, 24 Nov 2026 00:00:00 GMT"), ("Server", "t/1")])
    assert block.lines == b"Date: Tue, 24 Nov 2026 00:00:00 GMT\r\nServer: t/1\r\n"
    assert list(block) == [(b"Date", b"Tue, 24 Nov 2026 00:00:00 GMT"), ("Server", "t/1")]
    assert len(block) == 2
    data = _exchange(block, 2)
    assert data.count(b"\r\nServer: t/1\r\n") == 2
    assert data.count(b"Content-Length: 2\r\n") == 2


def test_connection_close_in_a_block_closes_the_connection() -> None:
    data = _exchange(HeaderBlock([("Connection", "close")]), 1)
    assert data.startswith(b"HTTP/1.1 200") and data.count(b"Connection: close") == 1


@pytest.mark.parametrize(("fields", "error"), [
    ([("Bad Name", "v")], ValueError),
    ([("X-A", "v\r\nInjected: 1")], ValueError),
    ([("X-A", "v\x00")], ValueError),
    ([("X-A", "v\x01")], ValueError),
    ([("X-A", b"v\x7f")], ValueError),
    ([("Content-Length", "3")], ValueError),
    ([("transfer-encoding", "chunked")], ValueError),
    ([("X-A", 3)], TypeError),
    ([("X-A",)], ValueError),
])
def test_invalid_fields_are_refused(fields: Any, error: type[Exception]) -> None:
    with pytest.raises(error) as info:
        HeaderBlock(fields)
    if fields[0][0] == "Bad Name" or any(ch in str(fields[0][-1]) for ch in "\r\x00"):
        assert "illegal character" in str(info.value)  # 0.2.x's words
