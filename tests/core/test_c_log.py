"""Mongoose's own C log goes to the `cymongoose.mongoose` logger (never to stdout), one
record per line, with Mongoose's level mapped to logging's, from any thread."""

from __future__ import annotations

import logging
import threading

import pytest

import cymongoose
from cymongoose import Manager


@pytest.fixture
def mongoose_debug():  # type: ignore[no-untyped-def]
    old = cymongoose.log_get()
    cymongoose.log_set(cymongoose.MG_LL_DEBUG)
    try:
        yield
    finally:
        cymongoose.log_set(old)


def test_lines_reach_logging_not_stdout(mongoose_debug, caplog: pytest.LogCaptureFixture,
                                        capfd: pytest.CaptureFixture[str]) -> None:
    with caplog.at_level(logging.DEBUG, logger="cymongoose.mongoose"):
        with Manager() as mgr:
            mgr.listen("http://127.0.0.1:0")
            mgr.poll(0)
    records = [r for r in caplog.records if r.name == "cymongoose.mongoose"]
    listen = [r for r in records if "mg_listen" in r.getMessage()]
    assert listen and listen[0].levelno == logging.DEBUG
    assert listen[0].getMessage().endswith(" http://127.0.0.1:0")
    assert all("\n" not in r.getMessage() and "\r" not in r.getMessage() for r in records)
    assert "mg_listen" not in capfd.readouterr().out


def test_lines_from_threads_do_not_mix(mongoose_debug,
                                       caplog: pytest.LogCaptureFixture) -> None:
    def work() -> None:
        for _ in range(20):
            with Manager() as mgr:
                mgr.listen("tcp://127.0.0.1:0")
                mgr.poll(0)

    with caplog.at_level(logging.DEBUG, logger="cymongoose.mongoose"):
        threads = [threading.Thread(target=work) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    messages = [r.getMessage() for r in caplog.records if r.name == "cymongoose.mongoose"]
    assert len(messages) >= 3 * 20 * 3
    assert all(m.startswith("mongoose.c:") for m in messages), messages[:5]
