"""The proxy phase's document: results/proxy.json, proxy.md, and its table in the README's
block. Every ratio is against tuned nginx, the median of the per-round ratios (the rounds are
interleaved, so each pair of runs shares the machine's state)."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from . import report

log = logging.getLogger("bench")

REF = "nginx-proxy-tuned"
SIZE_TITLES = {"hello": "JSON hello (27 bytes)", "100k": "100 KiB (102,400 bytes)"}
MEDIANS = ("rps", "p50_us", "p99_us", "server_cpu_us_per_req", "server_cpu_util",
           "client_cpu_util", "backend_cpu_util", "backend_opened", "backend_peak_open",
           "backend_opened_after", "backend_peak_open_after")


def cell_of(phase: str) -> tuple[str, int] | None:
    """("hello", 200) for "proxy-hello-c200"."""
    m = re.fullmatch(r"proxy-(\w+)-c(\d+)", phase)
    return (m.group(1), int(m.group(2))) if m else None


def _why_invalid(s: dict[str, Any]) -> str:
    """Why no run of a cell counted, once per kind of reason (their counts are in the error
    columns)."""
    reasons = sorted({re.sub(r"^\d+ ", "", r) for r in s["invalid_reasons"]})
    return "no valid run" + (f" ({'; '.join(reasons)})" if reasons else "")


def summarize(runs: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    summary: dict[str, dict[str, dict[str, Any]]] = {}
    for name, phases in report.grouped(runs).items():
        for phase, all_runs in phases.items():
            # Errors of every run, valid or not: a proxy that drops clients shows there.
            s = report.cell_summary(all_runs, MEDIANS)
            s["backend_opened_max"] = max((r.get("backend_opened", 0) for r in all_runs),
                                          default=0)
            ratio, pairs = report.paired_ratio(runs, {"ours": name, "ref": REF, "phase": phase,
                                                      "metric": "rps"})
            s["rps_ratio"] = round(ratio, 3) if ratio is not None else None
            s["ratio_pairs"] = pairs
            summary.setdefault(name, {})[phase] = s
    return summary


def build(meta: dict[str, Any], status: dict[str, Any],
          runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"meta": meta, "contenders": status, "summary": summarize(runs), "runs": runs}


def load(out: Path) -> dict[str, Any] | None:
    """The last proxy.json in `out`, summarized again with the current code."""
    path = out / "proxy.json"
    if not path.exists():
        return None
    old = json.loads(path.read_text())
    return build(old["meta"], old["contenders"], old["runs"])


def _cells(data: dict[str, Any]) -> list[tuple[str, int]]:
    found = {c for phases in data["summary"].values() for ph in phases
             if (c := cell_of(ph)) is not None}
    sizes = list(SIZE_TITLES)
    return sorted(found, key=lambda c: (sizes.index(c[0]) if c[0] in sizes else len(sizes),
                                        c[1]))


def _ranked(data: dict[str, Any]) -> list[str]:
    """Ours first, the reference next, the rest by name."""
    return sorted(data["summary"], key=lambda n: (0 if n.startswith("cymongoose") else
                                                  1 if n == REF else 2, n))


def _label(data: dict[str, Any], name: str) -> str:
    return str(data["contenders"].get(name, {}).get("label", name))


def method_line(meta: dict[str, Any]) -> str:
    s = meta["settings"]
    rounds = "1 round" if s["rounds"] == 1 else f"{s['rounds']} interleaved rounds (medians)"
    pin = (f"each proxy pinned to CPU {s['server_cpu']} (one worker or process), wrk and "
           f"the proxy's backend to CPU {s['client_cpu']}" if s["server_cpu"] is not None
           else "no CPU pinning (fewer than 2 CPUs)")
    return (f"`wrk -t1 -cN -d{s['duration_s']:g}s --latency` at "
            f"{', '.join(f'{n:,}' for n in s.get('proxy_loads', []))} keep-alive clients, "
            f"{rounds}, the first after a {s['warmup_s']:g} s warm-up at the same load; {pin}; "
            "backend: Mongoose in C (servers/c_mongoose_hello.c --stats-port), one per proxy")


def _ms(us: float | None) -> str:
    return "–" if us is None else f"{us / 1000:.2f}"


def _num(v: float | None, digits: int = 0) -> str:
    return "–" if v is None else f"{v:,.{digits}f}"


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v * 100:.0f}%"


def _cell_table(data: dict[str, Any], size: str) -> list[str]:
    lines = ["| Proxy | clients | req/s | min–max | × tuned nginx | p50 ms | p99 ms | errors | "
             "non-2xx | backend conns opened under load, median (most) | most open at once | "
             "opened as the clients left | most open then | proxy CPU µs/req | proxy CPU | "
             "wrk CPU | backend CPU |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for clients in sorted(c for s, c in _cells(data) if s == size):
        phase = f"proxy-{size}-c{clients}"
        for name in _ranked(data):
            s = data["summary"][name].get(phase)
            if s is None:
                continue
            label = _label(data, name)
            if s.get("rps") is None:
                lines.append(f"| {label} | {clients:,} | {_why_invalid(s)} | | | | | "
                             f"{s['socket_errors']:,} | {s['non2xx']:,} | "
                             f"– ({s['backend_opened_max']:,}) | | | | | | | |")
                continue
            ratio = "–" if s["rps_ratio"] is None else f"{s['rps_ratio']:.2f}"
            lines.append(
                f"| {label} | {clients:,} | {s['rps']:,.0f} | {s['rps_min']:,.0f}–"
                f"{s['rps_max']:,.0f} | {ratio} | {_ms(s['p50_us'])} | {_ms(s['p99_us'])} | "
                f"{s['socket_errors']:,} | {s['non2xx']:,} | {s['backend_opened']:,.0f} "
                f"({s['backend_opened_max']:,}) | {s['backend_peak_open']:,.0f} | "
                f"{_num(s['backend_opened_after'])} | {_num(s['backend_peak_open_after'])} | "
                f"{_num(s['server_cpu_us_per_req'], 2)} | "
                f"{_pct(s['server_cpu_util'])} | {_pct(s['client_cpu_util'])} | "
                f"{_pct(s['backend_cpu_util'])} |")
    return lines


def markdown(data: dict[str, Any]) -> str:
    meta = data["meta"]
    out = ["# Reverse proxy benchmark", "", report.run_line(meta), "",
           f"Method: {method_line(meta)}. Each proxy's answers (both sizes: status, exact "
           "body, Content-Type, keep-alive) were checked through it before and after the "
           "load. Generated by `tests/benchmarks/run.py --phases proxy` (part of `make "
           "bench`).", "",
           report.interference(data["runs"]), "",
           "Errors are wrk's socket errors (connect, read, write, timeout) and non-2xx "
           "answers, summed over every run; a run with a non-2xx answer is not counted. "
           "Backend connections: the backend's own counters of the connections it accepted "
           "and of the most open at once (the proxy's kept-alive pool included), read "
           "before the run, 0.1 s before wrk stops (under load) and once the proxy has "
           "closed its clients' connections (as the clients left: requests still queued, "
           "responses cut short, and the load's last 0.1 s, which is about 2% of what a "
           "proxy opening one connection per request opens). Proxy CPU: the proxy's user + "
           "system time per request; "
           "wrk and the backend share the other CPU, so wrk CPU + backend CPU near 100% "
           "means that side, not the proxy, was the limit."]
    for size, title in SIZE_TITLES.items():
        table = _cell_table(data, size)
        if len(table) > 2:
            out += ["", f"## {title}", ""] + table
    out += report.status_sections(data["contenders"], "Proxy", "Proxies")
    return "\n".join(out) + "\n"


def readme_lines(data: dict[str, Any], out: Path, root: Path) -> list[str]:
    """The README's table: per proxy and answer, each load's req/s ÷ tuned nginx's (tuned
    nginx's own req/s in its row) and the backend connections opened per run. Linked by
    absolute address, as the rest of the README's block is."""
    rel = out.relative_to(root).as_posix() if out.is_relative_to(root) else None
    link = f"{report.REPO_BLOB}/{rel}/proxy.md" if rel else str(out / "proxy.md")
    cells = _cells(data)
    loads = sorted({c for _s, c in cells})
    if not loads:
        return []
    meta = data["meta"]
    lines = [f"Reverse proxy ({meta['date'][:10]}, {meta['settings']['rounds']} rounds, "
             "medians): req/s ÷ tuned nginx's (its own req/s in its row) · backend connections "
             "opened per run under load (+ as the clients left); one worker each, in front of "
             "Mongoose in C "
             f"([{rel or 'results'}/proxy.md]({link})):", "",
             "| Proxy | Answer | " + " | ".join(f"{n:,} clients" for n in loads) + " |",
             "|---|---|" + "---|" * len(loads)]
    for name in _ranked(data):
        for size in SIZE_TITLES:
            row = []
            for clients in loads:
                s = data["summary"][name].get(f"proxy-{size}-c{clients}")
                if s is None:
                    row.append("–")
                    continue
                if s.get("rps") is None:
                    row.append(_why_invalid(s))
                else:
                    head = (f"{s['rps']:,.0f} req/s" if name == REF else
                            "–" if s["rps_ratio"] is None else f"{s['rps_ratio']:.2f}×")
                    row.append(f"{head} · {s['backend_opened']:,.0f}")
                    if s.get("backend_opened_after"):
                        row[-1] += f" (+{s['backend_opened_after']:,.0f})"
                if s["socket_errors"]:
                    row[-1] += f" · {s['socket_errors']:,} socket errors"
                if s["non2xx"]:
                    row[-1] += f" · {s['non2xx']:,} non-2xx"
            if any(c != "–" for c in row):
                lines.append(f"| {_label(data, name)} | {size} | " + " | ".join(row) + " |")
    return lines if len(lines) > 4 else []


def write_all(data: dict[str, Any], out: Path) -> list[Path]:
    return report.write_pair(out, "proxy", data, markdown(data))


def print_summary(data: dict[str, Any]) -> None:
    for size, clients in _cells(data):
        phase = f"proxy-{size}-c{clients}"
        for name in _ranked(data):
            s = data["summary"][name].get(phase)
            if s is None:
                continue
            ratio = "–" if s.get("rps_ratio") is None else f"{s['rps_ratio']:.2f}x"
            log.info("proxy %-5s c%-6d %-22s %10s req/s %6s  p99 %8s ms  errors %d/%d  "
                     "backend conns opened %s (+%s as the clients left)", size, clients, name,
                     _num(s.get("rps")), ratio, _ms(s.get("p99_us")), s["socket_errors"],
                     s["non2xx"], _num(s.get("backend_opened")),
                     _num(s.get("backend_opened_after")))
