"""What each coding costs on the compression phase's two bodies, in-process: brotli at
quality 1-4 against zlib (gzip) at level 3 and zstd at level 3, the levels ours uses on the
fly. Per codec and body: compression speed in MB/s of input (the best of several timed
batches, one CPU), the compressed size and the ratio. It is why ours offers no br on the fly
(docs/performance.md, "Response compression"); the compression phase (benchkit/
compressphase.py) runs it and stores the table in results/compression.json.

    python tests/benchmarks/codec_costs.py [--seconds 0.3] [--json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import compressbodies  # noqa: E402


def codecs() -> list[tuple[str, str, Callable[[bytes], bytes]]]:
    """(id, library and version, compress) for each codec this interpreter has."""
    out: list[tuple[str, str, Callable[[bytes], bytes]]] = []
    import zlib

    def gzip3(data: bytes) -> bytes:
        return gzip.compress(data, compresslevel=3, mtime=0)

    out.append(("gzip-3", f"zlib {zlib.ZLIB_RUNTIME_VERSION}", gzip3))
    try:
        import zstandard
    except ImportError:
        pass
    else:
        zstd3 = zstandard.ZstdCompressor(level=3)
        out.append(("zstd-3", f"zstandard {zstandard.__version__} (libzstd "
                    f"{'.'.join(map(str, zstandard.ZSTD_VERSION))})", zstd3.compress))
    try:
        import brotli
    except ImportError:
        pass
    else:
        for q in (1, 2, 3, 4):
            def br(data: bytes, q: int = q) -> bytes:
                return bytes(brotli.compress(data, quality=q, lgwin=22))

            out.append((f"br-{q}", f"brotli {getattr(brotli, '__version__', '?')}", br))
    return out


def measure(seconds: float = 0.3, repeats: int = 5) -> dict[str, Any]:
    bodies = {"json": compressbodies.json_body(), "html": compressbodies.html_body()}
    rows = []
    for codec, library, fn in codecs():
        for body_id, body in bodies.items():
            size = len(fn(body))
            # Calls per batch so that one batch takes about `seconds`.
            t0 = time.perf_counter()
            fn(body)
            once = max(time.perf_counter() - t0, 1e-6)
            n = max(1, int(seconds / once))
            best = float("inf")
            for _ in range(repeats):
                t0 = time.perf_counter()
                for _ in range(n):
                    fn(body)
                best = min(best, (time.perf_counter() - t0) / n)
            rows.append({"codec": codec, "library": library, "body": body_id,
                         "input_bytes": len(body), "output_bytes": size,
                         "ratio": round(len(body) / size, 3),
                         "mb_per_s": round(len(body) / best / 1e6, 1),
                         "us_per_body": round(best * 1e6, 1)})
    return {"seconds_per_batch": seconds, "repeats": repeats, "rows": rows}


def table(data: dict[str, Any]) -> list[str]:
    rows = data["rows"]
    base = {r["body"]: r for r in rows if r["codec"] == "gzip-3"}
    lines = ["| Codec | Body | MB/s | µs per body | Bytes | Ratio | Size ÷ gzip 3 "
             "| Time ÷ gzip 3 |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        g = base.get(r["body"])
        lines.append(f"| {r['codec']} | {r['body']} ({r['input_bytes']:,} B) | "
                     f"{r['mb_per_s']:.0f} | {r['us_per_body']:.0f} | {r['output_bytes']:,} | "
                     f"{r['ratio']:.2f} | "
                     f"{r['output_bytes'] / g['output_bytes']:.3f} | "
                     f"{r['us_per_body'] / g['us_per_body']:.2f}× |" if g else "")
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=0.3, help="seconds per timed batch")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = p.parse_args()
    data = measure(args.seconds)
    print(json.dumps(data, indent=1) if args.json else "\n".join(table(data)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
