"""The release pipeline's configuration: the wheels cibuildwheel would build from the
committed [tool.cibuildwheel] tables, a workflow that publishes on version tags only, and an
OpenSSL build script that pins what it downloads. Nothing here builds a wheel (the hosted CI
does, .github/workflows/wheels.yml): these are offline checks of what it is told to do."""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "wheels.yml"
OPENSSL_SCRIPT = ROOT / "tools" / "packaging" / "build-openssl.sh"

pytestmark = pytest.mark.no_asan

PYTHONS = ("cp310", "cp311", "cp312", "cp313", "cp314", "cp314t")


def _cibuildwheel() -> Path:
    # The dev group's cibuildwheel, beside this interpreter (it needs Python 3.11 or later).
    exe = Path(sys.executable).parent / "cibuildwheel"
    if not exe.exists():
        pytest.skip("cibuildwheel is not installed here (the dev group has it on Python 3.11+)")
    return exe


def _identifiers(platform: str, archs: str) -> list[str]:
    # The committed configuration only: no CIBW_* override from the caller's environment,
    # and CI unset (cibuildwheel reads it; it changes nothing for this listing, but the
    # listing must not depend on where it runs).
    env = {k: v for k, v in os.environ.items() if not k.startswith("CIBW_") and k != "CI"}
    r = subprocess.run(
        [str(_cibuildwheel()), "--print-build-identifiers", "--platform", platform,
         "--archs", archs, str(ROOT)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.split()


def test_linux_wheels_are_cpython_310_to_314_and_314t_manylinux_and_musllinux() -> None:
    got = _identifiers("linux", "x86_64,aarch64")
    expected = {f"{py}-{libc}_{arch}" for py in PYTHONS
                for libc in ("manylinux", "musllinux") for arch in ("x86_64", "aarch64")}
    assert len(got) == len(set(got))
    assert set(got) == expected


def test_macos_wheels_are_cpython_310_to_314_and_314t_x86_64_and_arm64() -> None:
    got = _identifiers("macos", "x86_64,arm64")
    expected = {f"{py}-macosx_{arch}" for py in PYTHONS for arch in ("x86_64", "arm64")}
    assert len(got) == len(set(got))
    assert set(got) == expected


def _workflow() -> dict[Any, Any]:
    doc = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(doc, dict)
    return doc


def _triggers(doc: dict[Any, Any]) -> dict[str, Any]:
    # YAML 1.1 reads the key `on` as the boolean True.
    on = doc.get("on", doc.get(True))
    assert isinstance(on, dict), on
    return on


def test_workflow_builds_on_tags_and_by_hand_and_publishes_on_tags_only() -> None:
    doc = _workflow()
    on = _triggers(doc)
    assert on["push"] == {"tags": ["v*"]}, "only version tags push a release"
    assert "workflow_dispatch" in on
    jobs = doc["jobs"]
    publish = jobs["publish"]
    condition = publish["if"].replace(" ", "")
    assert "github.event_name=='push'" in condition
    assert "startsWith(github.ref,'refs/tags/v')" in condition
    assert set(publish["needs"]) == set(jobs) - {"publish"}, "publish waits for every build"
    assert publish["environment"]["name"] == "release"
    assert publish["permissions"] == {"id-token": "write"}
    uses = [step.get("uses", "") for step in publish["steps"]]
    assert any(u.startswith("pypa/gh-action-pypi-publish@") for u in uses)
    assert "id-token" not in doc.get("permissions", {}), "only the publish job gets a token"


def test_workflow_builds_wheels_for_each_architecture_and_the_sdist() -> None:
    jobs = _workflow()["jobs"]
    runners = {entry["os"] for entry in jobs["wheels"]["strategy"]["matrix"]["include"]}
    assert runners == {"ubuntu-24.04", "ubuntu-24.04-arm", "macos-15-intel", "macos-14"}
    wheel_steps = [step.get("uses", "") for step in jobs["wheels"]["steps"]]
    assert any(u.startswith("pypa/cibuildwheel@") for u in wheel_steps)
    sdist_runs = "\n".join(step.get("run", "") for step in jobs["sdist"]["steps"])
    assert "vendor/mongoose/fetch.py" in sdist_runs and "--sdist" in sdist_runs
    assert "PIP_NO_INDEX=1" in sdist_runs, "the sdist is installed with the index out of reach"
    # The wheels are built from pyproject.toml's [tool.cibuildwheel], whose before-all runs
    # the OpenSSL script; the workflow rebuilds when either changes.
    paths = _triggers(_workflow())["pull_request"]["paths"]
    assert "pyproject.toml" in paths and "tools/packaging/**" in paths
    assert "tools/packaging/build-openssl.sh" in (ROOT / "pyproject.toml").read_text()


def test_every_wheel_and_the_sdist_are_published() -> None:
    """Linux and macOS wheels (macOS drives the asyncio loop without epoll, make test-poll)
    are collected by the publish job, and no build job may fail without failing the run."""
    jobs = _workflow()["jobs"]
    (download,) = [step for step in jobs["publish"]["steps"]
                   if step.get("uses", "").startswith("actions/download-artifact@")]
    pattern = download["with"]["pattern"]
    (upload,) = [step for step in jobs["wheels"]["steps"]
                 if step.get("uses", "").startswith("actions/upload-artifact@")]
    sdist_name = [step["with"]["name"] for step in jobs["sdist"]["steps"]
                  if step.get("uses", "").startswith("actions/upload-artifact@")]
    assert fnmatch.fnmatch(sdist_name[0], pattern)
    for entry in jobs["wheels"]["strategy"]["matrix"]["include"]:
        name = upload["with"]["name"].replace("${{ matrix.artifact }}", entry["artifact"])
        name = name.replace("${{ matrix.os }}", entry["os"])
        assert fnmatch.fnmatch(name, pattern), (entry, name, pattern)
        assert not entry.get("experimental", False)
    assert "continue-on-error" not in jobs["wheels"]


def test_workflow_actions_are_pinned_to_a_version() -> None:
    for job in _workflow()["jobs"].values():
        for step in job["steps"]:
            if "uses" in step:
                assert re.fullmatch(r"[\w.-]+/[\w.-]+@(v\d+(\.\d+)*|release/v\d+)",
                                    step["uses"]), step["uses"]


def test_openssl_script_pins_a_version_and_its_sha256() -> None:
    text = OPENSSL_SCRIPT.read_text()
    version = re.search(r"^OPENSSL_VERSION=(3\.\d+\.\d+)$", text, re.M)
    digest = re.search(r"^OPENSSL_SHA256=([0-9a-f]{64})$", text, re.M)
    assert version and digest
    assert "set -eu" in text
    # The digest is checked before the tarball is unpacked.
    assert text.index('"$OPENSSL_SHA256"') < text.index("tar -xzf")
    assert "no-shared" in text and "-fPIC" in text


def test_openssl_script_is_valid_shell() -> None:
    bash = shutil.which("bash")
    assert bash is not None
    r = subprocess.run([bash, "-n", str(OPENSSL_SCRIPT)], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr


COMPRESSION_SCRIPT = ROOT / "tools" / "packaging" / "build-compression.sh"


def test_compression_script_pins_versions_and_sha256s() -> None:
    text = COMPRESSION_SCRIPT.read_text()
    for name in ("ZLIB", "ZSTD"):
        assert re.search(rf"^{name}_VERSION=1\.\d+\.\d+$", text, re.M), name
        assert re.search(rf"^{name}_SHA256=[0-9a-f]{{64}}$", text, re.M), name
        # Debian's orig tarballs, as build-nghttp2.sh fetches nghttp2's.
        url = re.search(rf'^{name}_URL="(\S+)"$', text, re.M)
        assert url and url.group(1).startswith("http://deb.debian.org/debian/pool/main/")
    assert "set -eu" in text
    # Each digest is checked (fetch() compares it) before the tarball is unpacked.
    fetch_body = text[text.index("fetch() {"):text.index("\n}\n", text.index("fetch() {"))]
    assert '"$actual" != "$2"' in fetch_body
    for sha, unpack in (('"$ZLIB_SHA256"', "gzip -dc"), ('"$ZSTD_SHA256"', "xz -dc")):
        assert text.index(sha) < text.index(unpack)
    assert "--static" in text and text.count("-fPIC") >= 2
    assert "flock" in text


@pytest.mark.parametrize("shell", ["dash", "bash"])
def test_compression_script_is_valid_posix_shell(shell: str) -> None:
    # dash is Debian's /bin/sh and knows no bashisms: the script must run under any sh
    # (busybox on Alpine, macOS's).
    exe = shutil.which(shell)
    if exe is None:
        pytest.skip(f"{shell} is not installed")
    r = subprocess.run([exe, "-n", str(COMPRESSION_SCRIPT)], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr


def _cibuildwheel_config() -> dict[str, Any]:
    import tomllib  # Python 3.11+; cibuildwheel's own floor (see _cibuildwheel)

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["cibuildwheel"]
    assert isinstance(config, dict)
    return config


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib is Python 3.11+")
@pytest.mark.parametrize("platform", ["linux", "macos"])
def test_every_wheel_builds_and_links_the_static_libraries(platform: str) -> None:
    """before-all fills each prefix that CMAKE_ARGS points the build at."""
    table = _cibuildwheel_config()[platform]
    before_all = table["before-all"]
    cmake_args = table["environment"]["CMAKE_ARGS"]
    for script, define in (("build-openssl.sh", "OPENSSL_ROOT_DIR"),
                           ("build-nghttp2.sh", "NGHTTP2_ROOT"),
                           ("build-compression.sh", "COMPRESSION_ROOT")):
        built = re.search(rf"tools/packaging/{re.escape(script)} (\S+)", before_all)
        linked = re.search(rf"-D{define}=(\S+)", cmake_args)
        assert built and linked and built.group(1) == linked.group(1), (script, define)
    assert "-DOPENSSL_USE_STATIC_LIBS=TRUE" in cmake_args


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib is Python 3.11+")
@pytest.mark.parametrize("platform", ["linux", "macos"])
def test_wheel_tests_have_what_they_import(platform: str) -> None:
    """Every third-party module the test-command's files (and tests/conftest.py) import at
    the top is in test-requires: a missing one fails the hosted run at collection."""
    import ast

    config = _cibuildwheel_config()
    table = config[platform]
    command = table.get("test-command", config["test-command"])
    requires = {re.split(r"[<>=!~; \[]", r, maxsplit=1)[0].lower().replace("-", "_")
                for r in table.get("test-requires", config["test-requires"])}
    files = [ROOT / "tests" / "conftest.py"]
    for word in command.split():
        if word.startswith("{project}/"):
            path = ROOT / word.removeprefix("{project}/")
            files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    local = {p.stem for p in (ROOT / "tests").rglob("*.py")} | {"support", "cymongoose"}
    imported: dict[str, str] = {}
    for file in files:
        for node in ast.parse(file.read_text()).body:
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in local:
                    imported.setdefault(top, str(file.relative_to(ROOT)))
    missing = {m: f for m, f in imported.items() if m.lower() not in requires}
    assert not missing, f"not in [tool.cibuildwheel{'.macos' * (platform == 'macos')}] " \
        f"test-requires: {missing}"


def test_install_doc_names_the_compression_versions_the_wheels_carry() -> None:
    text = COMPRESSION_SCRIPT.read_text()
    doc = (ROOT / "docs" / "install.md").read_text()
    for library, name in (("zlib", "ZLIB"), ("libzstd", "ZSTD")):
        version = re.search(rf"^{name}_VERSION=(\S+)$", text, re.M)
        assert version and f"{library} {version.group(1)}" in doc, library
