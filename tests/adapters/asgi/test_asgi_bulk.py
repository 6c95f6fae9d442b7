"""Big and many: a 512 MiB streamed upload hashed by the app, a slow reader of a 256 MiB
streamed response, and 1,000 concurrent WebSockets echoing. The clients run in their own
process, so the RSS sampled is the serving process's alone. Under AddressSanitizer
(CYMONGOOSE_ASAN set) the sizes shrink to keep the run short."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from support.asgi_fixtures import ServeASGI
from support.gunicorn_server import TESTS_DIR
from support.patterns import pattern_sha256
from support.rss import RssSampler
from support.served import Served
from support.subprocess_env import child_env

ASAN = bool(os.environ.get("CYMONGOOSE_ASAN"))
UPLOAD_SIZE = (64 if ASAN else 512) << 20
RESPONSE_SIZE = (32 if ASAN else 256) << 20
SOCKETS = 200 if ASAN else 1000
# ASan holds freed memory back (a 32 MiB quarantine in make asan-test) and pads blocks.
MAX_GROWTH = (96 if ASAN else 64) << 20


def run_module(module: str, *args: str, timeout: float = 60) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", module, *args], cwd=TESTS_DIR,
                         env=child_env(str(TESTS_DIR)), capture_output=True, timeout=timeout,
                         check=False)
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-3000:]
    return json.loads(out.stdout.decode().strip().splitlines()[-1])  # type: ignore


@pytest.mark.timeout(90)
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_big_streamed_upload_is_hashed_with_bounded_memory(serve_asgi: ServeASGI,
                                                           chunked: bool) -> None:
    served: Served = serve_asgi(max_body_size=1 << 30)
    size = UPLOAD_SIZE if not chunked else UPLOAD_SIZE // 4
    with RssSampler(served.rss_pid()) as rss:
        result = run_module("support.bulk_client", "upload", "--port", str(served.port),
                            "--target", "/hash", "--size", str(size),
                            *(["--chunked"] if chunked else []))
    assert result["status"] == 200, result
    assert json.loads(result["body"]) == {"length": size, "sha256": result["sent_sha256"]}
    assert rss.growth < MAX_GROWTH, f"server RSS grew by {rss.growth >> 20} MiB"


@pytest.mark.timeout(90)
def test_slow_reader_of_big_stream_has_bounded_memory(asgi_served: Served) -> None:
    target = f"/stream?size={RESPONSE_SIZE}&chunk=65536"
    with RssSampler(asgi_served.rss_pid()) as rss:
        result = run_module("support.bulk_client", "slow_read", "--port",
                            str(asgi_served.port), "--target", target, "--pause", "2")
    assert result["status"] == 200
    assert result["length"] == RESPONSE_SIZE
    assert result["sha256"] == pattern_sha256(RESPONSE_SIZE)
    assert rss.growth < MAX_GROWTH, f"server RSS grew by {rss.growth >> 20} MiB"


@pytest.fixture
def many_fds() -> Iterator[None]:
    """Room for a thousand sockets in this (the serving) process."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, 4 * SOCKETS + 256))
    if want < 2 * SOCKETS + 64:
        pytest.fail(f"RLIMIT_NOFILE hard limit {hard} is too low for {SOCKETS} sockets")
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.timeout(120)
def test_thousand_concurrent_websockets_echo(many_fds: None, serve_asgi: ServeASGI) -> None:
    served: Served = serve_asgi()
    with RssSampler(served.rss_pid()) as rss:
        result = run_module("support.ws_crowd", "--url",
                            f"ws://127.0.0.1:{served.port}/ws/echo", "--count", str(SOCKETS),
                            "--messages", "5", timeout=100)
    assert result["error_count"] == 0, result
    assert result["echoed"] == SOCKETS * 5
    if served.ours:  # (uvicorn with websockets takes about 120 MiB for the thousand)
        assert rss.growth < MAX_GROWTH, f"server RSS grew by {rss.growth >> 20} MiB"
