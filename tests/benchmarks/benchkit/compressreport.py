"""The compression phase's document: results/compression.json and compression.md
(benchkit/compressphase.py); its rows of the README's summary table (readme_rows), and its
tables in docs/performance.md's "Response compression" section, between markers of their own
(<!-- bench-compression:start --> ... end) so that a run of this phase alone rewrites them.

Figures are medians over the valid rounds; a ratio of two servers is the median of the
per-round ratios (the rounds are interleaved). Goals, on this 2-CPU machine:
  ours (ASGI, Starlette) JSON gzip req/s >= 2x Starlette's GZipMiddleware on uvicorn;
  ours --static, precompressed page, req/s >= 0.9x nginx gzip_static;
  every compressed size of ours within 5% of the library's own at the same level;
  the first event of a stream, p99 compressed - p99 uncompressed <= 1 ms (ours, ASGI).
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from . import report

log = logging.getLogger("bench")

MEDIANS = ("rps", "p50_us", "p99_us", "server_cpu_us_per_req", "bytes_per_response",
           "client_cpu_util")
OURS = ("cmp-cymongoose-wsgi", "cmp-cymongoose-asgi")
START, END = "<!-- bench-compression:start -->", "<!-- bench-compression:end -->"
RPS_GOALS = (
    ("json_gzip_vs_uvicorn", "JSON, gzip: ours ASGI ÷ GZipMiddleware on uvicorn, req/s",
     "cmp-cymongoose-asgi", "cmp-uvicorn-gzip", "json-gzip", 2.0),
    ("static_vs_nginx", "Precompressed page (.gz): ours --static ÷ nginx gzip_static, req/s",
     "cmp-cymongoose-static", "cmp-nginx-gzip-static", "static-html-gzip", 0.9),
)
RATIO_GOAL = 1.05
SSE_GOAL_MS = 1.0


def _summary(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(r["contender"] for r in runs):
        for phase in dict.fromkeys(r["phase"] for r in runs if r["contender"] == name):
            mine = [r for r in runs if r["contender"] == name and r["phase"] == phase]
            out.setdefault(name, {})[phase] = report.cell_summary(mine, MEDIANS)
    return out


def _goals(data: dict[str, Any]) -> list[dict[str, Any]]:
    runs, goals = data["runs"], []
    for gid, title, ours, ref, phase, goal in RPS_GOALS:
        ratio, pairs = report.paired_ratio(runs, {"ours": ours, "ref": ref, "phase": phase,
                                                  "metric": "rps"})
        goals.append({"id": gid, "title": title, "goal": f">= {goal:g}x",
                      "measured": None if ratio is None else f"{ratio:.2f}x ({pairs} rounds)",
                      "met": None if ratio is None else ratio >= goal})
    worst = None
    for name in OURS:
        for load, facts in data["checks"].get(name, {}).items():
            body, _, coding = load.partition("-")
            ref = data["references"].get(body, {}).get(coding)
            if ref and "body_bytes" in facts:
                r = facts["body_bytes"] / ref
                if worst is None or r > worst[0]:
                    worst = (r, f"{body} {coding}")
    goals.append({"id": "ratio", "title": "Compressed size: ours ÷ the library's own at "
                  "level 3 (zlib, zstandard), the worst of the bodies and codings",
                  "goal": f"<= {RATIO_GOAL:g}x",
                  "measured": None if worst is None else f"{worst[0]:.3f}x ({worst[1]})",
                  "met": None if worst is None else worst[0] <= RATIO_GOAL})
    sse = data["sse"].get("cmp-cymongoose-asgi", {})
    base = (sse.get("identity") or {}).get("p99_ms")
    deltas = [(c, s["p99_ms"] - base) for c, s in sse.items()
              if c != "identity" and base is not None and s.get("p99_ms") is not None]
    misses = sum(s.get("misses", 0) for c, s in sse.items())
    worst_d = max(deltas, key=lambda d: d[1]) if deltas else None
    goals.append({"id": "sse", "title": "First event of a stream: p99 compressed − p99 "
                  "uncompressed, ours ASGI", "goal": f"<= {SSE_GOAL_MS:g} ms",
                  "measured": None if worst_d is None else
                  f"{worst_d[1]:+.2f} ms ({worst_d[0]}){f', {misses} missed' if misses else ''}",
                  "met": None if worst_d is None else worst_d[1] <= SSE_GOAL_MS and not misses})
    return goals


def build(meta: dict[str, Any], phase: Any) -> dict[str, Any]:
    """`phase`: the CompressionPhase that ran."""
    runs = phase.bench.runs
    data = {"meta": meta, "settings": phase.settings, "contenders": phase.bench.status,
            "runs": runs, "summary": _summary(runs), "checks": phase.checks,
            "references": phase.references, "bodies": phase.bodies, "sse": phase.sse,
            "codecs": phase.codecs}
    data["goals"] = _goals(data)
    return data


def load(out: Path) -> dict[str, Any] | None:
    path = out / "compression.json"
    return json.loads(path.read_text()) if path.exists() else None


def _label(data: dict[str, Any], name: str) -> str:
    return str(data["contenders"].get(name, {}).get("label", name))


def _f(v: float | None, fmt: str = "{:,.0f}") -> str:
    return "–" if v is None else fmt.format(v)


def main_table(data: dict[str, Any], *, short: bool = False) -> list[str]:
    """Per load, per server: req/s, p99, server CPU per request, bytes per response (head
    included, from wrk), the body's size and its size ÷ the library's own."""
    summary, checks = data["summary"], data["checks"]
    lines = ["| Load | Server | req/s | p99 ms | CPU µs/req | Bytes/resp. | Body bytes | "
             "÷ library's |", "|---|---|---|---|---|---|---|---|"]
    loads = list(dict.fromkeys(p for s in summary.values() for p in s))
    order = ["json-gzip", "json-zstd", "json-identity", "html-gzip", "html-zstd",
             "html-identity", "static-html-gzip"]
    loads.sort(key=lambda p: order.index(p) if p in order else len(order))
    for load in loads:
        body, _, coding = load.rpartition("-")
        ref = data["references"].get(body.removeprefix("static-"), {}).get(coding)
        rows = sorted((n for n in summary if load in summary[n]),
                      key=lambda n: -(summary[n][load].get("rps") or 0))
        if short:
            rows = [n for n in rows if n in OURS or load.startswith("static")
                    or n in ("cmp-uvicorn-gzip", "cmp-nginx-gzip3", "cmp-granian-flask-compress")]
        for name in rows:
            s = summary[name][load]
            facts = checks.get(name, {}).get(load, {})
            size = facts.get("body_bytes")
            if load.startswith("static-"):
                # The sibling, gzip -9 made ahead, sent as it is: no level-3 yardstick.
                vs = "the .gz file" if facts.get("is_sibling") else "**not the .gz file**"
            else:
                vs = f"{size / ref:.3f}" if size and ref and coding != "identity" else "–"
            lines.append(f"| {load} | {_label(data, name)} | {_f(s.get('rps'))} | "
                         f"{_f(s.get('p99_us') and s['p99_us'] / 1000, '{:.2f}')} | "
                         f"{_f(s.get('server_cpu_us_per_req'), '{:.1f}')} | "
                         f"{_f(s.get('bytes_per_response'))} | {_f(size)} | {vs} |")
    return lines


def sse_table(data: dict[str, Any]) -> list[str]:
    lines = ["| Server | Asked for | Content-Encoding sent | First event p50 ms | p99 ms | "
             "max ms | missed |", "|---|---|---|---|---|---|---|"]
    for name, per in data["sse"].items():
        for coding, s in per.items():
            lines.append(f"| {_label(data, name)} | {coding} | "
                         f"{', '.join(s['content_encoding']) or '–'} | {_f(s['p50_ms'], '{:.2f}')}"
                         f" | {_f(s['p99_ms'], '{:.2f}')} | {_f(s['max_ms'], '{:.2f}')} | "
                         f"{s['misses']} of {s['requests']} |")
    return lines


def goals_table(data: dict[str, Any]) -> list[str]:
    lines = ["| Goal | Measured | Target | Met |", "|---|---|---|---|"]
    for g in data["goals"]:
        met = "–" if g["met"] is None else ("yes" if g["met"] else "**no**")
        lines.append(f"| {g['title']} | {g['measured'] or 'not measured'} | {g['goal']} | "
                     f"{met} |")
    return lines


def codec_table(data: dict[str, Any]) -> list[str]:
    if not data.get("codecs"):
        return []
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "codec_costs", Path(__file__).resolve().parent.parent / "codec_costs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.table(data["codecs"]))


def _refs_line(data: dict[str, Any]) -> str:
    parts = []
    for body, sizes in data["references"].items():
        parts.append(f"{body} {data['bodies'][body]:,} B → " + ", ".join(
            f"{c} {n:,}" for c, n in sizes.items()))
    return "Library sizes at level 3 (zlib via gzip.compress, zstandard): " + "; ".join(parts)


def _status_lines(data: dict[str, Any]) -> list[str]:
    lines = []
    for name, s in data["contenders"].items():
        if s.get("state") not in ("measured", "ready"):
            lines.append(f"- {s.get('label', name)}: {s.get('state')}: {s.get('reason')}")
    for name, per in data["checks"].items():
        for load, facts in per.items():
            if "error" in facts:
                lines.append(f"- {_label(data, name)}, {load}: not measured: {facts['error']}")
    return lines


def markdown(data: dict[str, Any]) -> str:
    meta, st = data["meta"], data["settings"]
    lines = [f"# Response compression ({meta['mode']} run, {meta['date'][:10]})", "",
             report.run_line(meta), "",
             f"Method: {st['wrk']}, {st['rounds']} interleaved round(s) of "
             f"{st['duration_s']} s, server on CPU {st['server_cpu']}, wrk on CPU "
             f"{st['client_cpu']}; medians. Bytes/resp. is wrk's bytes ÷ requests (head "
             "included); Body bytes is the checked answer's body; ÷ library's is that ÷ the "
             "library's own size at level 3. CPU is the server process tree's. "
             + report.interference(data["runs"]), "", "## Goals", ""]
    lines += goals_table(data) + ["", "## Throughput and size", ""]
    lines += main_table(data) + ["", _refs_line(data), "", "## First event of a stream", "",
                                 f"{st['sse']['requests_per_setting']} requests per setting, "
                                 f"one event at once then one every "
                                 f"{st['sse']['interval_ms']} ms; {st['sse']['client']}.", ""]
    lines += sse_table(data)
    codecs = codec_table(data)
    if codecs:
        lines += ["", "## What each codec costs in-process (codec_costs.py)", ""] + codecs
    lines += ["", "## Contenders", ""]
    for name, s in data["contenders"].items():
        versions = ", ".join(f"{k} {v}" for k, v in (s.get("versions") or {}).items())
        lines.append(f"- **{s.get('label', name)}** (`{name}`): {s.get('notes', '')}"
                     + (f"; {versions}" if versions else ""))
    status = _status_lines(data)
    if status:
        lines += ["", "Not measured:", ""] + status
    return "\n".join(lines) + "\n"


def docs_block(data: dict[str, Any], link: str) -> str:
    """The table of the README and docs/performance.md: goals, then the compact loads."""
    meta = data["meta"]
    st = data["settings"]
    lines = ["<!-- Generated by tests/benchmarks/run.py --phases compression; edits are "
             "overwritten. -->",
             f"Measured {meta['date'][:10]} ({meta['mode']} run, {st['rounds']} interleaved "
             f"round(s), medians; one process each, server and wrk on one CPU each; "
             f"[{link.rsplit('/', 1)[-1]}]({link})). {report.interference(data['runs'])}",
             ""]
    lines += goals_table(data) + [""] + main_table(data, short=True)
    lines += ["", f"{_refs_line(data)}.", "", "The first event of a stream "
              f"({st['sse']['requests_per_setting']} requests per setting, each on a new "
              "connection):", ""] + sse_table(data)
    codecs = codec_table(data)
    if codecs:
        lines += ["", "What each codec costs in-process, one CPU (`tests/benchmarks/"
                  "codec_costs.py`, the best of 5 batches):", ""] + codecs
    return "\n".join(lines)


def _replace(path: Path, block: str) -> bool:
    text = path.read_text()
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(text):
        log.warning("%s has no %s ... %s markers: not updated", path.name, START, END)
        return False
    path.write_text(pattern.sub(lambda _m: f"{START}\n{block}\n{END}", text, count=1))
    log.info("%s: compression block updated", path.name)
    return True


def _ratio(data: dict[str, Any], ours: str, ref: str, phase: str) -> str:
    ratio, _pairs = report.paired_ratio(data["runs"], {"ours": ours, "ref": ref,
                                                       "phase": phase, "metric": "rps"})
    return "–" if ratio is None else f"{ratio:.2f}×"


# The README's rows: (label, [(ours, the peer, load, how the cell names them)]).
README_ROWS = (
    ("Response compression, 10 KiB JSON req/s (gzip level 3)", (
        ("cmp-cymongoose-asgi", "cmp-uvicorn-gzip", "json-gzip",
         "ASGI {} Starlette GZipMiddleware on uvicorn"),
        ("cmp-cymongoose-asgi", "cmp-granian-gzip", "json-gzip", "{} on granian"),
        ("cmp-cymongoose-wsgi", "cmp-granian-flask-compress", "json-gzip",
         "WSGI {} Flask-Compress on granian"),
        ("cmp-cymongoose-asgi", "cmp-nginx-gzip3", "json-gzip", "ASGI {} nginx `gzip on`"))),
    ("Precompressed page (.gz sibling), req/s", (
        ("cmp-cymongoose-serve-dir", "cmp-nginx-gzip-static", "static-html-gzip",
         "`serve_dir` {}"),
        ("cmp-cymongoose-static", "cmp-nginx-gzip-static", "static-html-gzip",
         "`--static` {} nginx `gzip_static on`"))),
)


def readme_rows(data: dict[str, Any] | None) -> list[tuple[str, str]]:
    """Rows of the README's summary table: compressed JSON against the middleware and nginx,
    and the precompressed page against nginx gzip_static."""
    if data is None or not data["summary"]:
        return []
    return [(label, "; ".join(text.format(_ratio(data, ours, ref, load))
                              for ours, ref, load, text in cells))
            for label, cells in README_ROWS]


def link(root: Path, out: Path) -> str:
    """Where compression.md is, for the docs' section."""
    if not out.is_relative_to(root):
        return str(out / "compression.md")
    return f"{report.REPO_BLOB}/{out.relative_to(root).as_posix()}/compression.md"


def update_docs(root: Path, data: dict[str, Any], out: Path) -> None:
    """docs/performance.md's section (the README's rows come with its block, run.py)."""
    page = root / "docs" / "performance.md"
    # Absolute, as the other phases' tables: the docs site has no copy of results/.
    _replace(page, docs_block(data, link(root, out)))


def write_all(data: dict[str, Any], out: Path) -> list[Path]:
    return report.write_pair(out, "compression", data, markdown(data))


def print_summary(data: dict[str, Any]) -> None:
    for g in data["goals"]:
        log.info("compression goal %-80s %-28s %s met: %s", g["title"], g["measured"],
                 g["goal"], g["met"])
