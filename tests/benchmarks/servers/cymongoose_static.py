"""Ours, static files: Connection.serve_dir() over the benchmark's file directory."""

import argparse
import logging

from cymongoose._mongoose import MG_EV_HTTP_MSG, Manager

CONTENDER = {
    "name": "cymongoose-static",
    "label": "cymongoose serve_dir",
    "kind": "static",
    "env": "project",
    "packages": ["cymongoose"],
    "command": ["{python}", "{file}", "--port", "{port}", "--root", "{static_dir}"],
    "quick": True,
    "notes": "Manager + handler calling conn.serve_dir()",
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--root", required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    root = args.root

    def handler(conn, ev, data):
        if ev == MG_EV_HTTP_MSG:
            conn.serve_dir(data, root)

    with Manager(handler) as mgr:
        mgr.listen(f"http://127.0.0.1:{args.port}")
        mgr.run()


if __name__ == "__main__":
    main()
