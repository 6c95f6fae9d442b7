"""A WebSocket echo checked from the client side with the `websockets` library."""

from __future__ import annotations

from websockets.sync.client import connect


def assert_echoes(url: str, timeout: float = 10.0) -> None:
    """A text message (not ASCII) and a binary one (a NUL and 0xFF) come back unchanged."""
    with connect(url, open_timeout=timeout) as ws:
        for message in ("hi ✓", b"\x00\xff binary"):
            ws.send(message)
            assert ws.recv(timeout=timeout) == message
