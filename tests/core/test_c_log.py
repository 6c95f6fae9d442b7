"""Mongoose's own C log goes to the `cymongoose.mongoose` logger (never to stdout), one
record per line, with Mongoose's level mapped to logging's, from any thread."""

from __future__ import annotations

import logging
import threading

import pytest
from support.ports import free_port

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


def test_a_failed_outgoing_connection_is_one_error_line_with_its_peer(
        caplog: pytest.LogCaptureFixture) -> None:
    """mg_error() no longer logs "<id> <fd> <text>": a connection this process opened that
    fails is one ERROR line naming where it was going (a client's failure, on a server, is
    quieter: tests/adapters/cli/test_reload_and_logging.py)."""
    port = free_port()  # nothing listens there
    errors: list[str] = []

    def handler(conn: cymongoose.Connection, ev: int, data: object) -> None:
        if ev == cymongoose.MG_EV_ERROR:
            errors.append(str(data))

    old = cymongoose.log_get()
    cymongoose.log_set(cymongoose.MG_LL_ERROR)
    with caplog.at_level(logging.DEBUG, logger="cymongoose.mongoose"):
        with Manager(handler) as mgr:
            mgr.connect(f"tcp://127.0.0.1:{port}")
            for _ in range(200):
                if errors:
                    break
                mgr.poll(10)
    cymongoose.log_set(old)
    assert errors  # the handler still gets MG_EV_ERROR with Mongoose's text
    lines = [r for r in caplog.records if r.name == "cymongoose.mongoose"
             and r.levelno == logging.ERROR]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert f" to 127.0.0.1:{port}: " in lines[0].getMessage()
    assert errors[0] in lines[0].getMessage()


def _refused_connect(caplog: pytest.LogCaptureFixture,
                     log_errors: bool) -> tuple[list[str], list[str]]:
    """A client connection to a port nobody listens on: its MG_EV_ERROR texts and the ERROR
    lines of cymongoose.mongoose."""
    port = free_port()
    errors: list[str] = []

    def handler(conn: cymongoose.Connection, ev: int, data: object) -> None:
        if ev == cymongoose.MG_EV_ERROR:
            errors.append(str(data))

    old = cymongoose.log_get()
    cymongoose.log_set(cymongoose.MG_LL_ERROR)
    try:
        with caplog.at_level(logging.DEBUG, logger="cymongoose.mongoose"):
            with Manager(handler) as mgr:
                conn = mgr.connect(f"tcp://127.0.0.1:{port}")
                conn.log_errors = log_errors
                for _ in range(500):
                    if errors:
                        break
                    mgr.poll(10)
    finally:
        cymongoose.log_set(old)
    return errors, [r.getMessage() for r in caplog.records
                    if r.name == "cymongoose.mongoose" and r.levelno == logging.ERROR]


def test_a_refused_connection_names_the_real_errno(caplog: pytest.LogCaptureFixture) -> None:
    """The reason is the socket's pending error (SO_ERROR), not errno: 0.2.x logged every
    refused connect as "socket error (Operation now in progress)", the non-blocking
    connect's EINPROGRESS."""
    errors, lines = _refused_connect(caplog, True)
    assert errors == ["socket error: Connection refused"]
    assert len(lines) == 1 and lines[0].endswith(": socket error: Connection refused"), lines


def test_log_errors_false_leaves_the_report_to_the_handler(
        caplog: pytest.LogCaptureFixture) -> None:
    errors, lines = _refused_connect(caplog, False)
    assert errors == ["socket error: Connection refused"] and lines == []
