"""JSON hello server on cymongoose's raw handler API: `make demo`, and the benchmark's own entry.

Every request is answered ``200 {"message":"Hello, World!"}`` with
``Content-Type: application/json``. The body and headers are built once, so the handler does
the least a real one would. Ctrl-C or SIGTERM stops it cleanly (``Manager.run`` handles both
and closes the manager). It logs through :mod:`logging` only: a long-running server must not
depend on ``print`` (a closed or full stdout would make it fail).

    python tests/benchmarks/demo_server.py [--host 127.0.0.1] [--port 8765]

The port can also come from ``CYMONGOOSE_DEMO_PORT``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

# The extension module directly: it is all this server needs.
from cymongoose._mongoose import MG_EV_HTTP_MSG, Manager, handles

log = logging.getLogger("cymongoose.demo")

BODY = b'{"message":"Hello, World!"}'
HEADERS = {"Content-Type": "application/json"}
DEFAULT_PORT = 8765


def handler(conn, ev, data):
    if ev == MG_EV_HTTP_MSG:
        conn.reply(200, BODY, HEADERS)


@handles(MG_EV_HTTP_MSG)
def http_only_handler(conn, ev, data):
    # Same answer; @handles() spares the Python calls for every other event (MG_EV_POLL,
    # READ, WRITE, HTTP_HDRS) that handler() receives and ignores.
    conn.reply(200, BODY, HEADERS)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int,
                        default=int(os.environ.get("CYMONGOOSE_DEMO_PORT", DEFAULT_PORT)))
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--http-only", action="store_true",
                        help="use the @handles(MG_EV_HTTP_MSG) handler")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    host = f"[{args.host}]" if ":" in args.host else args.host
    with Manager(http_only_handler if args.http_only else handler) as mgr:
        try:
            listener = mgr.listen(f"http://{host}:{args.port}")
        except RuntimeError as exc:
            log.error("%s", exc)
            return 1
        log.info("serving the JSON hello on http://%s:%d (pid %d); Ctrl-C stops",
                 host, listener.local_addr[1], os.getpid())
        mgr.run()
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
