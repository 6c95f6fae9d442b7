"""The idle phase's document: results/idle.json, idle.md, and its table in the README's
block. Figures are medians over the valid rounds; a ratio is the median of the per-round
ratios (with idle ÷ quiet within one contender's run; ours ÷ tuned nginx's with the
connections held, in the same round)."""

from __future__ import annotations

import json
import logging
import statistics
from pathlib import Path
from typing import Any

from . import report
from .idlephase import REF

log = logging.getLogger("bench")

# Issue 22, on the median first byte: with the idle connections held, at most twice our own
# without them and at most 1.5 times nginx's with them.
GOAL_VS_QUIET = 2.0
GOAL_VS_REF = 1.5
MEDIANS = {
    "quiet_p50_ms": ("quiet", "p50_ms"), "quiet_p99_ms": ("quiet", "p99_ms"),
    "idle_p50_ms": ("idle", "p50_ms"), "idle_p99_ms": ("idle", "p99_ms"),
    "quiet_cpu_us_per_probe": ("quiet", "server_cpu_us_per_probe"),
    "idle_cpu_us_per_probe": ("idle", "server_cpu_us_per_probe"),
    "quiet_cpu_ms_per_s": ("quiet_window", "server_cpu_ms_per_s"),
    "held_cpu_ms_per_s": ("held_window", "server_cpu_ms_per_s"),
    "rss_quiet": (None, "rss_quiet"), "rss_held": (None, "rss_held"),
    "open_s": (None, "open_s"), "held_s": (None, "held_s"),
}


def _get(run: dict[str, Any], where: str | None, key: str) -> Any:
    return (run if where is None else run.get(where, {})).get(key)


def _median(values: list[Any]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _ratio(ours: dict[int, float], ref: dict[int, float]) -> tuple[float | None, int]:
    ratios = [ours[k] / ref[k] for k in sorted(ours.keys() & ref.keys()) if ref[k]]
    return (round(statistics.median(ratios), 3) if ratios else None), len(ratios)


def _by_round(runs: list[dict[str, Any]], name: str, where: str, key: str) -> dict[int, float]:
    return {r["round"]: r[where][key] for r in runs
            if r["contender"] == name and r["valid"] and r[where].get(key) is not None}


def summarize(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    summary: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(r["contender"] for r in runs):
        mine = [r for r in runs if r["contender"] == name]
        valid = [r for r in mine if r["valid"]]
        s: dict[str, Any] = {
            "runs": len(mine), "valid_runs": len(valid),
            "invalid_reasons": sorted({r["invalid_reason"] for r in mine if not r["valid"]}),
            "probe_errors": sum(r[k].get("errors", 0) for r in mine for k in ("quiet", "idle")),
            "held_min": min((r["held_end"] for r in mine), default=0),
        }
        s.update({k: _median([_get(r, *where) for r in valid]) for k, where in MEDIANS.items()})
        for q in ("p50", "p99"):
            key = f"{q}_ms"
            s[f"idle_vs_quiet_{q}"], _ = _ratio(_by_round(runs, name, "idle", key),
                                                _by_round(runs, name, "quiet", key))
            for where in ("idle", "quiet"):
                s[f"{where}_vs_ref_{q}"], s["rounds_paired"] = _ratio(
                    _by_round(runs, name, where, key), _by_round(runs, REF, where, key))
        if name.startswith("cymongoose"):
            s["goal_vs_quiet_met"] = (None if s["idle_vs_quiet_p50"] is None
                                      else s["idle_vs_quiet_p50"] <= GOAL_VS_QUIET)
            s["goal_vs_ref_met"] = (None if s["idle_vs_ref_p50"] is None
                                    else s["idle_vs_ref_p50"] <= GOAL_VS_REF)
        summary[name] = s
    return summary


def build(meta: dict[str, Any], settings: dict[str, Any], status: dict[str, Any],
          runs: list[dict[str, Any]]) -> dict[str, Any]:
    """`meta`: the runner's (date, machine, versions); its settings are the other phases',
    replaced by this phase's own."""
    return {"meta": dict(meta, settings=settings), "contenders": status,
            "summary": summarize(runs), "runs": runs}


def load(out: Path) -> dict[str, Any] | None:
    """The last idle.json in `out`, summarized again with the current code."""
    path = out / "idle.json"
    if not path.exists():
        return None
    old = json.loads(path.read_text())
    return build(old["meta"], old["meta"]["settings"], old["contenders"], old["runs"])


def _ranked(data: dict[str, Any]) -> list[str]:
    """Ours first, the reference last, the rest between."""
    return sorted(data["summary"], key=lambda n: (0 if n.startswith("cymongoose") else
                                                  2 if n == REF else 1, n))


def _label(data: dict[str, Any], name: str) -> str:
    return str(data["contenders"].get(name, {}).get("label", name))


def _ms(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}"


def _x(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}×"


def _num(v: float | None, digits: int = 1) -> str:
    return "–" if v is None else f"{v:,.{digits}f}"


def _met(s: dict[str, Any], bold: bool = True) -> str:
    if "goal_vs_quiet_met" not in s:
        return ""
    marks = {True: "yes", False: "**no**" if bold else "no", None: "–"}
    return f"{marks[s['goal_vs_quiet_met']]} / {marks[s['goal_vs_ref_met']]}"


def method_line(meta: dict[str, Any]) -> str:
    s = meta["settings"]
    rounds = "1 round" if s["rounds"] == 1 else f"{s['rounds']} interleaved rounds (medians)"
    pin = (f"each server one worker pinned to CPU {s['server_cpu']}, the probes and the idle "
           f"clients on CPU {s['client_cpu']}" if s.get("server_cpu") is not None
           else "no CPU pinning (fewer than 2 CPUs)")
    return (f"{s['probes']} probes, one every {s['probe_every_ms']:g} ms, each a new "
            "connection timed from connect() to the answer's first byte (GET /, the JSON "
            f"hello), with no other client and then with {s['idle_count']:,} connections "
            "held open that never send a byte (from forked client processes, connecting "
            "from 127.0.0.2 where the probes connect from 127.0.0.1: from one address, their "
            "ports would make each probe's connect() search for a free one, ~1 ms at 15,000; "
            "each run waits until the server's own descriptors show it holds all of them); "
            "server CPU over "
            f"{s['cpu_window_s']:g} s with nothing connected and with them held; {rounds}; "
            f"{pin}")


def _goal_line(n: int) -> str:
    return (f"Goal (issue 22): a fresh client's median first byte with {n:,} idle connections "
            f"held at most {GOAL_VS_QUIET:g}× our own without them and at most "
            f"{GOAL_VS_REF:g}× tuned nginx's with them")


def markdown(data: dict[str, Any]) -> str:
    meta, summary = data["meta"], data["summary"]
    n = meta["settings"]["idle_count"]
    out = ["# Idle connections benchmark", "", report.run_line(meta), "",
           f"Method: {method_line(meta)}. Each server's answer (status, body, Content-Type, "
           "keep-alive) was checked before and after. A run counts when every probe was "
           "answered and the server held every idle connection from the first probe to the "
           "last. Generated by `tests/benchmarks/run.py --phases idle` (part of `make "
           "bench`).", "",
           report.interference([dict(r, server_cpu_load=r["held_window"]["server_cpu_load"])
                                for r in data["runs"]]), "",
           _goal_line(n) + ": the two \"met\" answers below, in that order.", "",
           "## Time to first byte of a fresh client (ms)", "",
           f"| Server | p50 quiet | p99 quiet | p50 with {n:,} idle | p99 with {n:,} idle | "
           "with ÷ without, p50 (p99) | ÷ tuned nginx's with idle, p50 (p99) | "
           "÷ tuned nginx's quiet, p50 | goals met | valid runs |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for name in _ranked(data):
        s = summary[name]
        vs_ref, vs_ref_quiet = "(reference)", ""
        if name != REF:
            vs_ref = f"{_x(s['idle_vs_ref_p50'])} ({_x(s['idle_vs_ref_p99'])})"
            vs_ref_quiet = _x(s["quiet_vs_ref_p50"])
        out.append(
            f"| {_label(data, name)} | {_ms(s['quiet_p50_ms'])} | {_ms(s['quiet_p99_ms'])} | "
            f"{_ms(s['idle_p50_ms'])} | {_ms(s['idle_p99_ms'])} | "
            f"{_x(s['idle_vs_quiet_p50'])} ({_x(s['idle_vs_quiet_p99'])}) | "
            f"{vs_ref} | {vs_ref_quiet} | {_met(s)} | "
            f"{s['valid_runs']} of {s['runs']}"
            + (f" ({'; '.join(s['invalid_reasons'])})" if s["invalid_reasons"] else "") + " |")
    out += ["", "## Server CPU and memory", "",
            "CPU: the server's whole process tree (schedstat, every thread), over the window "
            "with nothing connected and with the idle connections held, no request anywhere: "
            "ms of CPU per second (a loop that does nothing while its clients do nothing "
            "shows ~0); and per probe, while probing.", "",
            "| Server | CPU, nothing connected (ms/s) | CPU, idle held (ms/s) | per probe quiet "
            "(µs) | per probe with idle (µs) | RSS quiet → held (MiB) | opened and accepted "
            "in (s) | held for (s) |", "|---|---|---|---|---|---|---|---|"]
    for name in _ranked(data):
        s = summary[name]
        rss = ("–" if s["rss_quiet"] is None or s["rss_held"] is None else
               f"{s['rss_quiet'] / report.MIB:.1f} → {s['rss_held'] / report.MIB:.1f}")
        out.append(f"| {_label(data, name)} | {_num(s['quiet_cpu_ms_per_s'])} | "
                   f"{_num(s['held_cpu_ms_per_s'])} | {_num(s['quiet_cpu_us_per_probe'], 0)} | "
                   f"{_num(s['idle_cpu_us_per_probe'], 0)} | {rss} | {_num(s['open_s'])} | "
                   f"{_num(s['held_s'])} |")
    out += ["", "## Every run", "",
            "| Server | round | quiet p50 / p99 / max (ms) | with idle p50 / p99 / max (ms) | "
            "held once accepted, after the probes | CPU held (ms/s) | valid |",
            "|---|---|---|---|---|---|---|"]
    for name in _ranked(data):
        for r in sorted((r for r in data["runs"] if r["contender"] == name),
                        key=lambda r: r["round"]):
            q, i = r["quiet"], r["idle"]
            out.append(
                f"| {_label(data, name)} | {r['round']} | {_ms(q.get('p50_ms'))} / "
                f"{_ms(q.get('p99_ms'))} / {_ms(q.get('max_ms'))} | {_ms(i.get('p50_ms'))} / "
                f"{_ms(i.get('p99_ms'))} / {_ms(i.get('max_ms'))} | {r['held']:,}, "
                f"{r['held_end']:,} | {_num(r['held_window']['server_cpu_ms_per_s'])} | "
                f"{'yes' if r['valid'] else 'no: ' + str(r['invalid_reason'])} |")
    out += report.status_sections(data["contenders"], "Server", "Servers")
    return "\n".join(out) + "\n"


def readme_lines(data: dict[str, Any], out: Path, root: Path) -> list[str]:
    """The README's table: per server, first byte quiet and with the idle connections, the
    two ratios of the goal, and the CPU the server spends holding them."""
    if not data["summary"]:
        return []
    rel = out.relative_to(root).as_posix() if out.is_relative_to(root) else None
    link = f"{report.REPO_BLOB}/{rel}/idle.md" if rel else str(out / "idle.md")
    meta = data["meta"]
    n = meta["settings"]["idle_count"]
    rounds = meta["settings"]["rounds"]
    rounds_text = "1 round" if rounds == 1 else f"{rounds} rounds, medians"
    lines = [f"Idle connections ({meta['date'][:10]}, {rounds_text}): a fresh client's "
             f"time to first byte, p50 / p99 in ms, with no other client and with {n:,} idle "
             "connections held open; one worker each. "
             f"{_goal_line(n)} ([{rel or 'results'}/idle.md]({link})):", "",
             f"| Server | Quiet | With {n:,} idle | With ÷ without (p50) | ÷ tuned nginx "
             "with idle (p50) | Server CPU while they idle |", "|---|---|---|---|---|---|"]
    for name in _ranked(data):
        s = data["summary"][name]
        if s["quiet_p50_ms"] is None:
            lines.append(f"| {_label(data, name)} | no valid run "
                         f"({'; '.join(s['invalid_reasons'])}) | | | | |")
            continue
        cpu = s["held_cpu_ms_per_s"]
        lines.append(
            f"| {_label(data, name)} | {_ms(s['quiet_p50_ms'])} / {_ms(s['quiet_p99_ms'])} | "
            f"{_ms(s['idle_p50_ms'])} / {_ms(s['idle_p99_ms'])} | "
            f"{_x(s['idle_vs_quiet_p50'])} | "
            f"{'–' if name == REF else _x(s['idle_vs_ref_p50'])} | "
            f"{'–' if cpu is None else f'{cpu / 10:.1f}%'} |")
    return lines


def write_all(data: dict[str, Any], out: Path) -> list[Path]:
    return report.write_pair(out, "idle", data, markdown(data))


def print_summary(data: dict[str, Any]) -> None:
    for name in _ranked(data):
        s = data["summary"][name]
        vs_ref = "" if name == REF else f", {_x(s['idle_vs_ref_p50'])} tuned nginx's"
        log.info("idle %-18s first byte p50/p99 %s/%s ms quiet, %s/%s ms with %d idle: "
                 "p50 %s quiet%s; server CPU while held %s ms/s%s", name,
                 _ms(s["quiet_p50_ms"]), _ms(s["quiet_p99_ms"]), _ms(s["idle_p50_ms"]),
                 _ms(s["idle_p99_ms"]), data["meta"]["settings"]["idle_count"],
                 _x(s["idle_vs_quiet_p50"]), vs_ref, _num(s["held_cpu_ms_per_s"]),
                 f"; goals met: {_met(s, bold=False)}" if _met(s) else "")
