"""The .pyi contract matches the built module, and the typed Python passes mypy --strict."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.timeout(300), pytest.mark.no_asan]


def test_stubtest_finds_no_drift() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "cymongoose._mongoose",
         "--allowlist", str(ROOT / "tests" / "typing" / "stubtest-allowlist.txt")],
        capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_public_api_type_checks_strictly(tmp_path: Path) -> None:
    usage = tmp_path / "usage.py"
    usage.write_text(
        "from cymongoose import Manager, Connection, MG_EV_HTTP_MSG, HttpMessage\n"
        "def handler(conn: Connection, ev: int, data: object) -> None:\n"
        "    if ev == MG_EV_HTTP_MSG and isinstance(data, HttpMessage):\n"
        "        conn.reply(200, data.body_bytes, {'X': 1})\n"
        "with Manager(handler) as mgr:\n"
        "    port: int = mgr.listen('http://127.0.0.1:0').local_addr[1]  # type: ignore[index]\n"
        "    mgr.poll(0)\n")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(usage),
         str(ROOT / "src" / "cymongoose")],
        capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
