"""How this build's Mongoose waits: epoll (Linux), or poll() (macOS, and the make test-poll
build on Linux, CYMONGOOSE_POLL_BACKEND=ON), where a Manager has no epoll descriptor."""

from __future__ import annotations

import pytest

from cymongoose import Manager


def _has_epoll() -> bool:
    with Manager() as manager:
        return manager.fileno() >= 0


EPOLL = _has_epoll()


def needs_epoll(why: str) -> pytest.MarkDecorator:
    """Skip in a poll() build, saying why the test is about epoll."""
    return pytest.mark.skipif(not EPOLL, reason=f"Mongoose waits with poll() here: {why}")
