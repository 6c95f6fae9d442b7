"""The generated results blocks: the README's Performance section is one summary table, the
chart and links; docs/performance.md holds every table. Both are what `make bench`'s
generator (tests/benchmarks/run.py, benchkit/report.py) renders from the committed results,
so the next run rewrites them in the same shape."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import bench_runner

pytestmark = pytest.mark.no_asan

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "tests" / "benchmarks" / "results"
BLOCK = re.compile(r"<!-- bench:start -->\n(.*?)\n<!-- bench:end -->", re.S)




def _block(path: Path) -> str:
    (found,) = BLOCK.findall(path.read_text(encoding="utf-8"))
    return found


def _tables(markdown: str) -> int:
    """Markdown tables: each has one |---| separator row."""
    return len(re.findall(r"^\|(?:-+\|)+$", markdown, re.M))


def test_readme_performance_is_a_summary_that_links_the_rest() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Performance\n", 1)[1].split("\n## ", 1)[0]
    assert _tables(section) == 1, "the README's Performance section keeps one summary table"
    assert "https://github.com/cymongoose/cymongoose/blob/main/docs/performance.md" in section
    page = _block(ROOT / "docs" / "performance.md")
    assert _tables(page) >= 8, "docs/performance.md's block holds every table of the run"
    for caption in ("Every contender against the same references", "Many keep-alive clients",
                    "WSGI/ASGI servers of the same app object", "A new connection per request",
                    "Reverse proxy", "Idle connections"):
        assert caption in page, caption


def test_both_blocks_are_what_the_generator_renders_from_the_committed_results() -> None:
    run = bench_runner.load()
    data = run.load_main(RESULTS / "results.json")
    realworld = run.realworldreport.load(RESULTS)
    extra = run.readme_extra(run.proxyreport.load(RESULTS), RESULTS,
                             run.idlereport.load(RESULTS), realworld)
    report = run.report
    assert _block(ROOT / "README.md") == report.readme_block(
        data, RESULTS, ROOT, run.readme_rows(realworld, RESULTS))
    page = ROOT / "docs" / "performance.md"
    assert _block(page) == report.performance_block(data, RESULTS, page, extra), (
        "rerender: python tests/benchmarks/run.py --report-from "
        "tests/benchmarks/results/results.json --readme yes --no-chart")
