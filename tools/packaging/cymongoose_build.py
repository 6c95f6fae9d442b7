"""The build backend: scikit-build-core, with the sdist made whole first.

Mongoose's two files are never committed (vendor/mongoose/README.md), so a clean clone lacks
them; scikit-build-core's sdist hook only packs what is on disk, and would quietly produce an
sdist that cannot build offline. Our build_sdist fetches and verifies them first (the same
vendor/mongoose/fetch.py the Makefile and CMakeLists.txt run) and refuses to pack without them.
Every other hook is scikit-build-core's own.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from scikit_build_core.build import (
    build_editable,
    build_wheel,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)
from scikit_build_core.build import build_sdist as _scikit_build_sdist

__all__ = [
    "build_editable",
    "build_sdist",
    "build_wheel",
    "get_requires_for_build_editable",
    "get_requires_for_build_sdist",
    "get_requires_for_build_wheel",
    "prepare_metadata_for_build_editable",
    "prepare_metadata_for_build_wheel",
]

# Build frontends run the hooks from the project root.
MONGOOSE_DIR = Path("vendor") / "mongoose"
MONGOOSE_FILES = ("mongoose.c", "mongoose.h")


def build_sdist(sdist_directory: str, config_settings: dict[str, Any] | None = None) -> str:
    fetched = subprocess.run([sys.executable, str(MONGOOSE_DIR / "fetch.py")], check=False)
    missing = [name for name in MONGOOSE_FILES if not (MONGOOSE_DIR / name).is_file()]
    if fetched.returncode != 0 or missing:
        raise SystemExit(
            "cymongoose: the sdist must carry Mongoose's mongoose.c and mongoose.h, and they "
            "could not be fetched (see the message above); set CYMONGOOSE_MONGOOSE_DIR to a "
            "directory holding the pinned version, or fix network access to the package index."
        )
    return _scikit_build_sdist(sdist_directory, config_settings)
