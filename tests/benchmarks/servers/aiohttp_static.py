"""aiohttp serving the static files (its static route uses sendfile), on uvloop."""

import argparse

import uvloop
from aiohttp import web

CONTENDER = {
    "name": "aiohttp-static",
    "label": "aiohttp static (uvloop)",
    "kind": "static",
    "env": "aiohttp",
    "requires": ["aiohttp", "uvloop"],
    "command": ["{python}", "{file}", "--port", "{port}", "--root", "{static_dir}"],
    "notes": "app.router.add_static, access log off",
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--root", required=True)
    args = parser.parse_args()
    app = web.Application()
    app.router.add_static("/", args.root)
    web.run_app(app, host="127.0.0.1", port=args.port, access_log=None, print=None,
                loop=uvloop.new_event_loop())


if __name__ == "__main__":
    main()
