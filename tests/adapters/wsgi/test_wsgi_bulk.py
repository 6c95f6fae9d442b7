"""Big transfers with bounded memory: a 512 MiB streamed upload hashed by the app, and a
256 MiB streamed response to a client that stops reading for a while. The clients run in
their own process, so the RSS sampled is the serving process's alone. Under
AddressSanitizer (CYMONGOOSE_ASAN set) and ThreadSanitizer (CYMONGOOSE_TSAN, make tsan) the
sizes shrink to keep the run short. Under TSan the memory bound is not checked: its shadow
memory grows with every byte the process touches (65 MiB over a 64 MiB upload); the other
legs check it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from typing import Any

import pytest
from support.app_state import app_state
from support.gunicorn_server import TESTS_DIR
from support.patterns import pattern_sha256
from support.rss import RssSampler
from support.served import Served
from support.subprocess_env import child_env

ASAN = bool(os.environ.get("CYMONGOOSE_ASAN"))
TSAN = bool(os.environ.get("CYMONGOOSE_TSAN"))
UPLOAD_SIZE = (64 if ASAN or TSAN else 512) << 20
RESPONSE_SIZE = (32 if ASAN or TSAN else 256) << 20
MAX_GROWTH = None if TSAN else 64 << 20


def run_client(*args: str, timeout: float = 60) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "support.bulk_client", *args],
                         cwd=TESTS_DIR, env=child_env(str(TESTS_DIR)), capture_output=True,
                         timeout=timeout, check=False)
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-3000:]
    return json.loads(out.stdout.decode().strip().splitlines()[-1])  # type: ignore


@pytest.mark.timeout(90)
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_big_streamed_upload_is_hashed_with_bounded_memory(serve_app: Any,
                                                           chunked: bool) -> None:
    served: Served = serve_app(max_body_size=1 << 30)
    with RssSampler(served.rss_pid()) as rss:
        result = run_client("upload", "--port", str(served.port), "--target", "/hash",
                            "--size", str(UPLOAD_SIZE), *(["--chunked"] if chunked else []))
    assert result["status"] == 200, result
    got = json.loads(result["body"])
    assert got == {"length": UPLOAD_SIZE, "sha256": result["sent_sha256"]}
    assert MAX_GROWTH is None or rss.growth < MAX_GROWTH, f"RSS grew by {rss.growth >> 20} MiB"


@pytest.mark.timeout(90)
def test_slow_reader_of_big_stream_has_bounded_memory(served: Served) -> None:
    token = uuid.uuid4().hex
    target = f"/stream?size={RESPONSE_SIZE}&chunk=65536&token={token}"
    with RssSampler(served.rss_pid()) as rss:
        result = run_client("slow_read", "--port", str(served.port), "--target", target,
                            "--pause", "2")
    assert result["status"] == 200
    assert result["length"] == RESPONSE_SIZE
    assert result["sha256"] == pattern_sha256(RESPONSE_SIZE)
    assert MAX_GROWTH is None or rss.growth < MAX_GROWTH, f"RSS grew by {rss.growth >> 20} MiB"
    assert app_state(served.port, token)["closed"] is True
