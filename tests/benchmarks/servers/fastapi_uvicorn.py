"""FastAPI the usual way (an async route returning a dict) on uvicorn, httptools and uvloop.

The app is hello_apps.fastapi_app, the one every FastAPI contender serves."""

import argparse

import uvicorn
from hello_apps import fastapi_app as app

CONTENDER = {
    "name": "fastapi",
    "label": "FastAPI on uvicorn",
    "kind": "hello",
    "env": "fastapi",
    "requires": ["fastapi", "uvicorn", "uvloop", "httptools"],
    "command": ["{python}", "{file}", "--port", "{port}", "--workers", "{workers}"],
    "app": {"interface": "asgi", "ref": "hello_apps:fastapi_app", "label": "FastAPI hello"},
    "notes": "async route returning a dict (FastAPI serializes it), uvloop + httptools",
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    if args.workers > 1:  # uvicorn's own process model needs the app as an import string
        uvicorn.run("hello_apps:fastapi_app", workers=args.workers, host="127.0.0.1",
                    port=args.port, loop="uvloop", http="httptools", access_log=False,
                    log_level="warning")
        return
    uvicorn.run(app, host="127.0.0.1", port=args.port, loop="uvloop", http="httptools",
                access_log=False, log_level="warning")


if __name__ == "__main__":
    main()
