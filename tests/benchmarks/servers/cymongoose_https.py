"""Ours over TLS for tls_bench.py: the JSON hello of demo_server.py on an https:// listener.

Not a CONTENDER of run.py (it needs a certificate): tls_bench.py starts it with one.

    python servers/cymongoose_https.py --port 8443 --cert cert.pem --key key.pem
"""

from __future__ import annotations

import argparse
import sys

from cymongoose import MG_EV_ACCEPT, MG_EV_HTTP_MSG, TLS_ENGINE, Manager, TlsOpts, handles

BODY = b'{"message":"Hello, World!"}'
HEADERS = {"Content-Type": "application/json"}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    args = p.parse_args(argv)
    opts = TlsOpts.from_files(cert=args.cert, key=args.key)  # read and checked once

    @handles(MG_EV_ACCEPT, MG_EV_HTTP_MSG)
    def handler(conn, ev, data):
        if ev == MG_EV_ACCEPT:
            conn.tls_init(opts)
        else:
            conn.reply(200, BODY, HEADERS)

    with Manager(handler) as mgr:
        mgr.listen(f"https://127.0.0.1:{args.port}")
        print(f"ready tls={TLS_ENGINE}", flush=True)
        mgr.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
