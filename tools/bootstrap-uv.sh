#!/usr/bin/env bash
# Print a command that runs uv, installing uv with pip (user site) when it is not there.
set -euo pipefail
if command -v uv >/dev/null 2>&1; then echo uv; exit 0; fi
if python3 -m uv --version >/dev/null 2>&1; then echo "python3 -m uv"; exit 0; fi
python3 -m pip install --quiet --user uv >&2 2>/dev/null \
  || python3 -m pip install --quiet --user --break-system-packages uv >&2 \
  || python3 -m pip install --quiet uv >&2
echo "python3 -m uv"
