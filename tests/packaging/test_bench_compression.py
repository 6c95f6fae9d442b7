"""The benchmark runner's compression phase (tests/benchmarks/benchkit/compressphase.py and
compressreport.py, issue 39): its names reach --phases and --only, its bodies are the same
bytes on every run, its goals are computed from the rounds of one run and fail on what they
should, and docs/performance.md's section is what the generator renders from the committed
results. Nothing here starts a server."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support import bench_runner

pytestmark = pytest.mark.no_asan

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "tests" / "benchmarks" / "results"
SECTION = re.compile(r"<!-- bench-compression:start -->\n(.*?)\n<!-- bench-compression:end -->",
                     re.S)


def _run(name: str, phase: str, rnd: int, rps: float) -> dict[str, Any]:
    return {"contender": name, "phase": phase, "round": rnd, "rps": rps, "valid": True}


def _data(run: Any, runs: list[dict[str, Any]], *, json_gzip: int = 2402,
          sse_misses: int = 0, zstd_p99: float = 0.9) -> dict[str, Any]:
    data = {"runs": runs, "checks": {"cmp-cymongoose-asgi": {
                "json-gzip": {"body_bytes": json_gzip},
                "json-identity": {"body_bytes": 10091},
                "html-zstd": {"body_bytes": 22030}}},
            "references": {"json": {"gzip": 2402, "zstd": 2277},
                           "html": {"gzip": 23416, "zstd": 21984}},
            "sse": {"cmp-cymongoose-asgi": {
                "identity": {"p99_ms": 0.8, "misses": 0},
                "gzip": {"p99_ms": 1.2, "misses": sse_misses},
                "zstd": {"p99_ms": zstd_p99, "misses": 0}}}}
    return data


def test_names_reach_the_runner() -> None:
    run = bench_runner.load()
    assert "compression" in run.OWN_PHASES
    names = run.compressphase.names()
    assert len(names) == len(set(names)) and "cmp-nginx-gzip-static" in names
    args = run.parse_args(["--phases", "compression", "--only", "cmp-cymongoose-asgi"])
    assert args.compression_sse is None


def test_the_bodies_are_the_same_bytes_every_time() -> None:
    bodies = bench_runner.load().compressphase.compressbodies
    data = bodies.json_body()
    assert data == bodies.json_body() and 9 * 1024 < len(data) <= 10 * 1024
    assert json.loads(data)["users"]
    page = bodies.html_body()
    assert page == bodies.html_body() and 95 * 1024 < len(page) <= 100 * 1024
    assert page.startswith(b"<!DOCTYPE html>") and page.endswith(b"</html>\n")
    import gzip
    assert bodies.decode(gzip.compress(page), "gzip") == page


def test_goals_come_from_paired_rounds_and_fail_when_they_should() -> None:
    report = bench_runner.load().compressreport
    runs = [_run("cmp-cymongoose-asgi", "json-gzip", 1, 1950),
            _run("cmp-uvicorn-gzip", "json-gzip", 1, 1000),
            _run("cmp-cymongoose-asgi", "json-gzip", 2, 3000),
            _run("cmp-uvicorn-gzip", "json-gzip", 2, 1000),
            _run("cmp-cymongoose-asgi", "json-gzip", 3, 1900),
            _run("cmp-uvicorn-gzip", "json-gzip", 3, 1000)]
    goals = {g["id"]: g for g in report._goals(_data(report, runs))}
    # Per-round ratios 1.95, 3 and 1.9: the median, not the ratio of the medians or means.
    assert goals["json_gzip_vs_uvicorn"]["met"] is False
    assert goals["json_gzip_vs_uvicorn"]["measured"] == "1.95x (3 rounds)"
    assert goals["static_vs_nginx"]["met"] is None  # not measured: no verdict
    assert goals["ratio"]["met"] is True and "html zstd" in goals["ratio"]["measured"]
    assert goals["sse"]["met"] is True and "+0.40 ms (gzip)" in goals["sse"]["measured"]
    bad = {g["id"]: g for g in report._goals(_data(report, runs, json_gzip=2600,
                                                   sse_misses=1))}
    assert bad["ratio"]["met"] is False and "json gzip" in bad["ratio"]["measured"]
    assert bad["sse"]["met"] is False  # a missed first event fails it whatever the p99
    slow = {g["id"]: g for g in report._goals(_data(report, runs, zstd_p99=2.0))}
    assert slow["sse"]["met"] is False and "(zstd)" in slow["sse"]["measured"]


def test_the_docs_section_and_readme_rows_are_rendered_from_the_committed_results() -> None:
    run = bench_runner.load()
    data = run.compressreport.load(RESULTS)
    assert data is not None, "results/compression.json is committed"
    (section,) = SECTION.findall((ROOT / "docs" / "performance.md").read_text())
    assert section == run.compressreport.docs_block(
        data, run.compressreport.link(ROOT, RESULTS)), (
        "rerender: python tests/benchmarks/run.py --report-from "
        "tests/benchmarks/results/results.json --readme yes --no-chart")
    rows = dict(run.compressreport.readme_rows(data))
    assert "Starlette GZipMiddleware on uvicorn" in rows[
        "Response compression, 10 KiB JSON req/s (gzip level 3)"]
    assert run.compressreport.readme_rows(None) == []
