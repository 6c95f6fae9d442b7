"""The benchmark runner's pythons phase (tests/benchmarks/benchkit/pythons.py) with a
free-threaded build as a version of its own: named 3.13t and ordered after 3.13. Nothing here
starts a server."""

from __future__ import annotations

import types

import pytest
from support import bench_runner

pytestmark = pytest.mark.no_asan


def test_a_free_threaded_build_is_a_version_of_its_own_after_its_gil_build() -> None:
    bench_runner.load()  # puts benchkit on the path
    from benchkit import pythons

    bench = types.SimpleNamespace(args=types.SimpleNamespace(pythons="3.14,3.13t,3.10,3.13",
                                                             quick=False))
    assert pythons.wanted_versions(bench, "3.11", {}) == ["3.10", "3.13", "3.13t", "3.14"]
    bench.args.pythons = ""
    found = {"3.13t": "/x/python3.13t", "3.12": "/x/python3.12", "3.13": "/x/python3.13"}
    assert pythons.wanted_versions(bench, "3.11", found) == ["3.11", "3.12", "3.13", "3.13t"]
    assert pythons.VERSION.fullmatch("3.13t") and not pythons.VERSION.fullmatch("3.13tt")


def test_a_merged_run_replaces_only_its_versions_rows_and_says_when_it_ran() -> None:
    bench_runner.load()
    from benchkit import pythonsmerge

    def run(name: str, rps: float) -> dict[str, object]:
        return {"contender": name, "phase": "pythons", "rps": rps}

    old = {"meta": {"date": "2026-11-27T07:00:00+00:00",
                    "shapes": {"pythons": {"versions": {
                        "3.13": {"state": "measured", "full_version": "3.13.0"},
                        "3.14": {"state": "skipped", "reason": "not found"}}}}},
           "contenders": {"cymongoose-raw": {}, "cymongoose-wsgi@py3.13": {},
                          "cymongoose-wsgi@py3.14": {"state": "skipped"}},
           "runs": [run("cymongoose-raw", 1), run("cymongoose-wsgi@py3.13", 2)]}
    meta = {"date": "2026-11-29T05:00:00+00:00", "tools": {"runner_python": "3.14.10"},
            "shapes": {"pythons": {"versions": {
                "3.14": {"state": "measured", "full_version": "3.14.10"}}}}}
    status = {"cymongoose-wsgi": {"state": "ready"}, "cymongoose-wsgi@py3.14": {"state": "x"}}
    runs = [run("cymongoose-wsgi@py3.14", 3), run("cymongoose-wsgi", 4)]
    merged_meta, merged_status, merged_runs = pythonsmerge.merge(old, meta, status, runs)
    versions = merged_meta["shapes"]["pythons"]["versions"]
    assert list(versions) == ["3.13", "3.14"]
    assert versions["3.13"] == {"state": "measured", "full_version": "3.13.0"}
    assert versions["3.14"]["measured"] == "2026-11-29T05:00:00+00:00"
    assert merged_meta["date"] == "2026-11-27T07:00:00+00:00"  # the full run's document
    assert merged_status["cymongoose-wsgi@py3.14"] == {"state": "x"}
    assert "cymongoose-wsgi" not in merged_status  # this run's own contenders stay out
    assert [r["rps"] for r in merged_runs] == [1, 2, 3]
