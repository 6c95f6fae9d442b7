"""Ours, ASGI: cymongoose.asgi.ASGIServer serving the raw ASGI hello of hello_apps.py (the
app uvicorn and granian ASGI serve), Mongoose polled by the uvloop loop on its own thread.

Also the entry point of cymongoose_fastapi.py (``--app fastapi_app``). With ``--workers N``
(N > 1, the runner's workers phase) it becomes ``python -m cymongoose --workers N``.
"""

import argparse
import logging
import os
import sys

import hello_apps

from cymongoose import TlsOpts
from cymongoose.asgi import serve

CONTENDER = {
    "name": "cymongoose-asgi",
    "label": "cymongoose ASGI",
    "kind": "hello",
    "env": "project",
    "packages": ["cymongoose", "cython", "uvloop"],
    "command": ["{python}", "{file}", "--port", "{port}", "--app", "asgi_hello",
                "--workers", "{workers}"],
    "quick": True,
    "app": {"interface": "asgi", "ref": "hello_apps:asgi_hello", "label": "raw ASGI hello"},
    "notes": "ASGIServer on uvloop, raw ASGI app, lifespan off (as uvicorn's)",
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--app", default="asgi_hello", help="an app of hello_apps.py")
    parser.add_argument("--lifespan", default="off", choices=["auto", "on", "off"])
    parser.add_argument("--workers", type=int, default=1,
                        help="worker processes; above 1 the cymongoose CLI serves the app "
                        "(its process model), as `cymongoose --workers N` would")
    parser.add_argument("--cert", help="PEM certificate: serve HTTPS (h2_bench.py --tls)")
    parser.add_argument("--key", help="its PEM key")
    args = parser.parse_args()
    if args.workers > 1:
        # exec: the same pid, so the runner's process-tree CPU sees every worker.
        os.execv(sys.executable, [
            sys.executable, "-m", "cymongoose", f"hello_apps:{args.app}", "--interface", "asgi",
            "--lifespan", args.lifespan, "--workers", str(args.workers), "--host",
            "127.0.0.1", "--port", str(args.port), "--log-level", "warning"])
    logging.basicConfig(level=logging.WARNING)
    tls = TlsOpts.from_files(cert=args.cert, key=args.key) if args.cert else None
    serve(getattr(hello_apps, args.app),
          f"{'https' if args.cert else 'http'}://127.0.0.1:{args.port}", lifespan=args.lifespan,
          tls=tls)


if __name__ == "__main__":
    main()
