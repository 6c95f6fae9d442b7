#!/usr/bin/env python3
"""Write the copy of mongoose.c that cymongoose compiles: the pinned version plus our fixes.

The fetched mongoose.c stays untouched beside this script (and in our sdist); the build
(CMakeLists.txt) compiles the output of this script instead. The fixes are listed in
inventory.py, their C is in fixes/*.c and their interface in cym_fixes.h. Any copy whose
mongoose.h declares the pinned MG_VERSION is patched, the fetched one or a user's own
(CYMONGOOSE_MONGOOSE_DIR); each anchor must occur exactly once in it, or the build stops
with one line naming the fix and the anchor, so a Mongoose update is never half-fixed.
`#line` directives make the compiler name fixes/<name>.c for our lines and the input
mongoose.c, with its own line numbers, for Mongoose's.

    python3 build_fixes.py <mongoose.c> <output mongoose.c>
    python3 build_fixes.py --list     (the inventory: name, kind, upstream status, tests)
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # loaded by path (the tests) rather than run as a script
    sys.path.insert(0, str(HERE))

from inventory import FIXES, KINDS, TOP, UPSTREAM, Edit, Fix  # noqa: E402  (HERE first)

PIN = json.loads((HERE / "pin.json").read_text())
INTERFACE = '#include "cym_fixes.h"  /* cymongoose build fixes: vendor/mongoose/inventory.py */\n'
HUNK = re.compile(r"^// @hunk (\w+)\s*$")


def _refuse(message: str) -> SystemExit:
    return SystemExit(f"build_fixes.py: {message}")


def hunks(fix: Fix) -> dict[str, tuple[int, str]]:
    """The sections of the fix's C file: label -> (line number of its first line, text)."""
    found: dict[str, tuple[int, str]] = {}
    label, first = "", 0
    lines: list[str] = []
    source = HERE / fix.source
    for number, line in enumerate(source.read_text().splitlines(keepends=True), 1):
        match = HUNK.match(line)
        if match:
            if label:
                found[label] = (first, "".join(lines).rstrip("\n") + "\n")
            label, first, lines = match.group(1), number + 1, []
        elif label:
            lines.append(line)
    if label:
        found[label] = (first, "".join(lines).rstrip("\n") + "\n")
    wanted = {edit.hunk for edit in fix.edits}
    if set(found) != wanted:
        raise _refuse(f"fix {fix.name}: {fix.source} has sections {sorted(found)}, "
                      f"inventory.py names {sorted(wanted)}")
    return found


@dataclass
class _Site:
    """One anchor's place in mongoose.c and what goes before, instead of and after it."""

    start: int
    end: int
    before: list[tuple[Fix, Edit]]
    replace: tuple[Fix, Edit] | None
    after: list[tuple[Fix, Edit]]


def _locate(text: str, fix: Fix, edit: Edit, what: str) -> tuple[int, int]:
    if edit.where == "end":
        return len(text), len(text)
    count = text.count(edit.anchor)
    if count != 1:
        first = edit.anchor.strip().splitlines()[0]
        raise _refuse(f"fix {fix.name}: {what} {edit.hunk!r} ({first!r}) found {count} times "
                      f"in mongoose.c, expected once: see vendor/mongoose/README.md, "
                      f"Updating Mongoose")
    start = text.index(edit.anchor)
    if start > 0 and text[start - 1] != "\n":
        raise _refuse(f"fix {fix.name}: anchor {edit.hunk!r} does not start a line")
    return start, start + len(edit.anchor)


def _sites(text: str) -> list[_Site]:
    sites: dict[tuple[int, int], _Site] = {}
    for fix in FIXES:
        if fix.kind not in KINDS or fix.upstream not in UPSTREAM:
            raise _refuse(f"fix {fix.name}: kind {fix.kind!r} or upstream {fix.upstream!r} "
                          "is not one inventory.py knows")
        for check in fix.checks:
            _locate(text, fix, Edit("check", "after", check), "the text it relies on")
        for edit in fix.edits:
            span = _locate(text, fix, edit, "anchor")
            site = sites.setdefault(span, _Site(span[0], span[1], [], None, []))
            if edit.where == "replace":
                if site.replace is not None:
                    raise _refuse(f"fix {fix.name}: anchor {edit.hunk!r} is replaced by "
                                  f"{site.replace[0].name} too")
                site.replace = (fix, edit)
            elif edit.where == "before":
                site.before.append((fix, edit))
            else:
                site.after.append((fix, edit))
    ordered = sorted(sites.values(), key=lambda s: (s.start, s.end))
    for one, two in zip(ordered, ordered[1:], strict=False):
        if two.start < one.end:
            raise _refuse("two fixes' anchors overlap at mongoose.c line "
                          f"{text.count(chr(10), 0, two.start) + 1}")
    return ordered


def _c_string(path: Path) -> str:
    return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'


def apply(source: bytes, origin: Path = HERE / "mongoose.c") -> bytes:
    """The patched mongoose.c; SystemExit (one line) when an anchor does not fit."""
    text = source.decode("utf-8")
    sections = {fix.name: hunks(fix) for fix in FIXES}
    origin_name = _c_string(origin.resolve())
    out: list[str] = []
    cursor, resync = 0, False

    def ours(fix: Fix, edit: Edit) -> None:
        nonlocal resync
        first, body = sections[fix.name][edit.hunk]
        out.append(f"#line {first} {_c_string(HERE / fix.source)}\n{body}")
        resync = True

    def theirs(upto: int) -> None:
        # Mongoose's text from cursor to upto, numbered as in the input file. (The
        # amalgamation's own `#line 1 "src/x.c"` lines are inactive unless MG_ENABLE_LINES
        # is defined; where it is, each takes over again at the next one.)
        nonlocal cursor, resync
        if resync and cursor < upto:
            out.append(f"#line {text.count(chr(10), 0, cursor) + 1} {origin_name}\n")
            resync = False
        out.append(text[cursor:upto])
        cursor = upto

    top = text.find(TOP)
    for site in _sites(text):
        theirs(site.start)
        for fix, edit in site.before:
            ours(fix, edit)
        if site.replace is not None:
            ours(*site.replace)
            cursor = site.end
        else:
            theirs(site.end)
        if site.start == top:
            out.append(INTERFACE)
            resync = True
        for fix, edit in site.after:
            ours(fix, edit)
    theirs(len(text))
    return "".join(out).encode("utf-8")


def declared_version(header: Path) -> str | None:
    match = re.search(rb'#define\s+MG_VERSION\s+"([^"]+)"', header.read_bytes())
    return match.group(1).decode() if match else None


def inventory_table() -> str:
    rows = [f"{'FIX':<18} {'KIND':<12} {'UPSTREAM':<16} TESTS"]
    for fix in FIXES:
        for i, test in enumerate(fix.tests):
            head = f"{fix.name:<18} {fix.kind:<12} {fix.upstream:<16}" if i == 0 else " " * 48
            rows.append(f"{head} {test}")
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    if argv[1:] == ["--list"]:
        print(inventory_table())
        return 0
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    origin = Path(argv[1])
    header = origin.with_name("mongoose.h")
    version = declared_version(header) if header.is_file() else None
    try:
        if version != PIN["version"]:
            raise _refuse(f"{header} declares Mongoose {version!r}; the fixes are for "
                          f"{PIN['version']!r} (pin.json)")
        patched = apply(origin.read_bytes(), origin)
    except SystemExit as refused:
        print(refused, file=sys.stderr)
        return 1
    out = Path(argv[2])
    if not out.exists() or out.read_bytes() != patched:
        out.write_bytes(patched)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
