"""A cymongoose HTTP server in a process of its own, for the load tests that watch its memory
and file descriptors. Prints its port, serves until SIGTERM, then prints a JSON summary."""

from __future__ import annotations

import argparse
import json
import resource
import signal
from typing import Any

import cymongoose._mongoose as cm


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--app", choices=["ok", "raise"], default="ok")
    parser.add_argument("--limits", default="{}", help="JSON object of HTTP limits")
    parser.add_argument("--nofile", default="",
                        help="SOFT,HARD: the open-file limits to start with")
    args = parser.parse_args()
    if args.nofile:
        soft, hard = (int(x) for x in args.nofile.split(","))
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    counts = {"errors": 0, "requests": 0}
    stop: list[int] = []

    def on_error(exc: BaseException) -> None:
        counts["errors"] += 1

    def app(conn: Any, ev: int, msg: Any) -> None:
        if ev != cm.MG_EV_HTTP_MSG:
            return
        counts["requests"] += 1
        if args.app == "raise":
            raise RuntimeError("handler failure under load")
        conn.reply(200, b"ok %d" % len(msg.body_bytes))

    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    with cm.Manager(error_handler=on_error) as mgr:
        listener = mgr.listen("http://127.0.0.1:0", app, **json.loads(args.limits))
        print(listener.local_addr[1], resource.getrlimit(resource.RLIMIT_NOFILE)[0],
              flush=True)
        while not stop:
            mgr.poll(50)
        counts["connections_at_exit"] = len(mgr.connections) - 1
    print(json.dumps(counts), flush=True)


if __name__ == "__main__":
    main()
