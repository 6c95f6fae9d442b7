"""A raw ASGI app (no framework) on uvicorn with httptools and uvloop.

The app is hello_apps.asgi_hello, the one granian ASGI serves too.
"""

import argparse

import uvicorn
from hello_apps import asgi_hello

CONTENDER = {
    "name": "uvicorn-raw",
    "label": "uvicorn raw ASGI",
    "kind": "hello",
    "env": "uvicorn",
    "requires": ["uvicorn", "uvloop", "httptools"],
    "command": ["{python}", "{file}", "--port", "{port}", "--workers", "{workers}"],
    "quick": True,
    "app": {"interface": "asgi", "ref": "hello_apps:asgi_hello", "label": "raw ASGI hello"},
    "notes": "--loop uvloop --http httptools, access log off",
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    if args.workers > 1:  # uvicorn's own process model needs the app as an import string
        uvicorn.run("hello_apps:asgi_hello", workers=args.workers, host="127.0.0.1",
                    port=args.port, loop="uvloop", http="httptools", access_log=False,
                    log_level="warning", lifespan="off")
        return
    uvicorn.run(asgi_hello, host="127.0.0.1", port=args.port, loop="uvloop", http="httptools",
                lifespan="off", access_log=False, log_level="warning")


if __name__ == "__main__":
    main()
