"""vendor/mongoose/build_fixes.py: a Mongoose change that moves what cymongoose relies on
stops the build (a missing anchor, a moved c->data layout, a renamed or retyped static
handler), instead of failing a request at run time."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENDOR = ROOT / "vendor" / "mongoose"

pytestmark = pytest.mark.no_asan


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_fixes_under_test",
                                                  VENDOR / "build_fixes.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _source() -> str:
    return (VENDOR / "mongoose.c").read_text()


def _compiles(tmp_path: Path, text: bytes) -> subprocess.CompletedProcess[str]:
    out = tmp_path / "mongoose.c"
    out.write_bytes(text)
    gcc = shutil.which("gcc") or shutil.which("cc")
    assert gcc is not None, "a C compiler is needed (the extension is built with one)"
    return subprocess.run([gcc, "-fsyntax-only", "-DMG_ENABLE_EPOLL=1", "-I", str(VENDOR),
                           str(out)], capture_output=True, text=True, timeout=120)


def test_pinned_source_is_patched_and_compiles(tmp_path: Path) -> None:
    fixed = _load().apply(_source().encode())
    assert b"cym_accept_burst" in fixed and b"CYM_HANDLER(http_cb)" in fixed
    assert b"mg_iobuf_resize(io, cym_recv_grow(c, io))" in fixed  # RECV_GROWTH
    r = _compiles(tmp_path, fixed)
    assert r.returncode == 0, r.stderr[-2000:]


def test_moved_data_layout_stops_the_build() -> None:
    bf = _load()
    text = _source().replace(bf.LAYOUTS[1], "  uint64_t *expiration_time = (uint64_t *) "
                                            "(c->data + 8);\n")
    with pytest.raises(SystemExit, match="c->data layout changed"):
        bf.apply(text.encode())


def test_missing_anchor_stops_the_build() -> None:
    bf = _load()
    anchor = bf.REPLACEMENTS[0][0]
    with pytest.raises(SystemExit, match="not found exactly once"):
        bf.apply(_source().replace(anchor, anchor.replace("\n", " \n", 1)).encode())


def test_renamed_static_handler_fails_to_compile(tmp_path: Path) -> None:
    # A Mongoose release that renames sntp_cb (or changes its type) must not build.
    text = _source().replace("sntp_cb", "sntp_handler")
    r = _compiles(tmp_path, _load().apply(text.encode()))
    assert r.returncode != 0 and "sntp_cb" in r.stderr
