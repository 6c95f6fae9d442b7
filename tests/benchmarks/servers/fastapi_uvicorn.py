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
    "command": ["{python}", "{file}", "--port", "{port}"],
    "app": {"interface": "asgi", "ref": "hello_apps:fastapi_app", "label": "FastAPI hello"},
    "notes": "async route returning a dict (FastAPI serializes it), uvloop + httptools",
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(app, host="127.0.0.1", port=args.port, loop="uvloop", http="httptools",
                access_log=False, log_level="warning")


if __name__ == "__main__":
    main()
