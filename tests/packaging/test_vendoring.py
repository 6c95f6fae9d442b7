"""The Mongoose pin: verified fetch, clear refusals, and an sdist that needs no network."""

from __future__ import annotations

import importlib.util
import io
import json
import shutil
import subprocess
import tarfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENDOR = ROOT / "vendor" / "mongoose"

pytestmark = pytest.mark.no_asan


def _load_fetch(tmp_path: Path) -> ModuleType:
    """A private copy of fetch.py working in tmp_path, so tests never touch the real files."""
    shutil.copy(VENDOR / "fetch.py", tmp_path / "fetch.py")
    shutil.copy(VENDOR / "pin.json", tmp_path / "pin.json")
    spec = importlib.util.spec_from_file_location("fetch_under_test", tmp_path / "fetch.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sources_are_ignored_and_untracked() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    assert not [f for f in tracked.stdout.split() if f.endswith(("mongoose.c", "mongoose.h"))]
    pin = json.loads((VENDOR / "pin.json").read_text())
    for name, digest in pin["sha256"].items():
        import hashlib
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == digest


def test_tampered_archive_is_refused(tmp_path: Path) -> None:
    fetch = _load_fetch(tmp_path)
    archive = tmp_path / "fake-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name in ("mongoose.c", "mongoose.h"):
            data = b"/* not the pinned file */"
            info = tarfile.TarInfo(f"fake-1.0/{fetch.PIN['member_prefix']}{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(fetch.FetchError, match="expected"):
        fetch.extract_pinned(archive)
    assert not (tmp_path / "mongoose.c").exists()


def test_user_copy_must_have_the_pinned_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    fetch = _load_fetch(tmp_path)
    own = tmp_path / "own"
    own.mkdir()
    (own / "mongoose.c").write_text("/* c */")
    (own / "mongoose.h").write_text('#define MG_VERSION "6.0"\n')
    monkeypatch.setenv(fetch.ENV_DIR, str(own))
    assert fetch.main() == 1
    assert "6.0" in capsys.readouterr().err
    (own / "mongoose.h").write_text(f'#define MG_VERSION "{fetch.PIN["version"]}"\n')
    assert fetch.main() == 0
    assert (tmp_path / "mongoose.h").read_text().startswith("#define MG_VERSION")


def test_sdist_refuses_to_pack_without_mongoose(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The build backend fetches Mongoose before packing the sdist, and stops with our message
    when it cannot, instead of packing an sdist that cannot build offline. (The sdist built
    from a clean clone, and the wheel built from it offline, are make test-installed's.)"""
    (tmp_path / "vendor" / "mongoose").mkdir(parents=True)
    for name in ("fetch.py", "pin.json"):
        shutil.copy(VENDOR / name, tmp_path / "vendor" / "mongoose" / name)
    spec = importlib.util.spec_from_file_location(
        "backend_under_test", ROOT / "tools" / "packaging" / "cymongoose_build.py")
    assert spec and spec.loader
    backend = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(backend)
    empty = tmp_path / "no-mongoose-here"
    empty.mkdir()
    monkeypatch.setenv("CYMONGOOSE_MONGOOSE_DIR", str(empty))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit, match="must carry Mongoose's mongoose.c and mongoose.h"):
        backend.build_sdist(str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()
