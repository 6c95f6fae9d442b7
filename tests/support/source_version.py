"""The version as written once, in src/cymongoose/__init__.py (read as text: the tests that
need it check artifacts and pages against the source, not against what is imported)."""

from __future__ import annotations

import re
from pathlib import Path

INIT = Path(__file__).resolve().parents[2] / "src" / "cymongoose" / "__init__.py"


def source_version() -> str:
    found = re.search(r'^__version__ = "([^"]+)"', INIT.read_text(encoding="utf-8"), re.M)
    assert found, f'no __version__ = "..." line in {INIT}'
    return found.group(1)
