"""The built artifacts under test: `make test-installed` builds them (tools/packaging/dist.py,
from a clean clone, offline) and names their directory in CYMONGOOSE_DIST."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def dist() -> Path:
    where = os.environ.get("CYMONGOOSE_DIST")
    if not where:
        raise pytest.UsageError("tests/installed needs CYMONGOOSE_DIST: run `make test-installed`")
    return Path(where).resolve()


@pytest.fixture(scope="session")
def wheel(dist: Path) -> Path:
    (found,) = dist.glob("cymongoose-*.whl")
    return found


@pytest.fixture(scope="session")
def sdist(dist: Path) -> Path:
    (found,) = dist.glob("cymongoose-*.tar.gz")
    return found
