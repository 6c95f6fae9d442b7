"""`cymongoose APP` and `python -m cymongoose APP`: serve a WSGI app from the command line.

A first, single-process version: one WSGIServer on one address with a pool of app threads.
Workers, ASGI, logging options and proxy headers come with issue #10. A wrong app path or a
port in use is one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from . import __version__
from .serving import AppLoadError, load_app


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cymongoose", description="Serve a WSGI app (Flask, Django, ...) on cymongoose.")
    p.add_argument("app", help="the app as module:attribute, e.g. myproject.wsgi:application")
    p.add_argument("--host", default=os.environ.get("CYMONGOOSE_HOST", "127.0.0.1"))
    p.add_argument("--port", type=int, default=int(os.environ.get("CYMONGOOSE_PORT", "8000")))
    p.add_argument("--threads", type=int,
                   default=int(os.environ.get("CYMONGOOSE_THREADS", "8")),
                   help="how many apps may run at once (default 8)")
    p.add_argument("--factory", action="store_true",
                   help="APP is a callable returning the app")
    p.add_argument("--root-path", default="", help="mount point: SCRIPT_NAME of every request")
    p.add_argument("--version", action="version", version=f"cymongoose {__version__}")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if "." not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # `cymongoose app:app` finds app.py here, as uvicorn
    from .wsgi import WSGIServer  # after the path is set: the app may import at load time

    try:
        app = load_app(args.app, factory=args.factory)
        server = WSGIServer(app, threads=args.threads, root_path=args.root_path)
    except (AppLoadError, ValueError) as exc:
        print(f"cymongoose: {exc}", file=sys.stderr)
        return 2
    url = f"http://{args.host}:{args.port}"
    try:
        server.listen(url)
    except (RuntimeError, OSError) as exc:
        server.close()
        print(f"cymongoose: cannot listen on {url} ({exc}); is the port in use?",
              file=sys.stderr)
        return 2
    print(f"cymongoose: serving {args.app} on {url} ({args.threads} app threads); "
          "Ctrl-C stops it", file=sys.stderr, flush=True)
    server.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
