"""Every input the fuzzers kept (tests/fuzz/corpus/NAME/, made by make fuzz) replayed
through its harness against the normal build: each once found new code, so each is a
regression test. tests/fuzz/regressions/NAME/ holds, under names that say what they were,
the inputs that found a defect (the corpus merge may drop them; nothing drops these), and a
harness's own SEEDS replay too."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from .harnesses import NAMES

CORPUS = Path(__file__).parent / "corpus"
REGRESSIONS = Path(__file__).parent / "regressions"


def _inputs() -> list[object]:
    cases = []
    for name in NAMES:
        module = importlib.import_module(f"fuzz.harnesses.{name}")
        for i, seed in enumerate(module.SEEDS):
            cases.append(pytest.param(name, seed, id=f"{name}-seed{i}"))
        folder = REGRESSIONS / name
        for path in sorted(folder.iterdir()) if folder.is_dir() else []:
            cases.append(pytest.param(name, path.read_bytes(), id=f"{name}-{path.name}"))
        folder = CORPUS / name
        files = sorted(folder.iterdir()) if folder.is_dir() else []
        # One test per harness, not per file: a corpus holds hundreds of inputs.
        cases.append(pytest.param(name, files, id=f"{name}-corpus"))
    return cases


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("name", "data"), _inputs())
def test_replay(name: str, data: bytes | list[Path]) -> None:
    one_input = importlib.import_module(f"fuzz.harnesses.{name}").one_input
    if isinstance(data, bytes):
        one_input(data)
        return
    for path in data:
        try:
            one_input(path.read_bytes())
        except AssertionError as exc:
            raise AssertionError(f"{path.relative_to(CORPUS.parent)}: {exc}") from exc
