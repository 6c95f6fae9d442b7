"""access_log.AccessLog: gunicorn-style atoms, JSON lines, and nothing built when off."""

from __future__ import annotations

import datetime
import json
import logging
import re
import time
from pathlib import Path

import pytest

from cymongoose.access_log import AccessLog, AccessLogWriter


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def capture() -> logging.Logger:
    logger = logging.getLogger("cymongoose.access.test")
    logger.handlers[:] = [_Capture()]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logger


def _lines(logger: logging.Logger) -> list[str]:
    return logger.handlers[0].lines  # type: ignore[attr-defined, no-any-return]


HEADERS = {"referer": "http://r/", "user-agent": "ua/1", "x-id": "42"}


def test_atoms(capture: logging.Logger) -> None:
    log = AccessLog('%(h)s %(l)s %(u)s "%(r)s" %(m)s %(U)s %(q)s %(H)s %(s)s %(B)s %(b)s '
                    '"%(f)s" "%(a)s" %(T)s %(M)s %(D)s %(L)s %({x-id}i)s %({none}i)s',
                    logger=capture)
    log.log("192.0.2.1", "GET", "/p", "a=1", "HTTP/1.1", 200, 0, 1.5, HEADERS.get, "bob")
    assert _lines(capture) == [
        '192.0.2.1 - bob "GET /p?a=1 HTTP/1.1" GET /p a=1 HTTP/1.1 200 0 - "http://r/" '
        '"ua/1" 1 1500 1500000 1.500000 42 -']


def test_default_format_and_time(capture: logging.Logger) -> None:
    AccessLog(logger=capture).log("::1", "POST", "/", "", "HTTP/1.0", 404, 9, 0.002)
    line = _lines(capture)[0]
    assert line.startswith('::1 - - [') and line.endswith('] "POST / HTTP/1.0" 404 9 "-" '
                                                          '"-" 0.002000')


def test_json(capture: logging.Logger) -> None:
    AccessLog(as_json=True, logger=capture).log("192.0.2.1", "GET", "/j", "", "HTTP/1.1",
                                                 201, 5, 0.25, HEADERS.get)
    rec = json.loads(_lines(capture)[0])
    assert rec["client"] == "192.0.2.1" and rec["status"] == 201 and rec["bytes"] == 5
    assert rec["duration_ms"] == 250.0 and rec["user_agent"] == "ua/1"
    stamp = datetime.datetime.fromisoformat(rec["time"])  # ISO 8601, not CLF's brackets
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d", rec["time"])
    assert abs(stamp.timestamp() - time.time()) < 60


def test_writer_opens_its_file_again_after_a_close(tmp_path: Path) -> None:
    """logging.config.dictConfig() closes every handler; the access log must go on."""
    path = tmp_path / "access.log"
    writer = AccessLogWriter(str(path), flush_interval=60)
    try:
        writer.write_line("before")
        writer.close()
        writer.write_line("after")  # opens the file again
        writer.flush()
        assert path.read_text() == "before\nafter\n"
    finally:
        writer.close()


def test_off_builds_nothing(capture: logging.Logger) -> None:
    capture.setLevel(logging.WARNING)
    log = AccessLog(logger=capture)
    assert not log.enabled

    def header(name: str) -> str:
        raise AssertionError("looked up a header while off")

    log.log("x", "GET", "/", "", "HTTP/1.1", 200, 0, 0.0, header)
    assert _lines(capture) == []


@pytest.mark.parametrize("fmt", ["%(zz)s", "%(h)d %(", "%(h)"])
def test_bad_formats(fmt: str) -> None:
    with pytest.raises(ValueError):
        AccessLog(fmt)
