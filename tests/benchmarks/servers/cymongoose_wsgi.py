"""Ours, WSGI: cymongoose.wsgi.WSGIServer serving the raw WSGI hello of hello_apps.py.

Also the entry point of cymongoose_flask.py (``--app flask_app``) and of
cymongoose_wsgi_access_log.py (``--access-log FILE``): one process, the Mongoose loop plus a
pool of app threads (``--threads``). With ``--workers N`` (N > 1, the runner's workers phase)
it becomes ``python -m cymongoose --workers N``: the CLI's supervisor and N serving processes.
"""

import argparse
import logging
import os
import sys

import hello_apps

from cymongoose import TlsOpts
from cymongoose.access_log import AccessLog, AccessLogWriter
from cymongoose.wsgi import WSGIServer

CONTENDER = {
    "name": "cymongoose-wsgi",
    "label": "cymongoose WSGI",
    "kind": "hello",
    "env": "project",
    "packages": ["cymongoose", "cython"],
    "command": ["{python}", "{file}", "--port", "{port}", "--app", "wsgi_hello",
                "--threads", "8", "--workers", "{workers}"],
    "quick": True,
    "app": {"interface": "wsgi", "ref": "hello_apps:wsgi_hello", "label": "raw WSGI hello"},
    "notes": "WSGIServer, 8 app threads, raw WSGI callable",
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--app", default="wsgi_hello", help="an app of hello_apps.py")
    parser.add_argument("--threads", type=int, default=8, help="app threads")
    parser.add_argument("--access-log", help="write the access log to this file")
    parser.add_argument("--workers", type=int, default=1,
                        help="worker processes; above 1 the cymongoose CLI serves the app "
                        "(its process model), as `cymongoose --workers N` would")
    parser.add_argument("--reuse-port", action="store_true",
                        help="with --workers: a listening socket per worker")
    parser.add_argument("--cert", help="PEM certificate: serve HTTPS (h2_bench.py --tls)")
    parser.add_argument("--key", help="its PEM key")
    args = parser.parse_args()
    if args.workers > 1:
        argv = [sys.executable, "-m", "cymongoose", f"hello_apps:{args.app}", "--interface",
                "wsgi", "--workers", str(args.workers), "--threads", str(args.threads),
                "--host", "127.0.0.1", "--port", str(args.port), "--log-level", "warning"]
        if args.access_log:
            argv += ["--access-log", "--access-log-file", args.access_log]
        if args.reuse_port:
            argv.append("--reuse-port")
        # exec: the same pid, so the runner's process-tree CPU sees every worker.
        os.execv(sys.executable, argv)
    logging.basicConfig(level=logging.WARNING)
    access = None
    if args.access_log:
        # As `cymongoose --access-log --access-log-file FILE` sets it up.
        access = AccessLog()
        access.logger.addHandler(AccessLogWriter(args.access_log))
        access.logger.setLevel(logging.INFO)
        access.logger.propagate = False
    tls = TlsOpts.from_files(cert=args.cert, key=args.key) if args.cert else None
    server = WSGIServer(getattr(hello_apps, args.app), threads=args.threads,
                        access_log=access, tls=tls)
    server.listen(f"{'https' if args.cert else 'http'}://127.0.0.1:{args.port}")
    server.run()


if __name__ == "__main__":
    main()
