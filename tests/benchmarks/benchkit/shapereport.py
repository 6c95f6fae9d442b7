"""The tables of the traffic-shape phases (shapes.py, pythons.py) in results.md and the README's
block, and their ratios in results.json ("shapes").

A ratio is the hello phase's kind (report.paired_ratio): the median of per-round ratios of a
server and its reference in the same phase, rounds being interleaved.
"""

from __future__ import annotations

from typing import Any

# (ours, reference): the close and workers phases' ratios, as the hello phase's targets pair
# them (the raw handler against the C servers, each app server against granian's same app).
PAIRS = [("cymongoose-raw", "mongoose-c"), ("cymongoose-raw", "nginx"),
         ("cymongoose-handles", "mongoose-c"), ("cymongoose-wsgi", "granian-wsgi"),
         ("cymongoose-flask", "granian-flask"), ("cymongoose-asgi", "granian-asgi"),
         ("cymongoose-fastapi", "granian-fastapi")]
# The clients256 phase: our Flask and FastAPI servers against every peer of the same app.
APP_PAIRS = [("cymongoose-flask", "granian-flask"), ("cymongoose-flask", "flask-gunicorn-gthread"),
             ("cymongoose-flask", "flask-gunicorn-sync"),
             ("cymongoose-fastapi", "granian-fastapi"), ("cymongoose-fastapi", "fastapi")]
# The pythons phase: the README's columns, one per pair.
PYTHON_PAIRS = [("cymongoose-wsgi", "granian-wsgi", "raw WSGI ÷ granian"),
                ("cymongoose-flask", "granian-flask", "Flask ÷ granian"),
                ("cymongoose-flask", "flask-gunicorn-gthread", "Flask ÷ gunicorn gthread"),
                ("cymongoose-asgi", "granian-asgi", "raw ASGI ÷ granian"),
                ("cymongoose-asgi", "uvicorn-raw", "raw ASGI ÷ uvicorn"),
                ("cymongoose-fastapi", "granian-fastapi", "FastAPI ÷ granian"),
                ("cymongoose-fastapi", "fastapi", "FastAPI ÷ uvicorn")]
CLOSE_NOTE = ("One wrk thread opening a new connection per request saturates its own CPU "
              "(about 20,000 req/s on the 2-core machine this was written on; see the wrk CPU "
              "column), so req/s there mostly measures wrk: the server CPU per request is the "
              "figure that compares servers.")


def _ratio(runs: list[dict[str, Any]], ours: str, ref: str, phase: str,
           metric: str) -> float | None:
    from .report import paired_ratio  # report imports this module

    value, _pairs = paired_ratio(runs, {"ours": ours, "ref": ref, "phase": phase,
                                        "metric": metric})
    return round(value, 3) if value is not None else None


def _x(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}×"


def _num(v: float | None, digits: int = 1) -> str:
    return "–" if v is None else f"{v:,.{digits}f}"


def _ms(v: float | None) -> str:
    return "–" if v is None else f"{v / 1000:.2f}"


def _label(data: dict[str, Any], name: str) -> str:
    st = data["contenders"].get(name, {})
    return str(st.get("label", name)) + ("" if st.get("keepalive", True) else " †")


def pythons_of(data: dict[str, Any], names: list[str]) -> str:
    """'Python 3.11.7' (or '3.11.7, 3.12.1'): the interpreters of these servers."""
    found = sorted({str(data["contenders"][n]["python_version"]) for n in names
                    if data["contenders"].get(n, {}).get("python_version")})
    if not found and names:  # a run from before the versions were recorded: the project's
        project = str(data["meta"].get("project", {}).get("python", "")).split()
        found = project[:1]
    return f"Python {', '.join(found)}" if found else ""


def pair_rows(data: dict[str, Any], phase: str,
              pairs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """Each pair measured in `phase`: both medians, and the paired ratios."""
    summary, runs = data["summary"], data["runs"]
    out = []
    for ours, ref in pairs:
        a, b = summary.get(ours, {}).get(phase, {}), summary.get(ref, {}).get(phase, {})
        if not a.get("rps") or not b.get("rps"):
            continue
        out.append({"ours": ours, "ref": ref, "phase": phase,
                    "ours_rps": a["rps"], "ref_rps": b["rps"],
                    "ours_cpu_us": a.get("server_cpu_us_per_req"),
                    "ref_cpu_us": b.get("server_cpu_us_per_req"),
                    "ours_p99_us": a.get("p99_us"), "ref_p99_us": b.get("p99_us"),
                    "rps_ratio": _ratio(runs, ours, ref, phase, "rps"),
                    "cpu_ratio": _ratio(runs, ours, ref, phase, "server_cpu_us_per_req")})
    return out


def python_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Per Python version of the pythons phase, each PYTHON_PAIRS pair's ratios."""
    info = data["meta"].get("shapes", {}).get("pythons", {})
    out = []
    for version, v in info.get("versions", {}).items():
        row: dict[str, Any] = {"python": version, "full_version": v.get("full_version"),
                               "state": v.get("state"), "reason": v.get("reason"), "pairs": [],
                               "measured": v.get("measured")}  # merged from a later run
        if v.get("state") != "skipped":
            suffix = f"@py{version}"
            for ours, ref, title in PYTHON_PAIRS:
                rows = pair_rows(data, "pythons", [(ours + suffix, ref + suffix)])
                if rows:
                    row["pairs"].append(dict(rows[0], title=title))
        out.append(row)
    return out


# The README's row of the pythons phase: the hello apps' ratios to granian per version.
README_PYTHON_TITLES = ("raw WSGI ÷ granian", "raw ASGI ÷ granian")


def readme_pythons_row(data: dict[str, Any]) -> tuple[str, str] | None:
    """The README summary table's per-Python row (label, cell), or None when the run
    measured no version."""
    cells = []
    for r in data.get("shapes", {}).get("pythons", []):
        by = {p["title"]: p for p in r["pairs"]}
        if any(t in by for t in README_PYTHON_TITLES):
            cells.append(f"{r['python']} " + " / ".join(
                _x(by[t]["rps_ratio"]) if t in by else "–" for t in README_PYTHON_TITLES))
    if not cells:
        return None
    return (f"Per Python version, hello req/s ({' / '.join(README_PYTHON_TITLES)})",
            ", ".join(cells))


def summarize(data: dict[str, Any]) -> dict[str, Any]:
    """results.json's "shapes": every phase's ratios, and what was skipped and why."""
    info = data["meta"].get("shapes", {})
    return {
        "close": pair_rows(data, "close", PAIRS),
        "clients256": pair_rows(data, "clients256", APP_PAIRS),
        "workers": dict(info.get("workers", {}), pairs=pair_rows(data, "workers", PAIRS)),
        "pythons": python_rows(data),
    }


def _phase_table(data: dict[str, Any], phase: str) -> list[str]:
    """Every server of `phase`, fastest first, with latency, CPU and errors."""
    summary = data["summary"]
    rows = [(n, p[phase]) for n, p in summary.items() if phase in p]
    rows.sort(key=lambda item: -(item[1].get("rps") or 0))
    lines = ["| Server | req/s | p50 ms | p99 ms | server CPU µs/req | server CPU | wrk CPU "
             "| socket errors | non-2xx |", "|---|---|---|---|---|---|---|---|---|"]
    for name, s in rows:
        if s.get("rps") is None:
            lines.append(f"| {_label(data, name)} | {'; '.join(s['invalid_reasons'])} | | | | "
                         f"| | {s['socket_errors']:,} | {s['non2xx']:,} |")
            continue
        util = [("–" if s.get(k) is None else f"{s[k] * 100:.0f}%")
                for k in ("server_cpu_util", "client_cpu_util")]
        lines.append(f"| {_label(data, name)} | {_num(s['rps'], 0)} | {_ms(s['p50_us'])} | "
                     f"{_ms(s['p99_us'])} | {_num(s['server_cpu_us_per_req'], 2)} | "
                     f"{util[0]} | {util[1]} | {s['socket_errors']:,} | {s['non2xx']:,} |")
    return lines if len(lines) > 2 else []


def _pair_table(data: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| Server | Reference | req/s | ref. req/s | req/s ÷ ref. | CPU µs/req | ref. CPU "
             "µs/req | CPU/req ÷ ref. | p99 ms | ref. p99 ms |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {_label(data, r['ours'])} | {_label(data, r['ref'])} | "
                     f"{_num(r['ours_rps'], 0)} | {_num(r['ref_rps'], 0)} | {_x(r['rps_ratio'])} "
                     f"| {_num(r['ours_cpu_us'], 2)} | {_num(r['ref_cpu_us'], 2)} | "
                     f"{_x(r['cpu_ratio'])} | {_ms(r['ours_p99_us'])} | {_ms(r['ref_p99_us'])} |")
    return lines if len(lines) > 2 else []


def _closed_unannounced(data: dict[str, Any]) -> list[str]:
    return [_label(data, n) for n, s in data["contenders"].items()
            if str(s.get("close_check", "")).startswith("closed without")]


def markdown_lines(data: dict[str, Any]) -> list[str]:
    """results.md's sections of the shape phases (nothing for a phase not run)."""
    shapes = data.get("shapes") or summarize(data)
    info = data["meta"].get("shapes", {})
    out: list[str] = []
    close = _phase_table(data, "close")
    if close:
        names = [n for n, p in data["summary"].items() if "close" in p]
        conns = info.get("close", {}).get("connections", "?")
        out += ["", f"## Connection per request: hello, {conns} connections, "
                "`Connection: close`", "",
                "wrk sends `Connection: close` with every request: each server must close the "
                "connection after its answer (checked before the load), so wrk opens a new "
                f"one for every request. {CLOSE_NOTE} Python servers: "
                f"{pythons_of(data, names) or '–'}.", ""] + close
        unannounced = _closed_unannounced(data)
        if unannounced:
            out += ["", f"{', '.join(unannounced)}: closes without `Connection: close` in its "
                    "answer, so wrk's next request on that connection fails (its socket "
                    "errors, reads) before wrk reconnects."]
        pairs = _pair_table(data, shapes["close"])
        if pairs:
            out += ["", "Each server against its reference (medians of per-round ratios):",
                    ""] + pairs
    many = _phase_table(data, "clients256")
    if many:
        names = [n for n, p in data["summary"].items() if "clients256" in p]
        conns = info.get("clients256", {}).get("connections", 256)
        out += ["", f"## Many clients: Flask and FastAPI hello, {conns} keep-alive "
                f"connections, one worker each ({pythons_of(data, names) or 'Python ?'})",
                ""] + many
        pairs = _pair_table(data, shapes["clients256"])
        if pairs:
            out += ["", "Ours against each peer of the same app:", ""] + pairs
    workers = info.get("workers")
    if workers:
        n = workers.get("workers") or 0
        out += ["", "## Multi-worker" + (f": {n} workers each" if n > 0 else ""), ""]
        if workers.get("skipped"):
            out.append(f"Skipped: {workers['skipped']}.")
        else:
            names = [n for n, p in data["summary"].items() if "workers" in p]
            out += [f"Servers pinned to CPUs {workers.get('server_cpus')}, wrk "
                    f"(`-t{workers.get('wrk_threads')} -c{workers.get('connections')}`) to "
                    f"{workers.get('client_cpus')}; {pythons_of(data, names) or '–'}.", ""]
            out += _phase_table(data, "workers")
            pairs = _pair_table(data, shapes["workers"]["pairs"])
            if pairs:
                out += ["", "Each server against its reference:", ""] + pairs
    if shapes["pythons"]:
        out += ["", "## App servers per Python version", "",
                "The WSGI/ASGI/Flask/FastAPI servers (ours and the peers) on each CPython, "
                "hello at the hello phase's connections, in interleaved rounds per version; "
                "ours built from the same source tree for each.", ""]
        skipped = [r for r in shapes["pythons"] if r["state"] == "skipped"]
        out += [f"- Python {r['python']}: skipped, {r['reason']}" for r in skipped]
        for row in shapes["pythons"]:
            if row["state"] == "skipped":
                continue
            out += ["", f"### Python {row['full_version'] or row['python']}", ""]
            out += _pair_table(data, row["pairs"]) or ["No pair measured."]
    return out


def readme_lines(data: dict[str, Any]) -> list[str]:
    """The README block's small tables, one per shape that ran."""
    shapes = data.get("shapes") or summarize(data)
    info = data["meta"].get("shapes", {})
    out: list[str] = []
    if shapes["close"]:
        names = [n for n, p in data["summary"].items() if "close" in p]
        out += ["", "A new connection per request (hello, `Connection: close`, "
                f"{info.get('close', {}).get('connections', '?')} connections; "
                f"{pythons_of(data, names) or '–'}). {CLOSE_NOTE}", "",
                "| Server | Reference | server CPU/request ÷ ref. | req/s ÷ ref. | CPU µs/req "
                "| p99 ms |", "|---|---|---|---|---|---|"]
        for r in shapes["close"]:
            out.append(f"| {_label(data, r['ours'])} | {_label(data, r['ref'])} | "
                       f"{_x(r['cpu_ratio'])} | {_x(r['rps_ratio'])} | "
                       f"{_num(r['ours_cpu_us'], 1)} vs {_num(r['ref_cpu_us'], 1)} | "
                       f"{_ms(r['ours_p99_us'])} vs {_ms(r['ref_p99_us'])} |")
    if shapes["clients256"]:
        names = [n for n, p in data["summary"].items() if "clients256" in p]
        out += ["", f"Flask and FastAPI at {info.get('clients256', {}).get('connections', 256)} "
                f"keep-alive connections, one worker each ({pythons_of(data, names) or '–'}):",
                "", "| Ours | Peer | req/s ÷ peer | CPU/request ÷ peer | p99 ms |",
                "|---|---|---|---|---|"]
        for r in shapes["clients256"]:
            out.append(f"| {_label(data, r['ours'])} | {_label(data, r['ref'])} | "
                       f"{_x(r['rps_ratio'])} | {_x(r['cpu_ratio'])} | "
                       f"{_ms(r['ours_p99_us'])} vs {_ms(r['ref_p99_us'])} |")
    workers = shapes["workers"]
    if workers.get("skipped"):
        n = workers.get("workers") or 0
        out += ["", f"Multi-worker phase{f' ({n} workers)' if n > 0 else ''}: skipped, "
                f"{workers['skipped']}."]
    elif workers.get("pairs"):
        out += ["", f"{workers.get('workers')} workers each (server on "
                f"{len(workers.get('server_cpus', []))} CPUs, wrk on the others):", "",
                "| Server | Reference | req/s ÷ ref. | CPU/request ÷ ref. |", "|---|---|---|---|"]
        for r in workers["pairs"]:
            out.append(f"| {_label(data, r['ours'])} | {_label(data, r['ref'])} | "
                       f"{_x(r['rps_ratio'])} | {_x(r['cpu_ratio'])} |")
    measured = [r for r in shapes["pythons"] if r["pairs"]]
    if measured:
        titles = [t for _o, _r, t in PYTHON_PAIRS
                  if any(p["title"] == t for r in measured for p in r["pairs"])]
        out += ["", "App servers per Python version, req/s of ours ÷ the peer's on the same "
                "app:", "", "| Python | " + " | ".join(titles) + " |",
                "|---|" + "---|" * len(titles)]
        for r in measured:
            by = {p["title"]: p for p in r["pairs"]}
            when = f" (measured {r['measured'][:10]})" if r.get("measured") else ""
            out.append(f"| {r['full_version'] or r['python']}{when} | " + " | ".join(
                _x(by[t]["rps_ratio"]) if t in by else "–" for t in titles) + " |")
        skipped = [f"{r['python']}, {r['reason']}" for r in shapes["pythons"]
                   if r["state"] == "skipped"]
        if skipped:
            out += ["", f"Not measured: Python {'; '.join(skipped)}."]
    return out
