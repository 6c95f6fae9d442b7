"""tests/benchmarks/run.py loaded as a module, for the tests of the benchmark runner (its
phases, reports and the docs' generated blocks), which is a script, not a package."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

RUNNER = Path(__file__).resolve().parents[1] / "benchmarks" / "run.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_run", RUNNER)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_run", module)
    spec.loader.exec_module(module)
    return module
