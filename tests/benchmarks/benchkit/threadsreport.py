"""The threads phase's document: results/threads.json and threads.md (benchkit/threadsphase.py).

Figures are medians over the valid rounds; a ratio is the median of the per-round ratios of
two servers measured in the same run (the rounds are interleaved, so each pair shares the
machine's state). Every figure is shown with the interpreter it ran on.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from . import report
from .threadsphase import APP_THREADS, HELLO, RSS_APPS, RSS_CONFIGS, RSS_GOAL, RSS_N, SCALE, App

log = logging.getLogger("bench")

MEDIANS = ("rps", "p50_us", "p99_us", "server_cpu_us_per_req", "server_cpu_util")
# (id, numerator leg, denominator leg, what the ratio says) of the price part, per app.
PRICE_RATIOS = (
    ("loops1_vs_plain", "ft-loops1", "ft",
     "--loop-threads 1 ÷ one plain process, both 3.13t GIL off (the price of free "
     "threading's loop threads; serve.py takes the same path for 1 as without the option, "
     "so on this code it is the run's noise floor)"),
    ("ft_vs_gil_build", "ft", "gil",
     "3.13t GIL off ÷ the 3.13 GIL build, one plain process each (the price of the build)"),
    ("gil_on_vs_off", "ft-gil-on", "ft", "3.13t GIL on ÷ 3.13t GIL off"),
    ("ours_vs_granian", "ft", "granian-ft", "ours ÷ granian, both 3.13t GIL off, one worker"),
)


# The same for the apps part (WSGI app threads waiting or computing).
APP_RATIOS = (
    ("gil_off_vs_on", "ft", "ft-gil-on",
     "3.13t GIL off ÷ GIL on, one process each (what app threads running at once gain)"),
    ("ft_vs_gil_build", "ft", "gil", "3.13t GIL off ÷ the 3.13 GIL build, one process each"),
    ("ours_vs_granian", "ft", "granian-ft",
     "ours ÷ granian, both 3.13t GIL off, as many app threads"),
)


def _name(part: str, leg: str, app: str) -> str:
    return f"{part}-{leg}-{app}"


def _ratio(runs: list[dict[str, Any]], phase: str, num: str, den: str,
           metric: str = "rps") -> dict[str, Any] | None:
    value, pairs = report.paired_ratio(runs, {"ours": num, "ref": den, "phase": phase,
                                              "metric": metric})
    return None if value is None else {"ratio": round(value, 3), "rounds": pairs}


def _interp(runs: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    return next((r.get("interpreter") for r in runs if r["contender"] == name), None)


def _legs_part(runs: list[dict[str, Any]], part: str, apps: tuple[App, ...],
               ratio_defs: tuple[tuple[str, str, str, str], ...]) -> dict[str, Any]:
    """Per app of a part whose servers are legs (price, apps): each leg's medians and the
    part's ratios, of requests per second and of server CPU per request."""
    out: dict[str, Any] = {}
    for app in apps:
        cells = {}
        for name in dict.fromkeys(r["contender"] for r in runs
                                  if r["phase"] == part and r.get("app") == app.id):
            mine = [r for r in runs if r["contender"] == name and r["phase"] == part]
            cells[mine[0]["leg"]] = dict(report.cell_summary(mine, MEDIANS),
                                         contender=name, interpreter=_interp(runs, name))
        if not cells:
            continue
        ratios = {}
        for rid, num, den, _text in ratio_defs:
            pair = {m: _ratio(runs, part, _name(part, num, app.id), _name(part, den, app.id), m)
                    for m in ("rps", "server_cpu_us_per_req")}
            if pair["rps"] is not None:
                ratios[rid] = pair
        out[app.id] = {"legs": cells, "ratios": ratios}
    return out


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"price": _legs_part(runs, "price", HELLO, PRICE_RATIOS),
                           "apps": _legs_part(runs, "apps", APP_THREADS, APP_RATIOS),
                           "scale": {}, "rss": {}}
    for n in SCALE:
        phase = f"scale{n}"
        for app in HELLO:
            mine = [r for r in runs if r["phase"] == phase and r.get("app") == app.id]
            if not mine:
                continue
            cells = {}
            for name in dict.fromkeys(r["contender"] for r in mine):
                these = [r for r in mine if r["contender"] == name]
                cells[these[0]["leg"]] = dict(report.cell_summary(these, MEDIANS),
                                              contender=name, interpreter=_interp(runs, name))
            ratios = {}
            for rid, num, den in (("loops_vs_workers", f"loops{n}", f"workers{n}"),
                                  ("loops_vs_granian", f"loops{n}", f"granian{n}")):
                r = _ratio(runs, phase, _name("scale", num, app.id), _name("scale", den, app.id))
                if r is not None:
                    ratios[rid] = r
            out["scale"].setdefault(str(n), {})[app.id] = {"legs": cells, "ratios": ratios}
    for app in RSS_APPS:
        mine = [r for r in runs if r["phase"] == "rss" and r.get("app") == app.id]
        if not mine:
            continue
        cells = {}
        for leg, _text, _options in RSS_CONFIGS:
            these = [r for r in mine if r["leg"] == leg]
            valid = [r for r in these if r["valid"]]
            if not these:
                continue
            cells[leg] = {"contender": these[0]["contender"], "runs": len(these),
                          "valid_runs": len(valid),
                          "invalid_reasons": sorted({r["invalid_reason"] for r in these
                                                     if not r["valid"]}),
                          "rss": report._median([r["rss"] for r in valid]),
                          "pss": report._median([r["pss"] for r in valid]),
                          "rss_supervisor": report._median([r["rss_supervisor"] for r in valid
                                                            if "rss_supervisor" in r]),
                          "counted_processes": valid[-1]["counted_processes"] if valid else None,
                          "threads": valid[-1]["threads"] if valid else None,
                          "interpreter": these[0].get("interpreter")}
        by_n: dict[str, dict[str, Any]] = {}
        for n in RSS_N:
            mem: dict[str, dict[str, Any]] = {}
            for metric in ("rss", "pss"):
                r = _ratio(runs, "rss", _name("rss", f"loops{n}", app.id),
                           _name("rss", f"workers{n}", app.id), metric)
                if r is not None:
                    mem[metric] = r
            if mem:
                goal = mem.get("rss", {}).get("ratio")
                by_n[str(n)] = {"ratios": mem,
                                "goal_met": None if goal is None else goal <= RSS_GOAL}
        out["rss"][app.id] = {"configs": cells, "by_n": by_n, "goal": RSS_GOAL}
    return out


def build(meta: dict[str, Any], settings: dict[str, Any], status: dict[str, Any],
          runs: list[dict[str, Any]], info: dict[str, Any],
          skipped: str | None = None) -> dict[str, Any]:
    """`meta`: the runner's (date, machine, versions), its settings replaced by the phase's;
    `info`: what the phase found (interpreters, environments, granian, the parts' plans);
    `skipped`: why the phase did not run at all."""
    return {"meta": dict(meta, settings=settings), "skipped": skipped, "info": info,
            "contenders": status, "summary": summarize(runs), "runs": runs}


def load(out: Path) -> dict[str, Any] | None:
    path = out / "threads.json"
    if not path.exists():
        return None
    old = json.loads(path.read_text())
    return build(old["meta"], old["meta"]["settings"], old["contenders"], old["runs"],
                 old.get("info", {}), old.get("skipped"))


def _num(v: float | None, digits: int = 0) -> str:
    return "–" if v is None else f"{v:,.{digits}f}"


def _x(cell: dict[str, Any] | None) -> str:
    return "–" if not cell else f"{cell['ratio']:.2f}×"


def _mib(v: float | None) -> str:
    return "–" if v is None else f"{v / report.MIB:.1f}"


def interpreter_text(i: dict[str, Any] | None) -> str:
    """sys.version's first word, the build and the GIL's state as the probe saw them."""
    if not i:
        return "–"
    if "error" in i:
        return f"probe failed: {i['error']}"
    build = "free-threaded" if i.get("Py_GIL_DISABLED") else "GIL build"
    gil = "GIL on" if i.get("gil_enabled") else "GIL off"
    env = f", PYTHON_GIL={i['PYTHON_GIL']}" if i.get("PYTHON_GIL") is not None else ""
    unforced = i.get("gil_enabled_without_PYTHON_GIL")
    alone = "" if unforced is None else f" (without it: GIL {'on' if unforced else 'off'})"
    return f"{i.get('version', '?').split()[0]} {build}, {gil}{env}{alone}"


def _valid(s: dict[str, Any]) -> str:
    text = f"{s['valid_runs']} of {s['runs']}"
    return text + (f" ({'; '.join(s['invalid_reasons'])})" if s.get("invalid_reasons") else "")


def _legs_table(cells: dict[str, Any], labels: dict[str, str]) -> list[str]:
    out = ["| Server | Interpreter | req/s | p50 (ms) | p99 (ms) | server CPU (µs/req) | "
           "valid runs |", "|---|---|---|---|---|---|---|"]
    for leg, s in cells.items():
        p50 = None if s.get("p50_us") is None else s["p50_us"] / 1000
        p99 = None if s.get("p99_us") is None else s["p99_us"] / 1000
        out.append(f"| {labels.get(leg, leg)} | {interpreter_text(s.get('interpreter'))} | "
                   f"{_num(s.get('rps'))} | {_num(p50, 2)} | {_num(p99, 2)} | "
                   f"{_num(s.get('server_cpu_us_per_req'), 1)} | {_valid(s)} |")
    return out


def _legs_sections(part: dict[str, Any], apps: tuple[App, ...],
                   labels: dict[str, str]) -> list[str]:
    out: list[str] = []
    for app in apps:
        cell = part.get(app.id)
        if not cell:
            continue
        out += ["", f"### {app.label}", ""] + _legs_table(cell["legs"], labels)
        if cell["ratios"]:
            out += ["", "| Ratio | req/s | server CPU per request | rounds |", "|---|---|---|---|"]
            for rid, pair in cell["ratios"].items():
                out.append(f"| {rid} | {_x(pair['rps'])} | "
                           f"{_x(pair['server_cpu_us_per_req'])} | {pair['rps']['rounds']} |")
    return out


def markdown(data: dict[str, Any]) -> str:
    meta, info, summary = data["meta"], data["info"], data["summary"]
    s = meta["settings"]
    out = ["# Free-threading benchmark (`--loop-threads`)", "", report.run_line(meta), ""]
    if data.get("skipped"):
        out += [f"Skipped: {data['skipped']}.", ""]
        return "\n".join(out)
    rounds = "1 round" if s["rounds"] == 1 else f"{s['rounds']} interleaved rounds (medians)"
    pin = (f"server pinned to CPU {s['server_cpu']}, wrk to CPU {s['client_cpu']}"
           if s.get("server_cpu") is not None else "no CPU pinning (fewer than 2 CPUs)")
    out += [f"Method: our `cymongoose` CLI serving the hello apps of servers/hello_apps.py, "
            f"`{s['wrk']}`, {s['warmup_s']:g} s warm-up each, {rounds}; {pin}. A ratio is "
            "the median of the per-round ratios of two servers of the same run. The "
            "interpreter column is what a probe run like the server (same PYTHON_GIL, the "
            "core and the app's framework imported) saw: sys.version, Py_GIL_DISABLED, "
            "sys._is_gil_enabled(). Generated by `tests/benchmarks/run.py --phases threads`.",
            ""]
    interference = report.interference([r for r in data["runs"] if "server_cpu_load" in r])
    if interference:
        out += [interference, ""]
    out += ["## Interpreters", "", "| Role | Interpreter | sys.version | Py_GIL_DISABLED | "
            "environment |", "|---|---|---|---|---|"]
    ft = info.get("ft_interpreter") or {}
    ft_versions = info.get("ft_env", {}).get("versions", {})
    out.append(f"| free-threaded | {ft.get('executable', s.get('ft_python'))} | "
               f"{ft.get('version', '–')} | {ft.get('Py_GIL_DISABLED')} | "
               f"{', '.join(f'{k} {v}' for k, v in ft_versions.items())} |")
    g = info.get("gil_env", {})
    gi = g.get("interpreter") or {}
    out.append(f"| GIL build | {gi.get('executable', g.get('base'))} | "
               f"{gi.get('version', '–')} | {gi.get('Py_GIL_DISABLED')} | "
               + (f"skipped: {g['skipped']}" if g.get("skipped") else
                  ", ".join(f"{k} {v}" for k, v in g.get("versions", {}).items())) + " |")
    gr = info.get("granian", {})
    out.append(f"| granian (free-threaded wheel) | {gr.get('python', '–')} | "
               f"{(gr.get('interpreter') or {}).get('version', '–')} | | "
               + (f"skipped: {gr['skipped']}" if gr.get("skipped") else
                  ", ".join(f"{k} {v}" for k, v in gr.get("versions", {}).items())
                  + f"; granian imported alone: "
                  f"{interpreter_text(gr.get('interpreter'))}") + " |")
    labels = info.get("price", {}).get("legs", {})
    out += ["", "## The price of free threading and of the build (one server, one CPU)", ""]
    for rid, _num_leg, _den, text in PRICE_RATIOS:
        out.append(f"- `{rid}`: {text}")
    out += _legs_sections(summary["price"], HELLO, labels)
    apps = info.get("apps", {})
    if summary.get("apps") or apps:
        out += ["", "## WSGI app threads: an app that waits, an app that computes", "",
                f"`hello_apps:wsgi_wait` sleeps {apps.get('wait_s', 0) * 1000:g} ms per "
                "request (an app waiting on its database, without one); `hello_apps:wsgi_cpu` "
                f"runs {apps.get('cpu_loop', 0):,} steps of a pure-Python loop. Where the "
                "machine has fewer than 4 CPUs, the waiting app's servers get one CPU (wrk "
                "the other) and the computing app's servers every CPU, wrk sharing the last.",
                ""]
        for rid, _num_leg, _den, text in APP_RATIOS:
            out.append(f"- `{rid}`: {text}")
        for app in APP_THREADS:
            lay = apps.get("layout", {}).get(app.id)
            if lay:
                share = report._median([r["client_cpu_util"] for r in data["runs"]
                                        if r["phase"] == "apps" and r.get("app") == app.id
                                        and r.get("client_cpu_util") is not None])
                wrk_share = "" if share is None else f" (wrk used {share:.0%} of a CPU)"
                out += ["", f"{app.label}: server on CPUs {lay['server_cpus']}, wrk "
                        f"-t{lay['wrk_threads']} -c{apps.get('connections', {}).get(app.id)} "
                        f"on {lay['client_cpus']} ({lay['kind']}){wrk_share}."]
        out += _legs_sections(summary.get("apps", {}), APP_THREADS, apps.get("legs", {}))
    out += ["", "## N loop threads in one process against N worker processes", ""]
    plans = info.get("scale", {}).get("n", {})
    for n, plan in plans.items():
        if "skipped" in plan:
            out.append(f"- N = {n}: skipped: {plan['skipped']}")
    for n, apps in summary["scale"].items():
        plan = plans.get(n, {})
        out += ["", f"### N = {n} (server on CPUs {plan.get('server_cpus')}, wrk "
                f"-t{plan.get('wrk_threads')} -c{plan.get('connections')} on "
                f"{plan.get('client_cpus')})", ""]
        for app_id, cell in apps.items():
            out += [f"{app_id}: loops ÷ workers {_x(cell['ratios'].get('loops_vs_workers'))}, "
                    f"loops ÷ granian {_x(cell['ratios'].get('loops_vs_granian'))}", ""]
            out += _legs_table(cell["legs"], {}) + [""]
    rss = info.get("rss", {})
    out += ["", "## Memory: --loop-threads N against --workers N", "",
            f"Each server started fresh per round, loaded for {rss.get('warmup_s', 0):g} s "
            f"(wrk -c{rss.get('connections')}), its connections closed, then sampled. "
            f"Counted: {rss.get('counted', '')}. Goal (issue 37): loops ÷ workers RSS ≤ "
            f"{RSS_GOAL:g}.", "",
            "| App | N | Interpreter | one process (MiB) | --loop-threads N (MiB) | --workers N, "
            "workers' sum (MiB) | supervisor (MiB) | loops ÷ workers, RSS (PSS) | goal met | "
            "valid runs |", "|---|---|---|---|---|---|---|---|---|---|"]
    for app in RSS_APPS:
        cell = summary["rss"].get(app.id)
        if not cell:
            continue
        c = cell["configs"]

        def fig(leg: str, key: str = "rss", cfg: dict[str, Any] = c) -> str:
            one = cfg.get(leg)
            return "–" if not one else (f"{_mib(one[key])} ({_mib(one['pss'])} PSS)"
                                        if key == "rss" else _mib(one[key]))

        interp = next((v.get("interpreter") for v in c.values()), None)
        for n, at_n in cell["by_n"].items():
            met = {True: "yes", False: "**no**", None: "–"}[at_n["goal_met"]]
            legs = ("plain", f"loops{n}", f"workers{n}")
            out.append(f"| {app.label} | {n} | {interpreter_text(interp)} | {fig('plain')} | "
                       f"{fig(f'loops{n}')} | {fig(f'workers{n}')} | "
                       f"{fig(f'workers{n}', 'rss_supervisor')} | "
                       f"{_x(at_n['ratios'].get('rss'))} ({_x(at_n['ratios'].get('pss'))}) | "
                       f"{met} | " + ", ".join(f"{leg} {_valid(c[leg])}" for leg in legs
                                                if leg in c) + " |")
    out += ["", "## Every run", "", "| Server | phase | round | req/s | p99 (ms) | CPU (µs/req) "
            "| RSS (MiB) | valid |", "|---|---|---|---|---|---|---|---|"]
    for r in data["runs"]:
        p99 = r.get("p99_us")
        out.append(f"| {r['contender']} | {r['phase']} | {r['round']} | {_num(r.get('rps'))} | "
                   f"{_num(None if p99 is None else p99 / 1000, 2)} | "
                   f"{_num(r.get('server_cpu_us_per_req'), 1)} | "
                   f"{_mib(r.get('rss') if r['phase'] == 'rss' else r.get('rss_after'))} | "
                   f"{'yes' if r['valid'] else 'no: ' + str(r['invalid_reason'])} |")
    out += report.status_sections(data["contenders"], "Server", "Servers")
    return "\n".join(out) + "\n"


def write_all(data: dict[str, Any], out: Path) -> list[Path]:
    return report.write_pair(out, "threads", data, markdown(data))


def print_summary(data: dict[str, Any]) -> None:
    if data.get("skipped"):
        return  # the phase said why when it stopped
    summary = data["summary"]
    for part in ("price", "apps"):
        for app_id, cell in summary.get(part, {}).items():
            legs = ", ".join(f"{leg} {_num(s.get('rps'))}" for leg, s in cell["legs"].items())
            ratios = ", ".join(f"{rid} {_x(p['rps'])}" for rid, p in cell["ratios"].items())
            log.info("threads %s %-5s req/s: %s; %s", part, app_id, legs, ratios)
    for n, apps in summary["scale"].items():
        for app_id, cell in apps.items():
            log.info("threads N=%s %-5s loops ÷ workers %s, loops ÷ granian %s", n, app_id,
                     _x(cell["ratios"].get("loops_vs_workers")),
                     _x(cell["ratios"].get("loops_vs_granian")))
    for n, plan in data["info"].get("scale", {}).get("n", {}).items():
        if "skipped" in plan:
            log.info("threads N=%s skipped: %s", n, plan["skipped"])
    for app_id, cell in summary["rss"].items():
        c = cell["configs"]
        for n, at_n in cell["by_n"].items():
            log.info("threads RSS %-7s one process %s MiB, --loop-threads %s %s MiB, --workers "
                     "%s %s MiB (workers' sum): loops ÷ workers %s (PSS %s), goal <= %g %s",
                     app_id, _mib(c.get("plain", {}).get("rss")), n,
                     _mib(c.get(f"loops{n}", {}).get("rss")), n,
                     _mib(c.get(f"workers{n}", {}).get("rss")), _x(at_n["ratios"].get("rss")),
                     _x(at_n["ratios"].get("pss")), RSS_GOAL,
                     {True: "met", False: "NOT met", None: "–"}[at_n["goal_met"]])
