"""Ours, ASGI: cymongoose.asgi.ASGIServer serving the raw ASGI hello of hello_apps.py (the
app uvicorn and granian ASGI serve), Mongoose polled by the uvloop loop on its own thread.

Also the entry point of cymongoose_fastapi.py (``--app fastapi_app``).
"""

import argparse
import logging

import hello_apps

from cymongoose.asgi import serve

CONTENDER = {
    "name": "cymongoose-asgi",
    "label": "cymongoose ASGI",
    "kind": "hello",
    "env": "project",
    "packages": ["cymongoose", "cython", "uvloop"],
    "command": ["{python}", "{file}", "--port", "{port}", "--app", "asgi_hello"],
    "quick": True,
    "app": {"interface": "asgi", "ref": "hello_apps:asgi_hello", "label": "raw ASGI hello"},
    "notes": "ASGIServer on uvloop, raw ASGI app, lifespan off (as uvicorn's)",
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--app", default="asgi_hello", help="an app of hello_apps.py")
    parser.add_argument("--lifespan", default="off", choices=["auto", "on", "off"])
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    serve(getattr(hello_apps, args.app), f"http://127.0.0.1:{args.port}",
          lifespan=args.lifespan)


if __name__ == "__main__":
    main()
