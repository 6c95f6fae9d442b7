"""vendor/mongoose/build_fixes.py and its inventory: every fix is listed with tests that exist,
any Mongoose copy of the pinned version is patched, and a change that moves what cymongoose
relies on (an anchor, a c->data layout, a renamed or retyped static handler) stops the build
with one line naming the fix, instead of failing a request at run time."""

from __future__ import annotations

import ast
import importlib.util
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENDOR = ROOT / "vendor" / "mongoose"
SCRIPT = VENDOR / "build_fixes.py"

pytestmark = pytest.mark.no_asan


@cache
def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_fixes_under_test", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _source() -> str:
    return (VENDOR / "mongoose.c").read_text()


def _anchors() -> list[tuple[str, str, str]]:
    """(fix, hunk, anchor) for every anchor and every text a fix checks; an anchor several
    fixes share (where their definitions go, for one) is reported under the first of them."""
    found: dict[str, tuple[str, str, str]] = {}
    for fix in _load().FIXES:
        for text in fix.checks:
            found.setdefault(text, (fix.name, "check", text))
        for e in fix.edits:
            if e.where != "end":
                found.setdefault(e.anchor, (fix.name, e.hunk, e.anchor))
    return list(found.values())


def _compiles(tmp_path: Path, text: bytes) -> subprocess.CompletedProcess[str]:
    out = tmp_path / "mongoose.c"
    out.write_bytes(text)
    gcc = shutil.which("gcc") or shutil.which("cc")
    assert gcc is not None, "a C compiler is needed (the extension is built with one)"
    return subprocess.run([gcc, "-fsyntax-only", "-DMG_ENABLE_EPOLL=1", "-I", str(VENDOR),
                           str(out)], capture_output=True, text=True, timeout=120)


def _own_copy(tmp_path: Path, text: str) -> Path:
    """A user's own Mongoose directory (CYMONGOOSE_MONGOOSE_DIR) holding this mongoose.c."""
    own = tmp_path / "own"
    own.mkdir()
    (own / "mongoose.c").write_text(text)
    shutil.copy(VENDOR / "mongoose.h", own / "mongoose.h")
    return own


def _run(own: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), str(own / "mongoose.c"),
                           str(tmp_path / "patched.c")],
                          capture_output=True, text=True, timeout=120)


def test_pinned_source_is_patched_and_compiles(tmp_path: Path) -> None:
    fixed = _load().apply(_source().encode())
    assert b"cym_accept_burst" in fixed and b"CYM_HANDLER(http_cb)" in fixed
    assert b"mg_iobuf_resize(io, cym_recv_grow(c, io))" in fixed  # RECV_GROWTH
    assert b'#include "cym_fixes.h"' in fixed
    r = _compiles(tmp_path, fixed)
    assert r.returncode == 0, r.stderr[-2000:]


def test_the_compiler_names_the_fix_file_for_our_lines(tmp_path: Path) -> None:
    fixed = _load().apply(_source().encode())
    # ACCEPT4's replacement line, numbered as in fixes/accept4.c
    broken = fixed.replace(b"SOCK_NONBLOCK | SOCK_CLOEXEC);", b"SOCK_NONBLOCK | SOCK_CLOEXEC)")
    r = _compiles(tmp_path, broken)
    assert r.returncode != 0 and "fixes/accept4.c:" in r.stderr, r.stderr[-2000:]


def test_mongooses_own_line_numbers_are_kept(tmp_path: Path) -> None:
    # A Mongoose line after insertions: the compiler names the input mongoose.c and its line.
    source = _source()
    line = "static bool can_read(const struct mg_connection *c) {"
    number = source.splitlines().index(line) + 1
    fixed = _load().apply(source.encode())
    r = _compiles(tmp_path, fixed.replace(line.encode(), line.encode() + b" @"))
    assert r.returncode != 0 and f"mongoose.c:{number}:" in r.stderr, r.stderr[-2000:]


def test_moved_data_layout_stops_the_build() -> None:
    layout = "  uint64_t *expiration_time = (uint64_t *) c->data;\n"
    assert any(layout in fix.checks for fix in _load().FIXES)
    text = _source().replace(layout, "  uint64_t *expiration_time = (uint64_t *) "
                                     "(c->data + 8);\n")
    with pytest.raises(SystemExit, match="fix INTERNALS: the text it relies on .* found 0 times"):
        _load().apply(text.encode())


@pytest.mark.parametrize(("fix", "hunk", "anchor"), _anchors(),
                         ids=[f"{f}-{h}-{i}" for i, (f, h, _) in enumerate(_anchors())])
def test_a_copy_an_anchor_does_not_fit_is_refused_naming_fix_and_anchor(
        tmp_path: Path, fix: str, hunk: str, anchor: str) -> None:
    source = _source()
    assert source.count(anchor) == 1
    damaged = source.replace(anchor, anchor.replace("\n", " \n", 1))
    r = _run(_own_copy(tmp_path, damaged), tmp_path)
    assert r.returncode == 1 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"build_fixes.py: fix {fix}: ")
    assert f"'{hunk}'" in lines[0] and "found 0 times" in lines[0], lines[0]
    assert not (tmp_path / "patched.c").exists()


def test_a_users_matching_copy_is_patched(tmp_path: Path) -> None:
    # Not the pinned file byte for byte (a comment changed), the pinned MG_VERSION: patched.
    source = _source()
    assert "// All rights reserved\n" in source
    own = _own_copy(tmp_path, source.replace("// All rights reserved\n",
                                             "// All rights reserved (a local copy)\n", 1))
    r = _run(own, tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "patched.c").read_bytes() == _load().apply(
        (own / "mongoose.c").read_bytes(), own / "mongoose.c")
    assert b"cym_accept_burst" in (tmp_path / "patched.c").read_bytes()


def test_a_copy_of_another_version_is_refused(tmp_path: Path) -> None:
    own = _own_copy(tmp_path, _source())
    header = (own / "mongoose.h").read_text()
    version = _load().PIN["version"]
    (own / "mongoose.h").write_text(header.replace(f'"{version}"', '"6.0"', 1))
    r = _run(own, tmp_path)
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1
    assert "'6.0'" in r.stderr and version in r.stderr


def test_renamed_static_handler_fails_to_compile(tmp_path: Path) -> None:
    # A Mongoose release that renames sntp_cb (or changes its type) must not build.
    text = _source().replace("sntp_cb", "sntp_handler")
    r = _compiles(tmp_path, _load().apply(text.encode()))
    assert r.returncode != 0 and "sntp_cb" in r.stderr


def test_list_prints_every_fix_with_kind_upstream_status_and_tests() -> None:
    r = subprocess.run([sys.executable, str(SCRIPT), "--list"], capture_output=True, text=True,
                       timeout=60, check=True)
    inventory = _load()
    for fix in inventory.FIXES:
        row = next(line for line in r.stdout.splitlines() if line.startswith(fix.name + " "))
        assert fix.kind in row and fix.upstream in row and fix.tests[0] in row
        assert all(test in r.stdout for test in fix.tests)


def test_every_fix_is_described_and_its_kind_and_status_are_known() -> None:
    inventory = _load()
    names = [fix.name for fix in inventory.FIXES]
    assert len(names) == len(set(names))
    for fix in inventory.FIXES:
        assert fix.kind in inventory.KINDS and fix.upstream in inventory.UPSTREAM
        assert fix.why and fix.tests and fix.edits
        assert (VENDOR / fix.source).is_file()
        # kept as a single-commit patch for upstream, in `git format-patch` form
        assert bool(fix.patch) == (fix.upstream in ("patch-ready", "offered")), fix.name
        if fix.patch:
            assert (VENDOR / fix.patch).read_text().count("\nSubject: [PATCH] ") == 1
    assert sorted(p.name for p in (VENDOR / "fixes").glob("*.c")) == sorted(
        Path(fix.source).name for fix in inventory.FIXES)


def _test_names(path: Path) -> set[str]:
    """'name' and 'Class::name' of the test functions a file defines."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.update(f"{node.name}::{item.name}" for item in node.body
                         if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return names


def test_every_named_test_exists() -> None:
    for fix in _load().FIXES:
        for node_id in fix.tests:
            path, _, name = node_id.partition("::")
            assert (ROOT / path).is_file(), f"{fix.name}: no {path}"
            assert name.split("[")[0] in _test_names(ROOT / path), f"{fix.name}: no {node_id}"
