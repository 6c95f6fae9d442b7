"""make fuzz: every harness (or --only some) under atheris' libFuzzer for --seconds each,
against the extension built with clang's coverage counters, ASan and UBSan (.venv-fuzz).

Each run starts from the kept corpus (tests/fuzz/corpus/NAME) and the harness's SEEDS,
writes what it finds to build/fuzz/work/NAME, and then merges both into a fresh, minimal
corpus that replaces the kept one: an input stays only if it adds coverage. A crash, a
sanitizer report, a differential mismatch or a hang leaves its input in
build/fuzz/artifacts and fails the run. Figures per harness go to
tests/fuzz/results/NAME.json (docs/reliability.md)."""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
CORPUS = TESTS / "fuzz" / "corpus"
RESULTS = TESTS / "fuzz" / "results"
WORK = ROOT / "build" / "fuzz"
# libFuzzer's options for every harness: inputs up to 8 KiB (a request head with a body
# fits; longer ones only slow the search), a 10 s hang is a failure, memory is bounded.
LIBFUZZER_OPTIONS = ["-max_len=8192", "-timeout=10", "-rss_limit_mb=3072",
                     "-print_final_stats=1", "-reload=60"]


def harness(name: str):  # noqa: ANN201 - a module
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    return importlib.import_module(f"fuzz.harnesses.{name}")


def child(name: str, libfuzzer_args: list[str]) -> None:
    """Inside the sanitized interpreter: atheris drives one harness."""
    import atheris

    with atheris.instrument_imports(include=["cymongoose", "fuzz"]):
        module = harness(name)
    seed_dir = os.environ.get("FUZZ_SEED_DIR")
    if seed_dir:  # the parent cannot import the harness: it has no sanitizer runtime
        for seed in module.SEEDS:
            (Path(seed_dir) / hashlib.sha1(seed).hexdigest()).write_bytes(seed)
    # libFuzzer runs argv[0] again for -merge: the wrapper that starts this child.
    atheris.Setup([os.environ.get("FUZZ_SELF", sys.argv[0]), *libfuzzer_args], module.one_input)
    atheris.Fuzz()


def sanitizer_env(name: str) -> dict[str, str]:
    import atheris  # noqa: F401 - only to find its runtime

    runtime = Path(importlib.import_module("atheris").path()) / "asan_with_fuzzer.so"
    env = dict(os.environ)
    env["FUZZ_SELF"] = str(_wrapper(name))
    env["LD_PRELOAD"] = str(runtime)
    # Leaks are not LeakSanitizer's to judge here: CPython keeps its objects to the end by
    # design. A leak per input shows as growth, which -rss_limit_mb and the soak catch.
    env["ASAN_OPTIONS"] = "detect_leaks=0:allocator_may_return_null=1:abort_on_error=0"
    env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
    symbolizer = Path("/usr/lib/llvm-14/bin/llvm-symbolizer")
    if symbolizer.exists():
        env["ASAN_SYMBOLIZER_PATH"] = str(symbolizer)
    return env


def _wrapper(name: str) -> Path:
    """An executable that starts this harness's child: what libFuzzer runs to merge."""
    path = WORK / "bin" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).resolve()}" '
                    f'--child {name} -- "$@"\n')
    path.chmod(0o755)
    return path


def fuzz_one(name: str, seconds: int) -> dict[str, object]:
    kept = CORPUS / name
    work = WORK / "work" / name
    artifacts = WORK / "artifacts"
    for d in (kept, work, artifacts):
        d.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, __file__, "--child", name, "--", *LIBFUZZER_OPTIONS,
           f"-max_total_time={seconds}", f"-artifact_prefix={artifacts}/{name}-",
           str(work), str(kept)]
    log = WORK / f"{name}.log"
    started = time.monotonic()
    cpu_before = os.times()
    with log.open("wb") as out:
        rc = subprocess.call(cmd, stdout=out, stderr=subprocess.STDOUT,
                             env={**sanitizer_env(name), "FUZZ_SEED_DIR": str(work)}, cwd=ROOT)
    cpu_after = os.times()
    text = log.read_text(errors="replace")
    stats = {k: int(v) for k, v in re.findall(r"stat::(\w+):\s+(\d+)", text)}
    last = re.findall(r"#\d+\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)", text)
    merged = merge(name, kept, work)
    result: dict[str, object] = {
        "harness": name,
        "exit_code": rc,
        "seconds": round(time.monotonic() - started),
        "cpu_seconds": round(cpu_after.children_user + cpu_after.children_system
                             - cpu_before.children_user - cpu_before.children_system),
        "executions": stats.get("number_of_executed_units", 0),
        "executions_per_second": stats.get("average_exec_per_sec", 0),
        "peak_rss_mb": stats.get("peak_rss_mb", 0),
        "coverage_edges": int(last[-1][0]) if last else 0,
        "features": int(last[-1][1]) if last else 0,
        "corpus_files": merged[0],
        "corpus_bytes": merged[1],
        "date": time.strftime("%Y-%m-%d"),
        "sanitizers": "address,undefined",
    }
    if rc != 0:
        result["failure"] = "\n".join(_failure_lines(text))
    return result


def merge(name: str, kept: Path, work: Path) -> tuple[int, int]:
    """Replace the kept corpus with the smallest set of its and the run's inputs that keeps
    their coverage."""
    fresh = WORK / "merged" / name
    shutil.rmtree(fresh, ignore_errors=True)
    fresh.mkdir(parents=True)
    subprocess.run([sys.executable, __file__, "--child", name, "--", "-set_cover_merge=1",
                    *LIBFUZZER_OPTIONS[:1], str(fresh), str(kept), str(work)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=sanitizer_env(name), cwd=ROOT, check=False)
    files = sorted(fresh.iterdir())
    if files:  # a failed merge leaves the kept corpus as it was
        shutil.rmtree(kept)
        shutil.copytree(fresh, kept)
    files = sorted(kept.iterdir())
    return len(files), sum(f.stat().st_size for f in files)


def record(name: str, result: dict[str, object]) -> None:
    """Append this run to the harness's record, with the totals over every run: a campaign
    may be several runs, each resuming from the corpus the last one kept."""
    path = RESULTS / f"{name}.json"
    runs = json.loads(path.read_text())["runs"] if path.exists() else []
    runs.append(result)
    totals = {
        "harness": name,
        "cpu_seconds": sum(int(r["cpu_seconds"]) for r in runs),  # type: ignore[call-overload]
        "executions": sum(int(r["executions"]) for r in runs),  # type: ignore[call-overload]
        "coverage_edges": result["coverage_edges"],
        "corpus_files": result["corpus_files"],
        "corpus_bytes": result["corpus_bytes"],
        "failed_runs": sum(1 for r in runs if r["exit_code"]),
        "runs": runs,
    }
    path.write_text(json.dumps(totals, indent=1) + "\n")


def table(names: tuple[str, ...]) -> str:
    """The figures of every harness's record: the campaign in total, and its last run."""
    rows = ["| Harness | CPU-minutes | Executions | Per second | Edges | Corpus (files, bytes) "
            "| Runs (failed) |", "|---|---|---|---|---|---|---|"]
    for name in names:
        path = RESULTS / f"{name}.json"
        if not path.exists():
            continue
        r = json.loads(path.read_text())
        per_s = r["executions"] / r["cpu_seconds"] if r["cpu_seconds"] else 0
        rows.append(f"| `{name}` | {r['cpu_seconds'] / 60:.0f} | {r['executions']:,} | "
                    f"{per_s:,.0f} | {r['coverage_edges']:,} | {r['corpus_files']}, "
                    f"{r['corpus_bytes']:,} | {len(r['runs'])} ({r['failed_runs']}) |")
    return "\n".join(rows)


def _failure_lines(text: str) -> list[str]:
    keep = [line for line in text.splitlines()
            if re.search(r"ERROR|AssertionError|runtime error|Traceback|SUMMARY|Test unit", line)]
    return keep[:20]


def main() -> int:
    from fuzz.harnesses import NAMES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=60, help="per harness (FUZZ_SECONDS)")
    parser.add_argument("--only", default="", help=f"comma-separated, of: {', '.join(NAMES)}")
    parser.add_argument("--table", action="store_true",
                        help="print the campaign's figures as docs/reliability.md's table")
    args = parser.parse_args()
    if args.table:
        print(table(NAMES))
        return 0
    names = [n for n in args.only.split(",") if n] or list(NAMES)
    unknown = sorted(set(names) - set(NAMES))
    if unknown:
        parser.error(f"--only: unknown harness {', '.join(unknown)}; one of {', '.join(NAMES)}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    failed = []
    for name in names:
        result = fuzz_one(name, args.seconds)
        record(name, result)
        print(f"{name}: {result['executions']} executions in {result['cpu_seconds']} CPU-s, "
              f"{result['coverage_edges']} edges, {result['corpus_files']} corpus files"
              + (f"; FAILED (build/fuzz/{name}.log)\n{result['failure']}"
                 if result["exit_code"] else ""), flush=True)
        if result["exit_code"]:
            failed.append(name)
    return 1 if failed else 0


if __name__ == "__main__":
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[4:])
    else:
        sys.exit(main())
