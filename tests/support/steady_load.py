"""A steady load from another host: `python -m support.steady_load HOST PORT` (with the
tests folder on sys.path) runs support.cli_run.LoadClient against HOST:PORT until its
standard input closes, then prints the result as one JSON line (`pids`: "pid|the address
the server saw the balancer at", which tells the hosts apart). A test runs it in a network
namespace of its own (support/netns.py), where it cannot share the test's objects."""

from __future__ import annotations

import json
import sys

from .cli_run import LoadClient

# 4 keep-alive clients, each waiting 5 ms between requests: a few hundred a second, steady
# whatever the machine's load, rather than as many as the CPUs allow.
THREADS = 4
PACE_S = 0.005


def main() -> None:
    host, port = sys.argv[1], int(sys.argv[2])
    with LoadClient(port, threads=THREADS, max_requests=10**9, host=host,
                    pace=PACE_S, fields=2) as load:
        print("started", flush=True)
        sys.stdin.read()  # until the test closes it
        result = load.stop()
    print(json.dumps({"ok": result.ok, "failed": result.failed, "partial": result.partial,
                      "retried": result.retried, "pids": sorted(result.pids)}), flush=True)


if __name__ == "__main__":
    main()
