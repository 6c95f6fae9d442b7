"""--merge-pythons: a run of the pythons phase alone adds its Python versions to the
per-Python table of an earlier full run's results.json, instead of replacing that document.

It is how the versions a full run cannot reach get their row: CPython 3.14, which runs only
inside make test's sid root (bench.mk's bench-py314 runs the runner there), or a version
measured after the full run. Each version's ratios come from its own interleaved rounds, so a
row is whole in itself; the row says which run measured it (its date) when that is not the
document's own.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from .pythons import order


def load(path: Path) -> dict[str, Any]:
    """The full run's results.json, which the merge needs."""
    if not path.exists():
        raise SystemExit(f"bench: --merge-pythons needs a full run's {path} to merge into")
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def merge(old: dict[str, Any], meta: dict[str, Any], status: dict[str, Any],
          runs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any],
                                               list[dict[str, Any]]]:
    """`old`'s meta, contenders and runs with the versions of this run's pythons phase
    (meta["shapes"]["pythons"]) put in place of any it had."""
    versions = meta.get("shapes", {}).get("pythons", {}).get("versions", {})
    mine = tuple(f"@py{v}" for v in versions)
    merged_meta = copy.deepcopy(old["meta"])
    table = merged_meta.setdefault("shapes", {}).setdefault("pythons", {})
    table.setdefault("versions", {}).update(
        {v: dict(entry, measured=meta["date"], runner_python=meta["tools"]["runner_python"])
         for v, entry in versions.items()})
    table["versions"] = dict(sorted(table["versions"].items(), key=lambda kv: order(kv[0])))
    merged_status = {n: s for n, s in old["contenders"].items() if not n.endswith(mine)}
    merged_status.update({n: s for n, s in status.items() if n.endswith(mine)})
    merged_runs = [r for r in old["runs"] if not r["contender"].endswith(mine)]
    merged_runs += [r for r in runs if r["contender"].endswith(mine)]
    return merged_meta, merged_status, merged_runs
