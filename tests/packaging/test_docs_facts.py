"""Sentences of docs/ that state a fact of the code, checked against the code: the metrics'
`interface` values, the upstream names' re-resolution interval, the WSGI one-line example's
keyword (not the deprecated `workers=`)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from cymongoose.proxy.reverse_proxy import ReverseProxy

pytestmark = pytest.mark.no_asan

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _prose(page: str) -> str:
    """The page with its lines joined, so a sentence wrapped over lines is one string."""
    return re.sub(r"\s*\n\s*", " ", (DOCS / page).read_text(encoding="utf-8"))


def test_operations_names_every_interface_a_worker_reports() -> None:
    """Each serving process reports "ready <interface>" to the supervisor, which labels the
    metrics with it (process/serve.py, process/supervisor.py)."""
    source = (ROOT / "src" / "cymongoose" / "process" / "serve.py").read_text()
    reported = set(re.findall(r'status\.ready\("(\w+)"\)', source))
    assert {"wsgi", "asgi", "raw", "proxy"} <= reported, reported
    (sentence,) = re.findall(r"`interface` is ([^.]*)\.", _prose("operations.md"))
    assert set(re.findall(r"`(\w+)`", sentence)) == reported, sentence


def test_proxy_says_when_upstream_names_resolve_again() -> None:
    interval = inspect.signature(ReverseProxy).parameters["resolve_interval"].default
    prose = _prose("proxy.md")
    assert f"again every {interval:g} seconds" in prose
    assert "start-up only" not in prose and "once, at start-up" not in prose


def test_proxy_says_sigterm_drains() -> None:
    """tests/adapters/cli/test_proxy_cli.py shows a pure proxy finishing a request in flight
    after SIGTERM."""
    prose = _prose("proxy.md")
    assert "requests in flight are cut" not in prose
    assert re.search(r"On `SIGTERM`[^.]* a pure proxy drains", prose)


def test_the_wsgi_one_liner_uses_the_current_keyword() -> None:
    (line,) = re.findall(r"`from cymongoose\.wsgi import serve; serve\([^`]*`", _prose("wsgi.md"))
    assert "workers=" not in line and "threads=" in line, line
