"""What `make dist` produced: an sdist that is whole (Mongoose inside, built from a clean
clone), a wheel that ships what runs with its OpenSSL, libnghttp2, zlib and libzstd built in
and a manylinux tag, and a one-line answer for a user who builds the sdist without OpenSSL's
headers."""

from __future__ import annotations

import email
import re
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from support.source_version import source_version

SOURCE_VERSION = source_version()
# The libraries every manylinux system provides (PEP 600 leaves them to glibc).
SYSTEM_LIBRARIES = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2",
                    "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}
pytestmark = pytest.mark.no_asan


def test_sdist_is_whole(sdist: Path) -> None:
    assert sdist.name == f"cymongoose-{SOURCE_VERSION}.tar.gz"
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
        info = email.message_from_bytes(tar.extractfile(f"{sdist.name[:-7]}/PKG-INFO").read())
    for needed in ("vendor/mongoose/mongoose.c", "vendor/mongoose/mongoose.h",
                   "vendor/mongoose/pin.json", "tools/packaging/cymongoose_build.py",
                   "CMakeLists.txt", "src/cymongoose/_mongoose.pyx", "LICENSE"):
        assert needed in names, needed
    # Built from a clean clone: nothing of a working tree's build products.
    assert not [n for n in names if n.startswith(("build/", ".venv", "dist/", "site/"))
                or n.endswith((".so", ".pyc"))]
    # Nor the data only the long runs use ([tool.scikit-build] sdist.exclude).
    assert not [n for n in names if n.startswith(("tests/fuzz/corpus/", "tests/fuzz/results/",
                                                  "tests/reliability/results/"))
                or (n.startswith("tests/benchmarks/results/") and n.endswith(".png"))]
    assert info["Version"] == SOURCE_VERSION


def test_wheel_ships_what_runs(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as whl:
        names = whl.namelist()
        metadata = email.message_from_bytes(
            whl.read(f"cymongoose-{SOURCE_VERSION}.dist-info/METADATA"))
        tags = email.message_from_bytes(
            whl.read(f"cymongoose-{SOURCE_VERSION}.dist-info/WHEEL")).get_all("Tag")
    assert not [n for n in names if n.endswith((".pyx", ".pxi", ".pxd", ".h", ".c"))]
    for needed in ("cymongoose/_mongoose.pyi", "cymongoose/py.typed", "cymongoose/cli.py",
                   f"cymongoose-{SOURCE_VERSION}.dist-info/licenses/LICENSE",
                   # OpenSSL is linked in, so its licence travels with it.
                   f"cymongoose-{SOURCE_VERSION}.dist-info/licenses/OpenSSL-LICENSE.txt",
                  # So is libnghttp2 (HTTP/2), with its MIT licence,
                  f"cymongoose-{SOURCE_VERSION}.dist-info/licenses/nghttp2-LICENSE.txt",
                  # and zlib and libzstd (compression), with theirs (zlib's, BSD).
                  f"cymongoose-{SOURCE_VERSION}.dist-info/licenses/zlib-LICENSE.txt",
                  f"cymongoose-{SOURCE_VERSION}.dist-info/licenses/zstd-LICENSE.txt"):
        assert needed in names, needed
    assert [n for n in names if re.fullmatch(r"cymongoose/_mongoose\..*\.so", n)]
    assert metadata["License-Expression"] == "GPL-2.0-only"
    assert metadata["Version"] == SOURCE_VERSION
    assert "pip install 'cymongoose>=0.3'" in metadata.get_payload()  # the README as the page
    tag = "cp{}{}".format(*sys.version_info[:2])
    assert tags and all(re.fullmatch(rf"{tag}-{tag}-manylinux_2_\d+_\w+", t) for t in tags), tags


def test_wheel_carries_its_openssl(wheel: Path, tmp_path: Path) -> None:
    """The module needs only what every Linux has: OpenSSL, libnghttp2, zlib and libzstd are
    linked in, not looked up, and none of their symbols are exported to clash with another
    module's libssl, libz (Python's zlib module) or libzstd (the zstandard package)."""
    with zipfile.ZipFile(wheel) as whl:
        (module,) = [n for n in whl.namelist() if n.endswith(".so")]
        whl.extract(module, tmp_path)
    with (tmp_path / module).open("rb") as raw:
        elf = ELFFile(raw)
        needed = {tag.needed for section in elf.iter_sections()
                  if isinstance(section, DynamicSection)
                  for tag in section.iter_tags() if tag.entry.d_tag == "DT_NEEDED"}
        symbols = list(elf.get_section_by_name(".dynsym").iter_symbols())
    exported = {sym.name for sym in symbols if sym["st_shndx"] != "SHN_UNDEF" and sym.name}
    # What the module asks of the process: libc's and Python's, nothing another library
    # (zstd's weak tracing hooks, say) could answer in the static libraries' place.
    asked = {sym.name for sym in symbols if sym["st_shndx"] == "SHN_UNDEF" and sym.name}
    assert needed <= SYSTEM_LIBRARIES, needed
    assert exported == {"PyInit__mongoose"}, sorted(exported)[:20]
    assert not [s for s in asked if s.startswith(("ZSTD_", "deflate", "inflate", "nghttp2_",
                                                  "SSL_", "EVP_"))]


def _install_without(hidden: str, sdist: Path, tmp_path: Path,
                     seal: Callable[..., list[str] | None]) -> str:
    """pip installing the sdist as a user runs it, offline, with the directory `hidden`
    hidden: it must stop at CMake's configure step, before anything is compiled. Its
    output."""
    sealed = seal(hidden)
    if sealed is None:
        pytest.skip(f"needs unshare --mount (root) to hide {hidden}")
    install = subprocess.run(
        [*sealed, sys.executable, "-m", "pip", "install", "--no-index", "--no-build-isolation",
         "--no-deps", "--disable-pip-version-check", "--target", str(tmp_path / "site"),
         str(sdist)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert install.returncode != 0
    return install.stdout + install.stderr


def test_sdist_without_openssl_headers_says_so_in_one_line(
        sdist: Path, tmp_path: Path, seal: Callable[..., list[str] | None]) -> None:
    output = _install_without("/usr/include/openssl", sdist, tmp_path, seal)
    (line,) = [ln for ln in output.splitlines() if "OpenSSL 1.1.1+ development files" in ln]
    assert "libssl-dev" in line and "CYMONGOOSE_TLS=builtin pip install cymongoose" in line
    assert "Could NOT find OpenSSL" not in output  # CMake's own hint is kept quiet


def test_sdist_without_nghttp2_headers_says_so_in_one_line(
        sdist: Path, tmp_path: Path, seal: Callable[..., list[str] | None]) -> None:
    output = _install_without("/usr/include/nghttp2", sdist, tmp_path, seal)
    (line,) = [ln for ln in output.splitlines() if "libnghttp2 1.52+ development files" in ln]
    assert "libnghttp2-dev" in line and "CYMONGOOSE_HTTP2=OFF pip install cymongoose" in line
