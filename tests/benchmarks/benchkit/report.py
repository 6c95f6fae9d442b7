"""Summaries, targets and outputs: results.json, results.md, the chart, and the generated
blocks of README.md and docs/performance.md."""

from __future__ import annotations

import json
import logging
import os
import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from . import shapereport

log = logging.getLogger("bench")

MIB = 1024 * 1024
BLOCK_START = "<!-- bench:start -->"
BLOCK_END = "<!-- bench:end -->"
# The README is also the package index's page, where relative links do not resolve: its
# block links files of the repository by absolute address (tests/packaging checks them).
REPO_BLOB = "https://github.com/cymongoose/cymongoose/blob/main"
REPO_RAW = "https://raw.githubusercontent.com/cymongoose/cymongoose/main"

# The targets, as ratios within one run. goal None: shown for information.
TARGETS = [
    {"id": "hello_rps", "title": "Hello req/s, raw handler ÷ Mongoose in C",
     "ours": "cymongoose-raw", "ref": "mongoose-c", "phase": "hello", "metric": "rps",
     "goal": 0.95, "cmp": ">="},
    {"id": "hello_cpu", "title": "Server CPU per request, raw handler ÷ Mongoose in C",
     "ours": "cymongoose-raw", "ref": "mongoose-c", "phase": "hello",
     "metric": "server_cpu_us_per_req", "goal": 1.15, "cmp": "<="},
    {"id": "static_bytes", "title": "Static bytes/s, serve_dir ÷ nginx sendfile",
     "ours": "cymongoose-static", "ref": "nginx-static", "phase": "static",
     "metric": "bytes_per_s", "goal": 0.8, "cmp": ">="},
    {"id": "hello_rps_handles", "title": "Hello req/s, @handles(MG_EV_HTTP_MSG) ÷ Mongoose in C",
     "ours": "cymongoose-handles", "ref": "mongoose-c", "phase": "hello", "metric": "rps",
     "goal": 0.95, "cmp": ">="},
    {"id": "hello_cpu_handles",
     "title": "Server CPU per request, @handles(MG_EV_HTTP_MSG) ÷ Mongoose in C",
     "ours": "cymongoose-handles", "ref": "mongoose-c", "phase": "hello",
     "metric": "server_cpu_us_per_req", "goal": 1.15, "cmp": "<="},
    # WSGI (same app objects on every server: servers/hello_apps.py). Overhead per request =
    # server CPU per request - the app's own in-process CPU per call (app_cost.py).
    {"id": "wsgi_rps", "title": "Raw WSGI hello req/s, ours ÷ granian WSGI",
     "ours": "cymongoose-wsgi", "ref": "granian-wsgi", "phase": "hello", "metric": "rps",
     "goal": 1.4, "cmp": ">="},
    {"id": "flask_rps_gthread", "title": "Flask hello req/s, ours ÷ Flask on gunicorn gthread",
     "ours": "cymongoose-flask", "ref": "flask-gunicorn-gthread", "phase": "hello",
     "metric": "rps", "goal": 1.6, "cmp": ">="},
    {"id": "flask_rps_granian", "title": "Flask hello req/s, ours ÷ Flask on granian",
     "ours": "cymongoose-flask", "ref": "granian-flask", "phase": "hello", "metric": "rps",
     "goal": 1.15, "cmp": ">="},
    {"id": "wsgi_overhead",
     "title": "Server overhead per request (CPU − app in-process), raw WSGI: ours ÷ granian",
     "ours": "cymongoose-wsgi", "ref": "granian-wsgi", "phase": "hello",
     "metric": "overhead_us_per_req", "goal": 0.5, "cmp": "<="},
    {"id": "flask_overhead",
     "title": "Server overhead per request (CPU − app in-process), Flask: ours ÷ granian",
     "ours": "cymongoose-flask", "ref": "granian-flask", "phase": "hello",
     "metric": "overhead_us_per_req", "goal": 0.5, "cmp": "<="},
    # ASGI (issue #9), the same way: raw ASGI hello and FastAPI hello on every server.
    {"id": "asgi_rps_granian", "title": "Raw ASGI hello req/s, ours ÷ granian ASGI",
     "ours": "cymongoose-asgi", "ref": "granian-asgi", "phase": "hello", "metric": "rps",
     "goal": 1.5, "cmp": ">="},
    {"id": "asgi_rps_uvicorn", "title": "Raw ASGI hello req/s, ours ÷ uvicorn",
     "ours": "cymongoose-asgi", "ref": "uvicorn-raw", "phase": "hello", "metric": "rps",
     "goal": 2.0, "cmp": ">="},
    {"id": "fastapi_rps_uvicorn", "title": "FastAPI hello req/s, ours ÷ FastAPI on uvicorn",
     "ours": "cymongoose-fastapi", "ref": "fastapi", "phase": "hello", "metric": "rps",
     "goal": 1.3, "cmp": ">="},
    {"id": "fastapi_rps_granian", "title": "FastAPI hello req/s, ours ÷ FastAPI on granian",
     "ours": "cymongoose-fastapi", "ref": "granian-fastapi", "phase": "hello", "metric": "rps",
     "goal": 1.1, "cmp": ">="},
    {"id": "asgi_overhead",
     "title": "Server overhead per request (CPU − app in-process), raw ASGI: ours ÷ granian",
     "ours": "cymongoose-asgi", "ref": "granian-asgi", "phase": "hello",
     "metric": "overhead_us_per_req", "goal": 0.5, "cmp": "<="},
    {"id": "fastapi_overhead",
     "title": "Server overhead per request (CPU − app in-process), FastAPI: ours ÷ granian",
     "ours": "cymongoose-fastapi", "ref": "granian-fastapi", "phase": "hello",
     "metric": "overhead_us_per_req", "goal": 0.5, "cmp": "<="},
    # Issue #10: the access log on, to a file, keeps most of the throughput.
    {"id": "access_log_rps", "title": "Raw WSGI hello req/s, access log to a file ÷ without",
     "ours": "cymongoose-wsgi-access-log", "ref": "cymongoose-wsgi", "phase": "hello",
     "metric": "rps", "goal": 0.7, "cmp": ">="},
    {"id": "hello_rps_c200", "title": "Hello req/s at 200 connections, ours ÷ Mongoose in C",
     "ours": "cymongoose-raw", "ref": "mongoose-c", "phase": "c200", "metric": "rps",
     "goal": None, "cmp": ">="},
    {"id": "hello_rps_nginx", "title": "Hello req/s, raw handler ÷ nginx",
     "ours": "cymongoose-raw", "ref": "nginx", "phase": "hello", "metric": "rps",
     "goal": None, "cmp": ">="},
    {"id": "static_vs_c", "title": "Static bytes/s, serve_dir ÷ Mongoose in C serve_dir",
     "ours": "cymongoose-static", "ref": "mongoose-c-static", "phase": "static",
     "metric": "bytes_per_s", "goal": None, "cmp": ">="},
    {"id": "flask_overhead_gthread",
     "title": "Server overhead per request, Flask: ours ÷ gunicorn gthread",
     "ours": "cymongoose-flask", "ref": "flask-gunicorn-gthread", "phase": "hello",
     "metric": "overhead_us_per_req", "goal": None, "cmp": "<="},
]
# The apps' tables list these first, in this order; others follow by name.
APP_ORDER = ["hello_apps:wsgi_hello", "hello_apps:flask_app", "hello_apps:asgi_hello"]
RSS_GOAL = 1 * MIB
PHASE_TITLES = {"hello": "Hello", "c200": "Hello", "static": "Static files"}
# docs/performance.md's headline ratios: {id} is that target's measured figure.
PERFORMANCE_SUMMARY = [
    "**Raw handler**: {hello_rps} the req/s of Mongoose in C, at {hello_cpu} its CPU per "
    "request; {hello_rps_nginx} nginx's req/s",
    "**Static files** (`serve_dir`): {static_bytes} nginx's bytes/s (sendfile), "
    "{static_vs_c} Mongoose in C's",
    "**WSGI**, req/s of the same app on ours ÷ on the other server: raw hello {wsgi_rps} "
    "granian; Flask {flask_rps_gthread} gunicorn gthread, {flask_rps_granian} granian",
    "**ASGI**, the same way: raw hello {asgi_rps_granian} granian, {asgi_rps_uvicorn} uvicorn; "
    "FastAPI {fastapi_rps_uvicorn} uvicorn, {fastapi_rps_granian} granian",
    "**Server overhead per request** (CPU − the app's own), ours ÷ granian's, lower is "
    "better: raw WSGI {wsgi_overhead}, Flask {flask_overhead}, raw ASGI {asgi_overhead}, "
    "FastAPI {fastapi_overhead}",
    "**Memory**: RSS growth {rss_growth} over {rss_requests} requests after warm-up",
]

# The README's summary table (its Performance section; every other table is in
# docs/performance.md): a row per kind of server, {id} as above.
README_SUMMARY = [
    ("Raw handler, hello req/s", "{hello_rps} Mongoose in C, {hello_rps_nginx} nginx"),
    ("Raw handler, server CPU per request", "{hello_cpu} Mongoose in C's"),
    ("Static files (`serve_dir`), bytes/s", "{static_bytes} nginx (sendfile)"),
    ("WSGI hello req/s", "raw {wsgi_rps} granian; Flask {flask_rps_gthread} gunicorn gthread, "
     "{flask_rps_granian} granian"),
    ("ASGI hello req/s", "raw {asgi_rps_granian} granian, {asgi_rps_uvicorn} uvicorn; FastAPI "
     "{fastapi_rps_uvicorn} uvicorn, {fastapi_rps_granian} granian"),
    ("Server overhead per request (CPU − the app's), lower is better",
     "raw WSGI {wsgi_overhead}, Flask {flask_overhead}, raw ASGI {asgi_overhead}, FastAPI "
     "{fastapi_overhead} granian's"),
    ("Memory", "RSS growth {rss_growth} over {rss_requests} requests after warm-up"),
]


def _median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def grouped(runs: list[dict[str, Any]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """The runs by contender, then by phase."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for run in runs:
        out.setdefault(run["contender"], {}).setdefault(run["phase"], []).append(run)
    return out


def run_counts(all_runs: list[dict[str, Any]]) -> dict[str, Any]:
    """What every summary cell starts with: the runs, how many were valid and why the others
    were not, and the errors of every run, valid or not."""
    return {
        "runs": len(all_runs), "valid_runs": sum(1 for r in all_runs if r["valid"]),
        "invalid_reasons": sorted({r["invalid_reason"] for r in all_runs if not r["valid"]}),
        "socket_errors": sum(sum(r["socket_errors"].values()) for r in all_runs),
        "non2xx": sum(r["non2xx"] for r in all_runs),
    }


def cell_summary(all_runs: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, Any]:
    """A summary cell of a phase's own document: run_counts() of every run, then over the
    valid ones the medians of `keys` and the range of req/s."""
    valid = [r for r in all_runs if r["valid"]]
    s: dict[str, Any] = run_counts(all_runs)
    if valid:
        s.update({k: _median([r.get(k) for r in valid]) for k in keys})
        s["rps_min"] = min(r["rps"] for r in valid)
        s["rps_max"] = max(r["rps"] for r in valid)
    return s


def summarize(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    summary: dict[str, dict[str, Any]] = {}
    for name, phases in grouped(runs).items():
        for phase, all_runs in phases.items():
            valid = [r for r in all_runs if r["valid"]]
            s: dict[str, Any] = run_counts(all_runs)
            if valid:
                for key in ("rps", "bytes_per_s", "p50_us", "p99_us", "server_cpu_us_per_req",
                            "server_cpu_util", "client_cpu_util", "overhead_us_per_req"):
                    s[key] = _median([r.get(key) for r in valid])
                s["rps_min"] = min(r["rps"] for r in valid)
                s["rps_max"] = max(r["rps"] for r in valid)
                s["bytes_per_s_min"] = min(r["bytes_per_s"] for r in valid)
                s["bytes_per_s_max"] = max(r["bytes_per_s"] for r in valid)
                s["rss_after_max"] = max(r["rss_after"] for r in valid)
                s["server_processes"] = valid[-1]["server_processes"]
            summary.setdefault(name, {})[phase] = s
    return summary


def paired_ratio(runs: list[dict[str, Any]], t: dict[str, Any]) -> tuple[float | None, int]:
    """Median of per-round ratios (rounds are interleaved, so each pair shares conditions)."""
    def by_round(name: str) -> dict[int, float]:
        return {r["round"]: r[t["metric"]] for r in runs
                if r["contender"] == name and r["phase"] == t["phase"] and r["valid"]
                and r.get(t["metric"]) is not None}
    ours, ref = by_round(t["ours"]), by_round(t["ref"])
    # An overhead can come out at or below zero within noise: ours may, the divisor not.
    ratios = [ours[k] / ref[k] for k in sorted(ours.keys() & ref.keys()) if ref[k] > 0]
    return (_median(ratios), len(ratios))


def evaluate(summary: dict[str, Any], runs: list[dict[str, Any]],
             rss: dict[str, Any] | None,
             status: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    status = status or {}
    out = []
    for t in TARGETS:
        ours = summary.get(t["ours"], {}).get(t["phase"], {})
        ref = summary.get(t["ref"], {}).get(t["phase"], {})
        ratio, pairs = paired_ratio(runs, t)
        row = {k: t[k] for k in ("id", "title", "ours", "ref", "phase", "metric", "goal", "cmp")}
        row.update(ours_value=ours.get(t["metric"]), ref_value=ref.get(t["metric"]),
                   ratio=round(ratio, 3) if ratio is not None else None, pairs=pairs)
        if ratio is None:
            row["met"] = None
            row["note"] = "not measured (see the contenders' status)"
        else:
            row["met"] = (None if t["goal"] is None else
                          ratio >= t["goal"] if t["cmp"] == ">=" else ratio <= t["goal"])
            if t["metric"] == "rps" and (ref.get("client_cpu_util") or 0) >= 0.9:
                row["note"] = ("wrk was ~100% busy against the reference: client-bound, "
                               "so compare server CPU per request")
        if t["metric"] == "overhead_us_per_req" and ratio is not None:
            # The absolute figures, since a ratio of differences hides their size.
            app_ours, app_ref = (status.get(n, {}).get("app_cpu_us_per_call")
                                 for n in (t["ours"], t["ref"]))
            row["note"] = (f"{_fmt(ours.get(t['metric']), 1)} vs {_fmt(ref.get(t['metric']), 1)} "
                           f"µs/req: CPU {_fmt(ours.get('server_cpu_us_per_req'), 1)} vs "
                           f"{_fmt(ref.get('server_cpu_us_per_req'), 1)} − app "
                           f"{_fmt(app_ours)} vs {_fmt(app_ref)} µs/call")
            if ratio <= 0:
                row["note"] += "; ours is at the app's own cost, within noise"
        out.append(row)
    if rss is not None:
        out.append({"id": "rss_growth", "title": f"RSS growth over {rss['requests']:,} "
                    "requests after warm-up", "ours": rss["contender"], "ref": None,
                    "goal": RSS_GOAL, "cmp": "<", "ours_value": rss["growth"],
                    "ratio": None, "met": rss["growth"] < RSS_GOAL and rss["valid"]})
    return out


def add_overheads(status: dict[str, Any], runs: list[dict[str, Any]]) -> None:
    """Each run of a server whose app was measured in-process gets that cost and its overhead:
    server CPU per request minus the app's own CPU per call (no server can go below it)."""
    for run in runs:
        app_us = status.get(run["contender"], {}).get("app_cpu_us_per_call")
        cpu = run.get("server_cpu_us_per_req")
        if app_us is not None and cpu is not None:
            run["app_cpu_us_per_call"] = app_us
            run["overhead_us_per_req"] = round(cpu - app_us, 3)


def build(meta: dict[str, Any], status: dict[str, Any], runs: list[dict[str, Any]],
          rss: dict[str, Any] | None,
          apps: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    add_overheads(status, runs)
    summary = summarize(runs)
    targets = evaluate(summary, runs, rss, status)
    # The ceiling only means something if it sends what ours sends.
    ours, ceiling = (status.get(n, {}).get("answer") for n in ("cymongoose-raw", "mongoose-c"))
    if ours and ceiling and ours != ceiling:
        for t in targets:
            if t.get("ref") == "mongoose-c":
                t["note"] = (t.get("note", "") + " the C server's answer differs from ours "
                             "(see results.json)").strip()
    data = {"meta": meta, "contenders": status, "summary": summary,
            "targets": targets, "rss": rss, "apps": apps or [], "runs": runs}
    data["shapes"] = shapereport.summarize(data)  # the traffic shapes' ratios (issue 22)
    return data


def _fmt_int(v: float | None) -> str:
    return "–" if v is None else f"{v:,.0f}"


def _fmt(v: float | None, digits: int = 2) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v * 100:.0f}%"


def _mib(v: float | None) -> str:
    return "–" if v is None else f"{v / MIB:.1f}"


def _goal_text(t: dict[str, Any]) -> str:
    if t["id"] == "rss_growth":
        return "< 1 MiB"
    if t["goal"] is None:
        return "(info)"
    return f"{'≥' if t['cmp'] == '>=' else '≤'} {t['goal']:.2f}×"


def _measured_text(t: dict[str, Any]) -> str:
    if t["id"] == "rss_growth":
        return f"{t['ours_value'] / 1024:+,.0f} KiB"
    return "–" if t["ratio"] is None else f"{t['ratio']:.2f}×"


def _met_text(t: dict[str, Any]) -> str:
    return {True: "yes", False: "**no**", None: "–"}[t["met"]]


def machine_line(meta: dict[str, Any]) -> str:
    m = meta["machine"]
    virt = f", {m['virtualization']}" if m.get("virtualization") not in ("", "none", None) else ""
    return (f"{m['cpu_model']}, {m['logical_cpus']} logical CPUs, {m['memory_gib']} GiB, "
            f"Linux {m['kernel']} ({m['os']}{virt})")


def run_line(meta: dict[str, Any], extra: str = "") -> str:
    """When and where a run was made: the first line of each results document."""
    load = ", ".join(str(x) for x in meta["machine"]["load_average_at_start"])
    return (f"{meta['date']} ({meta['mode']} run{extra}) on {machine_line(meta)}; load average "
            f"at start {load}.")


def method_line(meta: dict[str, Any]) -> str:
    s = meta["settings"]
    pin = (f"server pinned to CPU {s['server_cpu']}, wrk to CPU {s['client_cpu']}"
           if s["server_cpu"] is not None else "no CPU pinning (fewer than 2 CPUs)")
    rounds = "1 round" if s["rounds"] == 1 else f"{s['rounds']} interleaved rounds (medians)"
    static = "1 round" if s["static_rounds"] == 1 else f"{s['static_rounds']} rounds"
    return (f"`{s['wrk']}`, {rounds}, {s['warmup_s']:g} s warm-up each, one more round at "
            f"{s['c200']} connections; static files: {static} over {s['static_files']} "
            f"requested round-robin; {pin}")


def _contender_table(data: dict[str, Any], phase: str, ref: str | None) -> list[str]:
    summary, status = data["summary"], data["contenders"]
    rows = [(n, p[phase]) for n, p in summary.items() if phase in p and "rps" in p[phase]]
    key = "bytes_per_s" if phase == "static" else "rps"
    rows.sort(key=lambda item: -(item[1].get(key) or 0))
    ref_value = summary.get(ref, {}).get(phase, {}).get(key) if ref else None
    lines = []
    if phase == "static":
        lines.append(f"| Contender | MiB/s | × {ref} | req/s | p50 ms | p99 ms | server CPU µs/req "
                     "| server CPU | wrk CPU | errors | non-2xx | RSS MiB start → end |")
    else:
        lines.append(f"| Contender | req/s | min–max | × {ref} | p50 ms | p99 ms | server CPU "
                     "µs/req | server CPU | wrk CPU | errors | non-2xx | RSS MiB start → end |")
    lines.append("|" + "---|" * (lines[0].count("|") - 1))
    for name, s in rows:
        st = status.get(name, {})
        ratio = (f"{s[key] / ref_value:.2f}" if ref_value and s.get(key) else "–")
        label = st.get("label", name)
        if not st.get("keepalive", True):
            label += " †"
        rss = f"{_mib(st.get('rss_start'))} → {_mib(st.get('rss_end'))}"
        common = (f"{_fmt(s['p50_us'] / 1000)} | {_fmt(s['p99_us'] / 1000)} | "
                  f"{_fmt(s['server_cpu_us_per_req'])} | {_pct(s['server_cpu_util'])} | "
                  f"{_pct(s['client_cpu_util'])} | {s['socket_errors']} | {s['non2xx']} | {rss} |")
        if phase == "static":
            lines.append(f"| {label} | {_fmt(s['bytes_per_s'] / MIB, 1)} | {ratio} | "
                         f"{_fmt_int(s['rps'])} | {common}")
        else:
            lines.append(f"| {label} | {_fmt_int(s['rps'])} | {_fmt_int(s['rps_min'])}–"
                         f"{_fmt_int(s['rps_max'])} | {ratio} | {common}")
    return lines


def _scale_phases(data: dict[str, Any]) -> list[str]:
    """The many-clients phases ("c1000", "c10000", ...: not the c200 round), fewest first."""
    return sorted({ph for phases in data["summary"].values() for ph in phases
                   if re.fullmatch(r"c\d+", ph) and ph != "c200"}, key=lambda ph: int(ph[1:]))


def scale_table(data: dict[str, Any], ref: str = "mongoose-c") -> list[str]:
    """The README's many-clients table: per count of keep-alive connections, each server's
    req/s ÷ the reference's (medians; or why no run was valid) and wrk's socket errors.
    Ours first, then the reference, then the others; servers with no valid run last."""
    summary, status = data["summary"], data["contenders"]
    phases = _scale_phases(data)
    if not phases:
        return []
    lines = ["| Contender | " + " | ".join(f"{int(ph[1:]):,} connections | errors"
                                          for ph in phases) + " |",
             "|---|" + "---|---|" * len(phases)]

    def cells(name: str) -> list[str]:
        out = []
        for ph in phases:
            s = summary.get(name, {}).get(ph)
            if not s:
                out += ["–", "–"]
                continue
            base = summary.get(ref, {}).get(ph, {}).get("rps")
            if s.get("rps") is not None:
                out.append(f"{s['rps'] / base:.2f}×" if base else "–")
            else:
                out.append("; ".join(s["invalid_reasons"]) or "–")
            out.append(f"{s['socket_errors']:,}")
        return out

    def rank(name: str) -> tuple[bool, int]:
        valid = any(summary[name].get(ph, {}).get("rps") is not None for ph in phases)
        return (not valid, 0 if name.startswith("cymongoose") else 1 if name == ref else 2)

    for name in sorted((n for n in summary if any(ph in summary[n] for ph in phases)),
                       key=rank):
        row = cells(name)
        if any(c != "–" for c in row):
            lines.append(f"| {status.get(name, {}).get('label', name)} | "
                         + " | ".join(row) + " |")
    return lines if len(lines) > 2 else []


def _app_groups(data: dict[str, Any]) -> list[tuple[str, list[tuple[str, dict[str, Any]]]]]:
    """[(app label, [(contender, its hello summary), ...]), ...]: the servers of each app that
    has at least one measured server, fastest first."""
    summary, status = data["summary"], data["contenders"]
    groups: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    labels: dict[str, str] = {}
    for name, st in status.items():
        app = st.get("app")
        hello = summary.get(name, {}).get("hello", {})
        if app and hello.get("rps"):
            groups.setdefault(app["ref"], []).append((name, hello))
            labels.setdefault(app["ref"], app.get("label", app["ref"]))
    rank = {ref: i for i, ref in enumerate(APP_ORDER)}
    out = []
    for ref in sorted(groups, key=lambda r: (rank.get(r, len(rank)), r)):
        rows = sorted(groups[ref], key=lambda item: -(item[1].get("rps") or 0))
        out.append((labels[ref], rows))
    return out


def app_table(data: dict[str, Any]) -> list[str]:
    """Per app, each server's req/s, CPU per request, the app's in-process cost, and the
    server's overhead per request (also as a multiple of ours)."""
    status = data["contenders"]
    lines = ["| App | Server | req/s | server CPU µs/req | app in-process µs/call | "
             "overhead µs/req | overhead × ours |", "|---|---|---|---|---|---|---|"]
    for label, rows in _app_groups(data):
        ours = next((s.get("overhead_us_per_req") for n, s in rows
                     if n.startswith("cymongoose")), None)
        for name, s in rows:
            st = status.get(name, {})
            over = s.get("overhead_us_per_req")
            times = f"{over / ours:.2f}" if over is not None and ours and ours > 0 else "–"
            server = st.get("label", name) + ("" if st.get("keepalive", True) else " †")
            lines.append(f"| {label} | {server} | {_fmt_int(s.get('rps'))} | "
                         f"{_fmt(s.get('server_cpu_us_per_req'))} | "
                         f"{_fmt(st.get('app_cpu_us_per_call'))} | {_fmt(over)} | {times} |")
    return lines if len(lines) > 2 else []


def app_cost_table(data: dict[str, Any]) -> list[str]:
    apps = data.get("apps") or []
    lines = ["| App | Environment | Python | Versions | µs CPU/call here (median) | min–max | "
             "calls × repeats | µs CPU/call used |", "|---|---|---|---|---|---|---|---|"]
    rank = {ref: i for i, ref in enumerate(APP_ORDER)}
    for a in sorted(apps, key=lambda a: (rank.get(a["app"], len(rank)), a["app"], a["env"])):
        vers = ", ".join(f"{k} {v}" for k, v in a.get("versions", {}).items()) or "–"
        used = f"{a['per_call_us']:.2f}"
        if a.get("pooled_with", 1) > 1:
            used += f" (pooled over {a['pooled_with']} environments)"
        lines.append(f"| {a['label']} (`{a['app']}`) | {a['env']} | {a['python']} | {vers} | "
                     f"{a['env_per_call_us']:.2f} | {a['min_us']:.2f}–{a['max_us']:.2f} | "
                     f"{a['calls_per_repeat']:,} × {len(a['repeats_us'])} | {used} |")
    failed = [(n, s["app_cost_error"]) for n, s in sorted(data["contenders"].items())
              if s.get("app_cost_error")]
    for name, why in failed:
        lines.append(f"| {name}: failed | | | {why.replace('|', '/')} | – | | | – |")
    return lines if len(lines) > 2 else []


def interference(runs: list[dict[str, Any]]) -> str:
    others = [r["server_cpu_load"].get("other", 0.0) for r in runs if r.get("server_cpu_load")]
    steals = [r["server_cpu_load"].get("steal", 0.0) for r in runs if r.get("server_cpu_load")]
    if not others:
        return ""
    quiet = "quiet" if max(others) < 0.05 and max(steals) < 0.05 else "**not quiet**"
    return (f"The server's CPU was {quiet} during the runs: other processes used it "
            f"{statistics.median(others) * 100:.0f}% of the time (median; up to "
            f"{max(others) * 100:.0f}%), the hypervisor took {max(steals) * 100:.0f}% at most.")


def write_pair(out: Path, stem: str, data: dict[str, Any], text: str) -> list[Path]:
    """A phase's own document: `stem`.json (the data) and `stem`.md (`text`) in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{stem}.json", out / f"{stem}.md"]
    paths[0].write_text(json.dumps(data, indent=1, default=str) + "\n")
    paths[1].write_text(text)
    return paths


def status_sections(contenders: dict[str, Any], noun: str, plural: str, *,
                    kind: bool = False) -> list[str]:
    """The closing sections of a results document: the servers not measured and why, then
    each one's versions and notes (`noun`: how the tables call them: Contender, Proxy...)."""
    out: list[str] = []
    excluded = {n: s for n, s in contenders.items()
                if s.get("state") not in ("measured", "ready")}
    if excluded:
        out += ["", "## Not measured", "", f"| {noun} | Why |", "|---|---|"]
        for name, s in sorted(excluded.items()):
            reason = s.get("reason", "").replace("|", "\\|")
            out.append(f"| {name} | {s.get('state')}: {reason} |")
    out += ["", f"## {plural} and versions", ""]
    out += ([f"| {noun} | Kind | Versions | Notes |", "|---|---|---|---|"] if kind
            else [f"| {noun} | Versions | Notes |", "|---|---|---|"])
    for name, s in sorted(contenders.items()):
        vers = ", ".join(f"{k} {v}" for k, v in s.get("versions", {}).items()
                         if k not in ("cflags",))
        out.append(f"| {name} | {s.get('kind')} | {vers} | {s.get('notes', '')} |" if kind
                   else f"| {name} | {vers} | {s.get('notes', '')} |")
    return out


def markdown(data: dict[str, Any]) -> str:
    meta = data["meta"]
    proj = meta.get("project", {})
    out = [
        "# Benchmark results",
        "",
        run_line(meta, f", {meta['elapsed_s']:g} s"),
        "",
        f"Method: {method_line(meta)}. Every contender was checked (status 200, exact body, "
        "Content-Type, keep-alive) before and after being measured; a wrong answer is listed "
        "below and never counted. Generated by `tests/benchmarks/run.py`; the method is in "
        "`docs/performance.md`.",
        "",
        interference(data["runs"]),
        "",
        f"cymongoose {proj.get('versions', {}).get('cymongoose', '?')} at "
        f"{proj.get('git_commit', '?')}, Mongoose {proj.get('mongoose_version', '?')}, "
        f"Python {proj.get('python', '?').split()[0]}.",
        "",
        "## Targets",
        "",
        "| Target | Goal | Measured | Met | Note |",
        "|---|---|---|---|---|",
    ]
    for t in data["targets"]:
        out.append(f"| {t['title']} | {_goal_text(t)} | {_measured_text(t)} | {_met_text(t)} | "
                   f"{t.get('note', '')} |")
    refs = {"hello": "mongoose-c", "c200": "mongoose-c", "static": "nginx-static"}
    for phase in ("hello", "c200", "static"):
        table = _contender_table(data, phase, refs[phase])
        if len(table) > 2:
            conns = (meta["settings"]["c200"] if phase == "c200"
                     else meta["settings"]["connections"])
            names = [n for n, p in data["summary"].items() if phase in p]
            py = shapereport.pythons_of(data, names)
            out += ["", f"## {PHASE_TITLES[phase]}, {conns} connections"
                    + (f" (Python servers on {py})" if py else ""), ""] + table
    for phase in _scale_phases(data):
        table = _contender_table(data, phase, "mongoose-c")
        if len(table) > 2:
            out += ["", f"## Many clients: hello, {phase[1:]} keep-alive connections", "",
                    "One wrk run per server after a warm-up at the same count; errors are "
                    "wrk's socket errors (connect, read, write, timeout), which a server that "
                    "refuses or drops clients shows and ours must not."] + [""] + table
            columns = table[0].count("|") - 1
            for name, phases in data["summary"].items():
                s = phases.get(phase, {})
                if s and "rps" not in s:  # no valid run: say what happened instead
                    label = data["contenders"].get(name, {}).get("label", name)
                    # Contender, req/s (the reason), blanks, errors, non-2xx, RSS (blank).
                    cells = ([label, "; ".join(s["invalid_reasons"])] + [""] * (columns - 5)
                             + [str(s["socket_errors"]), str(s["non2xx"]), ""])
                    out.append("|" + "".join(f" {c} |" if c else " |" for c in cells))
    out += shapereport.markdown_lines(data)
    apps, costs = app_table(data), app_cost_table(data)
    if apps or costs:
        py = shapereport.pythons_of(data, [n for n, s in data["contenders"].items()
                                           if s.get("app") and "@py" not in n])
        out += ["", "## Apps: in-process cost and each server's overhead"
                + (f" ({py})" if py else ""), "",
                "Each app is also called in-process with a prebuilt environ (WSGI) or scope "
                "(ASGI) for wrk's `GET /`, its answer consumed, pinned to the server's CPU, in "
                "each of its servers' environments (`app_cost.py`), before the servers start and "
                "once per hello round: the least any server can spend per request. The same "
                "app with the same Python and framework versions is one figure (the median of "
                "all its repeats). A server's overhead per request is its CPU per request "
                "(hello, 50 connections) minus that; every server of an app serves the same "
                "object (`servers/hello_apps.py`)."]
        if apps:
            out += [""] + apps
        if costs:
            out += ["", "In-process cost per app and environment:", ""] + costs
    if any(not s.get("keepalive", True) for s in data["contenders"].values()):
        out += ["", "† no keep-alive: the server closes every connection (announced with "
                "`Connection: close`), so wrk reconnects for each request."]
    out += ["", "Server CPU: user + system time of the server's whole process tree (/proc) "
            "divided by the requests wrk completed; 100% = one CPU busy. wrk CPU near 100% "
            "means the client, not the server, was the limit."]
    rss = data["rss"]
    if rss:
        out += ["", f"## Memory: {rss['contender']} over {rss['requests']:,} requests", "",
                f"RSS after warm-up {rss['rss_after_warmup'] / MIB:.2f} MiB; growth "
                f"{rss['growth'] / 1024:+,.0f} KiB.", "",
                "| requests | RSS MiB | non-2xx | socket errors |", "|---|---|---|---|"]
        for s in rss["steps"]:
            out.append(f"| {s['requests']:,} | {s['rss'] / MIB:.2f} | {s['non2xx']} | "
                       f"{s['socket_errors']} |")
    out += status_sections(data["contenders"], "Contender", "Contenders", kind=True)
    mb = proj.get("mongoose_build", {})
    tools = meta["tools"]
    out += ["", "## Build and tools", "",
            f"- Mongoose (ours and the C ceiling), from `{mb.get('source', '?')}`: "
            f"`{' '.join(mb.get('flags', []) + mb.get('defines', []))}`",
            f"- Extension: `{proj.get('extension_build', {}).get('FLAGS', '?')}`"
            f" (ASan {proj.get('asan', '?')}); "
            f"Cython {proj.get('versions', {}).get('cython', '?')}",
            f"- wrk: {tools['wrk']}; nginx: {tools['nginx']}; uv: {tools['uv']}", ""]
    return "\n".join(out)


CHART_COLORS = {"ours": "#d62728", "c": "#7f7f7f", "other": "#1f77b4"}
CHART_LEGEND = {"ours": "cymongoose", "c": "C servers (Mongoose in C, nginx)",
                "other": "other Python servers"}


def _chart_kind(name: str) -> str:
    return ("ours" if name.startswith("cymongoose") else
            "c" if name.startswith(("mongoose-c", "nginx")) else "other")


def draw_chart(data: dict[str, Any], paths: list[Path]) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
        from matplotlib.layout_engine import ConstrainedLayoutEngine
        from matplotlib.patches import Patch
    except ImportError:
        log.warning("matplotlib is not installed: no chart (it is in the 'bench' dependency "
                    "group: uv sync --group bench)")
        return False
    summary, status = data["summary"], data["contenders"]
    meta, settings = data["meta"], data["meta"]["settings"]
    panels = []
    for phase, key, unit, scale in (("hello", "rps", "req/s", 1), ("c200", "rps", "req/s", 1),
                                    ("static", "bytes_per_s", "MiB/s", MIB)):
        rows = [(status.get(n, {}).get("label", n), n, p[phase]) for n, p in summary.items()
                if phase in p and p[phase].get(key)]
        if rows:
            rows.sort(key=lambda r: r[2][key])
            panels.append((phase, key, unit, scale, rows))
    if not panels:
        return False
    heights = [0.32 * len(p[4]) + 0.8 for p in panels]
    # Constrained layout sizes the panels around their labels and keeps room for the
    # suptitle (tight_layout ignores it, so the title sat on the first panel).
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, sum(heights) + 0.6),
                             layout=ConstrainedLayoutEngine(h_pad=0.1),  # inches
                             squeeze=False, gridspec_kw={"height_ratios": heights})
    for ax, (phase, key, unit, scale, rows) in zip(axes[:, 0], panels, strict=True):
        values = [r[2][key] / scale for r in rows]
        lows = [r[2].get(f"{key}_min", r[2][key]) / scale for r in rows]
        highs = [r[2].get(f"{key}_max", r[2][key]) / scale for r in rows]
        rounds = max(r[2]["valid_runs"] for r in rows)
        xerr = ([[v - lo for v, lo in zip(values, lows, strict=True)],
                 [hi - v for v, hi in zip(values, highs, strict=True)]] if rounds > 1 else None)
        ax.barh([r[0] for r in rows], values, xerr=xerr,
                color=[CHART_COLORS[_chart_kind(r[1])] for r in rows],
                error_kw={"elinewidth": 1, "capsize": 2.5, "capthick": 1})
        # Each value past the end of its whisker, so the min-max line never crosses it.
        for y, (v, end) in enumerate(zip(values, highs, strict=True)):
            ax.annotate(f"{v:,.0f}", (max(v, end), y), xytext=(4, 0),
                        textcoords="offset points", va="center", fontsize=8)
        conns = settings["c200"] if phase == "c200" else settings["connections"]
        how = (f"median of {rounds} rounds, whiskers min–max" if rounds > 1 else "one round")
        ax.set_title(f"{PHASE_TITLES[phase]}, {conns} connections: {unit}, {how}",
                     fontsize=10, loc="left")
        # Room on the right for the longest label ("178,632" at 8 pt is about 8% of the axis).
        ax.set_xlim(0, max(highs + values) * 1.13)
        ax.set_ylim(-0.6, len(rows) - 0.4)
        ax.xaxis.set_major_formatter(matplotlib.ticker.StrMethodFormatter("{x:,.0f}"))
        ax.tick_params(labelsize=8)
        ax.grid(axis="x", color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    kinds = {_chart_kind(r[1]) for p in panels for r in p[4]}
    axes[0, 0].legend(handles=[Patch(color=CHART_COLORS[k], label=CHART_LEGEND[k])
                               for k in CHART_LEGEND if k in kinds],
                      loc="lower right", fontsize=8, frameon=False)
    pin = ("server pinned to one CPU, wrk to another" if settings["server_cpu"] is not None
           else "no CPU pinning")
    fig.suptitle(f"cymongoose benchmarks, {meta['date'][:10]}: "
                 f"{meta['machine']['cpu_model']}, {pin}", fontsize=11)
    for p in paths:
        # A fixed hash salt (the SVG's element ids) and no date: re-rendering the same
        # results.json rewrites the same bytes.
        with plt.rc_context({"svg.hashsalt": "cymongoose-bench"}):
            fig.savefig(p, dpi=110, metadata={"Date": None} if p.suffix == ".svg" else None)
    plt.close(fig)
    return True


def write_all(data: dict[str, Any], out: Path, *, chart: bool = True) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    path = out / "results.json"
    path.write_text(json.dumps(data, indent=1, default=str) + "\n")
    written.append(path)
    path = out / "results.md"
    path.write_text(markdown(data))
    written.append(path)
    if chart:
        images = [out / "results.png", out / "results.svg"]
        if draw_chart(data, images):
            written += images
    return written


def _measured_on(meta: dict[str, Any]) -> str:
    return (f"Measured {meta['date'][:10]} on {machine_line(meta)}, Python "
            f"{meta.get('project', {}).get('python', '?').split()[0]}")


def _headline(data: dict[str, Any]) -> defaultdict[str, str]:
    """Each target's measured figure by its id, for PERFORMANCE_SUMMARY and README_SUMMARY."""
    measured = defaultdict(lambda: "–", {t["id"]: _measured_text(t) for t in data["targets"]})
    if data["rss"]:
        measured["rss_requests"] = f"{data['rss']['requests']:,}"
    return measured


def _goals_line(data: dict[str, Any]) -> str:
    graded = [t for t in data["targets"] if t["met"] is not None]
    missed = [f"{t['title']} (goal {_goal_text(t)})" for t in graded if not t["met"]]
    return (f"{len(graded) - len(missed)} of {len(graded)} goals met"
            + (f"; missed: {'; '.join(missed)}." if missed else "."))


def readme_block(data: dict[str, Any], out: Path, root: Path,
                 rows: list[tuple[str, str]] | None = None) -> str:
    """The README's Performance section: one summary table, the chart, and links to
    docs/performance.md (every table) and results.md. Absolute links: the README is also
    the package index's page. `rows`: more rows of the summary table (label, cell), from
    the documents of other phases (the realworld apps')."""
    rel = out.relative_to(root).as_posix() if out.is_relative_to(root) else None
    chart = f"{REPO_RAW}/{rel}/results.svg" if rel else out / "results.svg"
    table = f"{REPO_BLOB}/{rel}/results.md" if rel else out / "results.md"
    measured = _headline(data)
    lines = [
        "<!-- Generated by tests/benchmarks/run.py from the latest full run; edits are "
        "overwritten. -->",
        f"{_measured_on(data['meta'])}; ratios of ours to the other servers' figures, "
        "within that one run:",
        "",
        "| | Ours ÷ |",
        "|---|---|",
    ]
    lines += [f"| {label} | {cell.format_map(measured)} |" for label, cell in README_SUMMARY]
    pythons = shapereport.readme_pythons_row(data)
    lines += [f"| {label} | {cell} |" for label, cell in ([pythons] if pythons else [])
              + (rows or [])]
    postgres = ", the apps on PostgreSQL" if rows else ""
    lines += ["", _goals_line(data) + " Every table (each goal, every contender, many "
              "clients, new connections, app servers per Python version, the reverse proxy, "
              f"idle connections{postgres}) and the method: [docs/performance.md]({REPO_BLOB}"
              f"/docs/performance.md); every contender with latency, CPU and versions: "
              f"[{rel or out}/results.md]({table}).",
              "", f"![Benchmark chart]({chart})"]
    return "\n".join(lines)


def tables_block(data: dict[str, Any], extra: list[str] | None = None) -> list[str]:
    """Every table of the run for docs/performance.md (`extra`: more tables of other
    documents, the proxy and idle phases')."""
    meta = data["meta"]
    lines = [
        f"{_measured_on(meta)}: {method_line(meta)}. Figures are ratios within that one run.",
        "",
        "| | Measured | Goal | Met |",
        "|---|---|---|---|",
    ]
    for t in data["targets"]:
        lines.append(f"| {t['title']} | {_measured_text(t)} | {_goal_text(t)} | {_met_text(t)} |")
    lines += ["", "Every contender against the same references (req/s or bytes/s ÷ the "
              "reference's, in the same run):", "",
              "| Contender | Hello ÷ Mongoose in C | server CPU/request ÷ C's | Hello at 200 "
              "conn. ÷ C | Static ÷ nginx |", "|---|---|---|---|---|"]
    summary, status = data["summary"], data["contenders"]

    def ratio(name: str, phase: str, ref: str, key: str = "rps") -> str:
        key = "bytes_per_s" if phase == "static" else key
        ours = summary.get(name, {}).get(phase, {}).get(key)
        base = summary.get(ref, {}).get(phase, {}).get(key)
        return f"{ours / base:.2f}×" if ours and base else "–"

    ranked = sorted(summary, key=lambda n: -(summary[n].get("hello", {}).get("rps") or 0))
    for name in ranked:
        cells = [ratio(name, "hello", "mongoose-c"),
                 ratio(name, "hello", "mongoose-c", "server_cpu_us_per_req"),
                 ratio(name, "c200", "mongoose-c"), ratio(name, "static", "nginx-static")]
        if any(c != "–" for c in cells):  # servers measured only with many clients: below
            lines.append(f"| {status.get(name, {}).get('label', name)} | "
                         + " | ".join(cells) + " |")
    scale = scale_table(data)
    if scale:
        phases = _scale_phases(data)
        runs = max(s["runs"] for p in summary.values() for ph, s in p.items() if ph in phases)
        each = "one run each" if runs == 1 else f"up to {runs} runs each, medians"
        lines += ["", f"Many keep-alive clients (hello, {each}): req/s ÷ Mongoose in C's, "
                  "and wrk's socket errors:", ""] + scale
    apps = app_table(data)
    if apps:
        py = shapereport.pythons_of(data, [n for n, s in status.items()
                                           if s.get("app") and "@py" not in n])
        lines += ["", f"WSGI/ASGI servers of the same app object{f' ({py})' if py else ''}: "
                  "overhead per request = server "
                  "CPU per request − the app's own CPU per call in-process:", ""] + apps
    lines += shapereport.readme_lines(data)
    if extra:
        lines += [""] + extra
    return lines


def performance_block(data: dict[str, Any], out: Path, page: Path,
                      extra: list[str] | None = None) -> str:
    """The chart, the headline ratios and every table (`extra`: the proxy and idle phases')
    for the top of docs/performance.md. Links are relative to the page, as GitHub resolves
    them; the docs site's hook (tools/mkdocs_hooks.py) points them at its own copy of the
    chart and at the Benchmarks page."""
    meta = data["meta"]
    rel = Path(os.path.relpath(out, page.parent)).as_posix()
    measured = _headline(data)
    pin = ("server on one CPU, wrk on another" if meta["settings"]["server_cpu"] is not None
           else "no CPU pinning")
    lines = [
        "<!-- Generated by tests/benchmarks/run.py from the latest full run; edits are "
        "overwritten. -->",
        f"![Benchmark chart: req/s of every server (hello, 50 and 200 connections) and MiB/s "
        f"of the static-file servers]({rel}/results.svg)",
        "",
        f"Measured {meta['date'][:10]} on {meta['machine']['cpu_model']}, "
        f"{meta['machine']['logical_cpus']} CPUs ({pin}); ratios within that one run:",
        "",
    ]
    lines += ["- " + line.format_map(measured) for line in PERFORMANCE_SUMMARY]
    lines += ["", _goals_line(data) + " Every server with its latency and CPU: "
              f"[the full results]({rel}/results.md).", ""]
    lines += tables_block(data, extra)
    return "\n".join(lines)


def _replace_block(path: Path, block: str) -> bool:
    text = path.read_text() if path.exists() else ""
    pattern = re.compile(re.escape(BLOCK_START) + r".*?" + re.escape(BLOCK_END), re.DOTALL)
    if not pattern.search(text):
        log.warning("%s has no %s ... %s markers: not updated", path.name, BLOCK_START,
                    BLOCK_END)
        return False
    block = f"{BLOCK_START}\n{block}\n{BLOCK_END}"
    path.write_text(pattern.sub(lambda _m: block, text, count=1))
    log.info("%s: results block updated", path.name)
    return True


def update_docs(root: Path, data: dict[str, Any], out: Path,
                extra: list[str] | None = None,
                rows: list[tuple[str, str]] | None = None) -> bool:
    """The README's Performance section (a summary; `rows`: more rows of its table) and the
    top of docs/performance.md (every table; `extra`: more tables for it)."""
    readme, page = root / "README.md", root / "docs" / "performance.md"
    done = _replace_block(readme, readme_block(data, out, root, rows))
    return _replace_block(page, performance_block(data, out, page, extra)) and done


def print_targets(data: dict[str, Any]) -> None:
    for t in data["targets"]:
        log.info("target %-76s %-7s goal %-8s met: %s", t["title"], _measured_text(t),
                 _goal_text(t), _met_text(t).strip("*"))
    excluded = [n for n, s in data["contenders"].items()
                if s.get("state") not in ("measured", "ready")]
    if excluded:
        log.info("not measured: %s (reasons in results.md)", ", ".join(sorted(excluded)))
