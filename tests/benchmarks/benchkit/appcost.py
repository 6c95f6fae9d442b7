"""The runner's side of the in-process app cost (../app_cost.py): what each server's app costs
by itself, so the report can give each server's overhead per request.

One ``app_cost.py --serve`` process per (app, environment) pair, in the contender's own
interpreter, pinned to the server's CPU. Their repeats are interleaved (A B C ... A B C ...),
one process busy at a time: some before the servers start, then one more per pair at the start
of every hello round, so that the app's cost is sampled over the same stretch of time as the
servers' CPU per request (on a shared machine the CPU time of the same code drifts by tens of
percent from one minute to the next).

Pairs that run the same app with the same Python and the same framework versions are one
measurement: their repeats are pooled into one figure per app, so two servers of the same app
are never compared through two different noisy estimates of the same cost. Each pair's own
median is kept in results.json.
"""

from __future__ import annotations

import json
import logging
import os
import select
import statistics
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import contenders as ck

log = logging.getLogger("bench")

SCRIPT = ck.BENCH_DIR / "app_cost.py"


@dataclass
class _Pair:
    ref: str
    interface: str
    group: list[ck.Contender]
    proc: subprocess.Popen[str]
    log: Path
    info: dict[str, Any] = field(default_factory=dict)
    cpu: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)

    @property
    def envs(self) -> str:
        return ", ".join(sorted({c.env for c in self.group}))


class AppCosts:
    def __init__(self, *, cpu: int | None, seconds: float, run_dir: Path) -> None:
        self.cpu = cpu
        self.seconds = seconds
        self.run_dir = run_dir
        self.pairs: list[_Pair] = []
        self.errors: dict[str, str] = {}  # contender -> why its app could not be measured

    def start(self, contenders: list[ck.Contender], repeats: int) -> None:
        """Start and set up one process per (app, interpreter), then `repeats` rounds."""
        groups: dict[tuple[str, str, str], list[ck.Contender]] = {}
        for c in contenders:
            if c.kind == "hello" and c.app and c.python:
                groups.setdefault((c.app["ref"], c.app["interface"], c.python), []).append(c)
        if not groups:
            return
        log.info("== app phase: in-process cost of %d app/environment pairs, ~%g s per repeat",
                 len(groups), self.seconds)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for i, ((ref, interface, python), group) in enumerate(groups.items()):
            cmd = [python, str(SCRIPT), "--app", ref, "--interface", interface, "--seconds",
                   str(self.seconds), "--serve"]
            if self.cpu is not None:
                cmd += ["--cpu", str(self.cpu)]
            env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
            env.pop("VIRTUAL_ENV", None)
            if any(c.env != "project" for c in group):
                env.pop("PYTHONPATH", None)
            log_path = self.run_dir / f"app_cost.{i}.log"
            with open(log_path, "wb") as err:
                proc = subprocess.Popen(cmd, cwd=ck.SERVERS_DIR, env=env, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=err)
            pair = _Pair(ref, interface, group, proc, log_path)
            self.pairs.append(pair)
            # Set-up (import, check, warm-up) one at a time too: one process busy on the CPU.
            answer = self._ask(pair, None, 300)
            if answer is not None:
                pair.info = answer
        for _ in range(repeats):
            self.repeat()

    def repeat(self) -> None:
        """One repeat of every live pair, in turn."""
        for pair in list(self.pairs):
            answer = self._ask(pair, "run", 300)
            if answer is not None:
                pair.cpu.append(answer["cpu_us"])
                pair.wall.append(answer["wall_us"])

    def finish(self, status: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
        """Check every app's answer once more, end the processes, and return one record per
        pair; each contender's status gets its app's (pooled) cost per call."""
        for pair in list(self.pairs):
            self._ask(pair, "check", 60)
        self.close()
        pools: dict[str, list[_Pair]] = {}
        for pair in self.pairs:
            if pair.cpu:
                key = json.dumps([pair.ref, pair.interface, pair.info.get("python"),
                                  pair.info.get("versions")], sort_keys=True)
                pools.setdefault(key, []).append(pair)
        records = []
        for pool in pools.values():
            pooled = [v for p in pool for v in p.cpu]
            per_call = round(statistics.median(pooled), 3)
            for pair in pool:
                rec = {k: v for k, v in pair.info.items() if k != "ready"}
                rec.update(label=pair.group[0].app["label"] if pair.group[0].app else pair.ref,
                           env=pair.envs, contenders=[c.name for c in pair.group],
                           repeats_us=[round(v, 3) for v in pair.cpu],
                           env_per_call_us=round(statistics.median(pair.cpu), 3),
                           min_us=round(min(pair.cpu), 3), max_us=round(max(pair.cpu), 3),
                           wall_per_call_us=round(statistics.median(pair.wall), 3),
                           per_call_us=per_call, pooled_with=len(pool), pooled_repeats=len(pooled))
                records.append(rec)
                for c in pair.group:
                    status[c.name]["app_cpu_us_per_call"] = per_call
                log.info("%-24s %-24s %8.2f us CPU per call in-process (this env %.2f, "
                         "%.2f-%.2f; %s)", pair.ref, pair.envs, per_call, rec["env_per_call_us"],
                         rec["min_us"], rec["max_us"], ", ".join(rec["contenders"]))
        for name, why in self.errors.items():
            status[name]["app_cost_error"] = why
        return records

    def close(self) -> None:
        for pair in self.pairs:
            proc = pair.proc
            if proc.stdin and not proc.stdin.closed:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def _fail(self, pair: _Pair, why: str) -> None:
        if pair.proc.poll() is None:
            pair.proc.kill()
            pair.proc.wait()
        why = why or ck._tail(pair.log.read_text(errors="replace"), 1) or \
            f"exit status {pair.proc.returncode}"
        log.warning("app cost of %s (%s) failed: %s", pair.ref, pair.envs, why)
        for c in pair.group:
            self.errors[c.name] = why
        pair.cpu.clear()
        self.pairs.remove(pair)

    def _ask(self, pair: _Pair, command: str | None, timeout: float) -> dict[str, Any] | None:
        proc = pair.proc
        assert proc.stdin is not None and proc.stdout is not None
        ready: list[Any] = []
        try:
            if command is not None:
                proc.stdin.write(command + "\n")
                proc.stdin.flush()
            ready, _, _ = select.select([proc.stdout], [], [], timeout)
            line = proc.stdout.readline() if ready else ""
            answer = json.loads(line) if line else None
        except (OSError, ValueError) as exc:
            self._fail(pair, repr(exc))
            return None
        if answer is None or "error" in answer:
            self._fail(pair, answer["error"] if answer else
                       ("" if ready else f"no answer within {timeout:g} s"))
            return None
        return dict(answer)
