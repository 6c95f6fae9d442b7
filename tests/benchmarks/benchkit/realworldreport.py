"""The realworld phase's document: results/realworld.json, realworld.md, a table in
docs/performance.md's block and rows of the README's summary table.

Figures are medians over the valid runs (a run with any non-2xx answer is not valid: its
errors are shown, not its speed). A ratio is ours ÷ a peer's req/s, the median of the
per-round ratios (the rounds are interleaved, so each pair shares the machine's state);
"÷ best" is ours ÷ the fastest of the app's peers, the lowest of those ratios.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from . import realworldservers as rs
from . import report
from .realworldphase import TEST_IDS

log = logging.getLogger("bench")

TEST_TITLES = {"json": "json", "plaintext": "plaintext", "pipelined": "plaintext, 16 pipelined",
               "db": "db (1 query)", "queries": "queries (20)", "fortunes": "fortunes",
               "updates": "updates (20)", "slowdb": "slowdb (1 query + 1 ms sleep)"}
MEDIANS = ("rps", "p50_us", "p99_us", "server_cpu_util", "db_cpu_util", "client_cpu_util",
           "server_cpu_us_per_req", "max_in_flight", "threads_seen")


def summarize(runs: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    # Errors of every run, valid or not: a database outage shows there.
    return {name: {test: report.cell_summary(all_runs, MEDIANS)
                   for test, all_runs in tests.items()}
            for name, tests in report.grouped(runs).items()}


def ratios(runs: list[dict[str, Any]], names: list[str]) -> dict[str, dict[str, Any]]:
    """Per ours contender and test: ours ÷ each peer of its app, and ÷ the best of them."""
    out: dict[str, dict[str, Any]] = {}
    for ours in (n for n in names if rs.is_ours(n)):
        app = rs.app_of(ours)
        peers = [n for n in names if not rs.is_ours(n) and rs.app_of(n) == app]
        for test in TEST_IDS:
            cell: dict[str, Any] = {"peers": {}, "pairs": {}}
            for peer in peers:
                ratio, pairs = report.paired_ratio(runs, {"ours": ours, "ref": peer,
                                                          "phase": test, "metric": "rps"})
                if ratio is not None:
                    cell["peers"][peer] = round(ratio, 3)
                    cell["pairs"][peer] = pairs
            if cell["peers"]:
                best = min(cell["peers"], key=lambda p: cell["peers"][p])
                cell.update(best=cell["peers"][best], best_peer=best)
                out.setdefault(ours, {})[test] = cell
    return out


def build(meta: dict[str, Any], settings: dict[str, Any], status: dict[str, Any],
          runs: list[dict[str, Any]]) -> dict[str, Any]:
    """`meta`: the runner's (date, machine, versions); its settings are the other phases',
    replaced by this phase's own."""
    names = list(dict.fromkeys([*status, *(r["contender"] for r in runs)]))
    return {"meta": dict(meta, settings=settings), "contenders": status,
            "summary": summarize(runs), "ratios": ratios(runs, names), "runs": runs}


def load(out: Path) -> dict[str, Any] | None:
    """The last realworld.json in `out`, summarized again with the current code."""
    path = out / "realworld.json"
    if not path.exists():
        return None
    old = json.loads(path.read_text())
    return build(old["meta"], old["meta"]["settings"], old["contenders"], old["runs"])


def _label(data: dict[str, Any], name: str) -> str:
    return str(data["contenders"].get(name, {}).get("label", name))


def _x(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}×"


def _num(v: float | None, digits: int = 0) -> str:
    return "–" if v is None else f"{v:,.{digits}f}"


def _ms(us: float | None) -> str:
    return "–" if us is None else f"{us / 1000:.2f}"


def _tests(data: dict[str, Any]) -> list[str]:
    found = {t for tests in data["summary"].values() for t in tests}
    return [t for t in TEST_IDS if t in found]


def _members(data: dict[str, Any], app: rs.App) -> list[str]:
    """The app's contenders in the order they were declared: ours first."""
    order = {c.name: i for i, c in enumerate(rs.contenders([]))}
    names = [n for n in data["contenders"] if n.startswith(f"rw-{app.id}-")]
    return sorted(names, key=lambda n: (not rs.is_ours(n), order.get(n, len(order)), n))


def method_line(data: dict[str, Any]) -> str:
    s = data["meta"]["settings"]
    rounds = ("1 round" if s["rounds"] == 1
              else f"{s['rounds']} interleaved rounds (medians)")
    pin = (f"each server (one worker process) pinned to CPU {s['server_cpu']}, wrk and "
           f"PostgreSQL to CPU {s['client_cpu']}" if s["server_cpu"] is not None
           else "no CPU pinning (fewer than 2 CPUs)")
    db = s.get("database", {})
    return (f"`{s['wrk']}` per test type, {rounds}, the first after a {s['warmup_s']:g} s "
            f"warm-up at the same load; {pin}; {db.get('version', 'PostgreSQL')} (a "
            f"cluster of the phase's own, fsync off), the apps' pools {s['pool']} "
            f"connections; queries and updates ask for {s['queries']} rows, pipelined "
            f"plaintext sends {s['pipeline']} requests per write")


def _ratio_table(data: dict[str, Any], app: rs.App, tests: list[str]) -> list[str]:
    members = _members(data, app)
    ours = [n for n in members if n in data["ratios"]]
    peers = [n for n in members if not rs.is_ours(n)]
    if not ours or not peers:
        return []
    head = "| Test | " + ("Ours | " if len(ours) > 1 else "") + " | ".join(
        f"÷ {_label(data, p)}" for p in peers) + " | ÷ best |"
    lines = [head, "|---|" + ("---|" if len(ours) > 1 else "") + "---|" * (len(peers) + 1)]
    for test in tests:
        for name in ours:
            cell = data["ratios"][name].get(test)
            if cell is None:
                continue
            row = [_x(cell["peers"].get(p)) for p in peers]
            best = f"{_x(cell['best'])} ({_label(data, cell['best_peer'])})"
            lines.append(f"| {TEST_TITLES[test]} | "
                         + (f"{_label(data, name)} | " if len(ours) > 1 else "")
                         + " | ".join(row) + f" | {best} |")
    return lines if len(lines) > 2 else []


def _figures_table(data: dict[str, Any], app: rs.App, tests: list[str]) -> list[str]:
    wsgi = app.interface == "wsgi"
    lines = ["| Test | Server | req/s | min–max | p99 ms | non-2xx | socket errors | server CPU "
             "| database CPU | wrk CPU |" + (" apps in flight, most | threads seen |" if wsgi
                                             else ""),
             "|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if wsgi else "")]
    for test in tests:
        for name in _members(data, app):
            s = data["summary"].get(name, {}).get(test)
            if s is None:
                continue
            errors = f"{s['non2xx']:,} | {s['socket_errors']:,}"
            if s.get("rps") is None:
                why = "no valid run" + (f" ({'; '.join(s['invalid_reasons'])})"
                                        if s["invalid_reasons"] else "")
                lines.append(f"| {TEST_TITLES[test]} | {_label(data, name)} | {why} | | | "
                             f"{errors} | | | |" + (" | |" if wsgi else ""))
                continue
            lines.append(
                f"| {TEST_TITLES[test]} | {_label(data, name)} | {s['rps']:,.0f} | "
                f"{s['rps_min']:,.0f}–{s['rps_max']:,.0f} | {_ms(s['p99_us'])} | {errors} | "
                f"{_num(s['server_cpu_util'], 2)} | {_num(s['db_cpu_util'], 2)} | "
                f"{_num(s['client_cpu_util'], 2)} |"
                + (f" {_num(s['max_in_flight'])} | {_num(s['threads_seen'])} |" if wsgi
                   else ""))
    return lines if len(lines) > 2 else []


def markdown(data: dict[str, Any]) -> str:
    meta = data["meta"]
    s = meta["settings"]
    out = ["# Realworld benchmark: TechEmpower's test types on PostgreSQL", "",
           report.run_line(meta), "",
           f"Method: {method_line(data)}. Each server's answers were checked with "
           "tests/realworld/techempower_verify.py (TechEmpower's rules, every endpoint) "
           "before the load and again after it. Generated by `tests/benchmarks/run.py "
           "--phases realworld` (part of `make bench`).", "",
           report.interference(data["runs"]), "",
           "Ratios: ours ÷ each server's req/s, the median of the per-round ratios; ÷ best: "
           "ours ÷ the fastest of them. Errors are wrk's non-2xx answers and socket errors "
           "(connect, read, write, timeout), summed over every run; a run with a non-2xx "
           "answer is not counted. CPU figures are fractions of one CPU over the run: the "
           "server's whole process tree, the database's (the postmaster and its backends), "
           "wrk's. Apps in flight and threads seen: what the WSGI app's /_stats counted "
           "during the run (reset before it)."]
    if s.get("database_events"):
        out += ["", "Database events: " + "; ".join(s["database_events"]) + "."]
    tests = _tests(data)
    for app in rs.APPS:
        ratio_table = _ratio_table(data, app, tests)
        figures = _figures_table(data, app, tests)
        if ratio_table or figures:
            out += ["", f"## {app.label}"]
        if ratio_table:
            out += ["", "Ours ÷ each (req/s):", ""] + ratio_table
        if figures:
            out += ["", "Medians:", ""] + figures
    out += report.status_sections(data["contenders"], "Server", "Servers")
    return "\n".join(out) + "\n"


def _cell(data: dict[str, Any], app: rs.App, test: str, server: str | None = None) -> str:
    """Ours (the default settings) ÷ the fastest setting of `server` ("granian": any of its
    blocking threads), or ÷ the fastest other server when None."""
    cell = data["ratios"].get(f"rw-{app.id}-cymongoose", {}).get(test)
    if cell is None:
        return "–"
    if server is None:
        return _x(cell["best"])
    prefix = f"rw-{app.id}-{server}"
    return _x(min((v for p, v in cell["peers"].items() if p == prefix
                   or p.startswith(prefix + "-")), default=None))


def _short(app: rs.App) -> str:
    """"Flask WSGI" for "Flask + psycopg pool (WSGI)"."""
    return f"{app.label.split(' (')[0].split(' + ')[0].replace(' ORM', '')} " \
           f"{app.interface.upper()}"


# The other servers of the page's table, per interface.
PAGE_SERVERS = {"wsgi": ("granian", "gunicorn"), "asgi": ("uvicorn", "granian")}


def readme_rows(data: dict[str, Any] | None) -> list[tuple[str, str]]:
    """Rows of the README's summary table: per app, ours ÷ the best peer on each test type
    (÷ uvicorn and ÷ granian for the ASGI apps)."""
    if data is None:
        return []
    tests = _tests(data)
    rows = []
    for app in rs.APPS:
        if f"rw-{app.id}-cymongoose" not in data["ratios"]:
            continue
        if app.interface == "wsgi":
            cell = f"the best of {app.peers}: " + ", ".join(
                f"{t} {_cell(data, app, t)}" for t in tests)
        else:
            cell = "; ".join(f"{server}: " + ", ".join(
                f"{t} {_cell(data, app, t, server)}" for t in tests)
                for server in PAGE_SERVERS["asgi"])
        rows.append((f"{app.label} on PostgreSQL, req/s", cell))
    return rows


def readme_lines(data: dict[str, Any], out: Path, root: Path) -> list[str]:
    """docs/performance.md's table: per test type, ours ÷ the other servers of each app,
    then ours' server CPU per app."""
    tests = _tests(data)
    apps = [a for a in rs.APPS if f"rw-{a.id}-cymongoose" in data["ratios"]]
    if not tests or not apps:
        return []
    rel = out.relative_to(root).as_posix() if out.is_relative_to(root) else None
    link = f"{report.REPO_BLOB}/{rel}/realworld.md" if rel else str(out / "realworld.md")
    meta = data["meta"]
    rounds = meta["settings"]["rounds"]
    columns = [(app, server) for app in apps for server in PAGE_SERVERS[app.interface]]
    lines = [f"Realworld apps on PostgreSQL ({meta['date'][:10]}, "
             f"{'1 round' if rounds == 1 else f'{rounds} rounds, medians'}): TechEmpower's "
             "test types, ours ÷ the other servers' req/s (the fastest of granian's blocking "
             "threads and of gunicorn's threads for the WSGI apps), one worker each, "
             f"{meta['settings']['connections']} keep-alive clients; then ours' server CPU "
             f"([{rel or 'results'}/realworld.md]({link})):", "",
             "| Test | " + " | ".join(f"{_short(a)} ÷ {server}" for a, server in columns)
             + " | " + " | ".join(f"Server CPU, ours, {_short(a)}" for a in apps) + " |",
             "|---|" + "---|" * (len(columns) + len(apps))]
    for test in tests:
        cpu = [_num(data["summary"].get(f"rw-{a.id}-cymongoose", {}).get(test, {})
                    .get("server_cpu_util"), 2) for a in apps]
        lines.append(f"| {TEST_TITLES[test]} | "
                     + " | ".join(_cell(data, a, test, server) for a, server in columns)
                     + " | "
                     + " | ".join(cpu) + " |")
    return lines


def write_all(data: dict[str, Any], out: Path) -> list[Path]:
    return report.write_pair(out, "realworld", data, markdown(data))


def print_summary(data: dict[str, Any]) -> None:
    for ours, tests in data["ratios"].items():
        for test, cell in tests.items():
            s = data["summary"].get(ours, {}).get(test, {})
            log.info("realworld %-28s %-9s %8s req/s  ÷ best %s (%s)  server CPU %s  "
                     "database CPU %s  errors %d/%d", ours, test, _num(s.get("rps")),
                     _x(cell["best"]), cell["best_peer"], _num(s.get("server_cpu_util"), 2),
                     _num(s.get("db_cpu_util"), 2), s.get("non2xx", 0),
                     s.get("socket_errors", 0))
    for name, s in sorted(data["contenders"].items()):
        if s.get("state") not in ("measured", "ready"):
            log.info("realworld %s not measured: %s: %s", name, s.get("state"),
                     s.get("reason"))
