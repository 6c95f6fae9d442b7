"""Deterministic bulk data: the same bytes on both sides of a big transfer, made cheaply."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator

_BLOCK = random.Random(3333).randbytes(1 << 20)


def pattern_chunks(size: int, chunk: int = 64 * 1024) -> Iterator[bytes]:
    """`size` bytes of a fixed pseudo-random 1 MiB block repeated, in pieces of `chunk`."""
    sent = 0
    while sent < size:
        n = min(chunk, size - sent)
        off = sent % len(_BLOCK)
        piece = _BLOCK[off:off + n]
        if len(piece) < n:
            piece += _BLOCK[:n - len(piece)]
        yield piece
        sent += n


def pattern_sha256(size: int) -> str:
    h = hashlib.sha256()
    for piece in pattern_chunks(size, 1 << 20):
        h.update(piece)
    return h.hexdigest()
