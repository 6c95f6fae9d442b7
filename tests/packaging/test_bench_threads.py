"""The benchmark runner's threads phase (tests/benchmarks/benchkit/threadsphase.py and
threadsreport.py, issue 37): its names reach --phases and --only, and its document computes
each ratio from the rounds of one run, says which interpreter every figure ran on, and says
why when the phase was skipped. Nothing here starts a server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support import bench_runner

pytestmark = pytest.mark.no_asan

ROOT = Path(__file__).resolve().parents[2]

FT = {"version": "3.13.5 experimental free-threading build", "Py_GIL_DISABLED": 1,
      "gil_enabled": False, "PYTHON_GIL": "0", "executable": "/x/python3.13t"}
GIL = {"version": "3.13.0 (main)", "Py_GIL_DISABLED": 0, "gil_enabled": True,
       "PYTHON_GIL": None, "executable": "/x/python3.13"}




def _meta() -> dict[str, Any]:
    return {"date": "2026-01-01T00:00:00+00:00", "mode": "quick",
            "machine": {"cpu_model": "cpu", "logical_cpus": 2, "memory_gib": 4, "kernel": "6",
                        "os": "Debian", "load_average_at_start": [0.1, 0.1, 0.1]}}


def _settings() -> dict[str, Any]:
    return {"duration_s": 2, "warmup_s": 1, "rounds": 2, "connections": 50, "server_cpu": 0,
            "client_cpu": 1, "ft_python": "/x/python3.13t", "rss_goal": 0.6,
            "wrk": "wrk -t1 -c50 -d2s --latency"}


def _run(name: str, leg: str, rnd: int, rps: float, interp: dict[str, Any],
         phase: str = "price", app: str = "wsgi") -> dict[str, Any]:
    return {"contender": name, "phase": phase, "round": rnd, "rps": rps, "p50_us": 500,
            "p99_us": 900, "server_cpu_us_per_req": 1e6 / rps, "server_cpu_util": 1.0,
            "socket_errors": {"connect": 0, "read": 0, "write": 0, "timeout": 0},
            "non2xx": 0, "valid": True, "part": phase, "app": app, "leg": leg, "n": 1,
            "interpreter": interp, "rss_after": 30 * 2**20}


def _rss(app: str, leg: str, rnd: int, rss_mib: float) -> dict[str, Any]:
    return {"contender": f"rss-{leg}-{app}", "phase": "rss", "round": rnd, "part": "rss",
            "app": app, "leg": leg, "interpreter": FT, "valid": True, "invalid_reason": None,
            "rss": int(rss_mib * 2**20), "pss": int(rss_mib * 0.9 * 2**20),
            "counted_processes": int(leg[7:]) if leg.startswith("workers") else 1,
            "threads": [12]}


def test_the_phase_and_its_servers_are_known_to_the_runner() -> None:
    run = bench_runner.load()
    assert "threads" in run.OWN_PHASES
    names = run.threadsphase.names()
    assert len(names) == len(set(names))
    for name in ("price-ft-loops1-raw", "price-ft-wsgi", "price-gil-asgi",
                 "price-granian-ft-wsgi", "scale-loops2-asgi", "scale-workers8-raw",
                 "rss-loops2-flask", "rss-workers2-fastapi", "rss-loops4-flask",
                 "rss-workers4-flask", "apps-ft-wait", "apps-ft-gil-on-cpu", "apps-gil-cpu",
                 "apps-granian-ft-wait"):
        assert name in names, name
    assert "price-granian-ft-raw" not in names  # granian serves no raw handler
    args = run.parse_args(["--phases", "threads", "--ft-python", "/nowhere/python3.13t"])
    assert args.ft_python == "/nowhere/python3.13t"
    bench_mk = (ROOT / "tests" / "benchmarks" / "bench.mk").read_text()
    assert "threads" in bench_mk.split("BENCH_ARGS ?=")[0]


def test_ratios_are_medians_of_the_rounds_of_one_run_with_the_interpreter() -> None:
    report = bench_runner.load().threadsreport
    runs = []
    for rnd, (loops, plain, gil) in enumerate([(90, 100, 120), (99, 100, 125),
                                               (80, 100, 110)], 1):
        runs += [_run("price-ft-loops1-wsgi", "ft-loops1", rnd, loops, FT),
                 _run("price-ft-wsgi", "ft", rnd, plain, FT),
                 _run("price-gil-wsgi", "gil", rnd, gil, GIL)]
    for rnd, (loops2, workers2) in enumerate([(50, 90), (52, 88)], 1):
        runs += [_rss("flask", "loops2", rnd, loops2), _rss("flask", "workers2", rnd, workers2),
                 _rss("flask", "plain", rnd, 40), _rss("flask", "loops4", rnd, 110),
                 _rss("flask", "workers4", rnd, 160)]
    data = report.build(_meta(), _settings(), {}, runs, {"ft_interpreter": FT})
    price = data["summary"]["price"]["wsgi"]
    assert price["ratios"]["loops1_vs_plain"]["rps"] == {"ratio": 0.9, "rounds": 3}
    # 100/120, 100/125, 100/110: the median of the rounds, not the ratio of the medians.
    assert price["ratios"]["ft_vs_gil_build"]["rps"]["ratio"] == round(100 / 120, 3)
    assert price["legs"]["gil"]["interpreter"] == GIL
    rss = data["summary"]["rss"]["flask"]["by_n"]
    assert rss["2"]["ratios"]["rss"]["ratio"] == round((50 / 90 + 52 / 88) / 2, 3)
    assert rss["2"]["goal_met"] is True
    assert rss["4"]["ratios"]["rss"]["ratio"] == round(110 / 160, 3)
    assert rss["4"]["goal_met"] is False
    text = report.markdown(data)
    assert "| Flask hello | 4 |" in text and "**no**" in text
    assert "3.13.5 free-threaded, GIL off, PYTHON_GIL=0" in text
    assert "3.13.0 GIL build, GIL on" in text


def test_the_app_threads_part_compares_the_gil_off_with_on_and_the_gil_build() -> None:
    report = bench_runner.load().threadsreport
    gil_on = dict(FT, gil_enabled=True, PYTHON_GIL="1")
    runs = []
    for rnd, (off, on, build) in enumerate([(2000, 1000, 1500), (2200, 1000, 1600)], 1):
        runs += [_run("apps-ft-cpu", "ft", rnd, off, FT, "apps", "cpu"),
                 _run("apps-ft-gil-on-cpu", "ft-gil-on", rnd, on, gil_on, "apps", "cpu"),
                 _run("apps-gil-cpu", "gil", rnd, build, GIL, "apps", "cpu")]
    info = {"ft_interpreter": FT,
            "apps": {"cpus": 2, "wait_s": 0.002, "cpu_loop": 20000, "connections": {"cpu": 50},
                     "layout": {"cpu": {"kind": "shared", "wrk_threads": 1,
                                        "server_cpus": [0, 1], "client_cpus": [1]}},
                     "legs": {"ft": "3.13t, GIL off, one process"}}}
    data = report.build(_meta(), _settings(), {}, runs, info)
    cpu = data["summary"]["apps"]["cpu"]
    assert cpu["ratios"]["gil_off_vs_on"]["rps"] == {"ratio": 2.1, "rounds": 2}
    assert cpu["ratios"]["ft_vs_gil_build"]["rps"]["ratio"] == round(
        (2000 / 1500 + 2200 / 1600) / 2, 3)
    assert "wait" not in data["summary"]["apps"]  # not measured: no section, no figure
    text = report.markdown(data)
    assert "## WSGI app threads" in text and "20,000 steps" in text
    assert "server on CPUs [0, 1], wrk -t1 -c50 on [1] (shared)" in text
    assert "| 3.13t, GIL off, one process | 3.13.5 free-threaded, GIL off" in text


def test_a_skipped_phase_says_why() -> None:
    report = bench_runner.load().threadsreport
    why = "no free-threaded CPython 3.13 at /nowhere/python3.13t"
    data = report.build(_meta(), _settings(), {}, [], {}, why)
    assert data["skipped"] == why
    assert f"Skipped: {why}." in report.markdown(data)
