"""Starlette's StaticFiles on uvicorn (httptools, uvloop)."""

import argparse

import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

CONTENDER = {
    "name": "starlette-static",
    "label": "Starlette StaticFiles on uvicorn",
    "kind": "static",
    "env": "starlette",
    "requires": ["starlette", "uvicorn", "uvloop", "httptools", "anyio"],
    "command": ["{python}", "{file}", "--port", "{port}", "--root", "{static_dir}"],
    "notes": "Mount('/', StaticFiles(directory=...)), --loop uvloop --http httptools",
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--root", required=True)
    args = parser.parse_args()
    app = Starlette(routes=[Mount("/", app=StaticFiles(directory=args.root))])
    uvicorn.run(app, host="127.0.0.1", port=args.port, loop="uvloop", http="httptools",
                lifespan="off", access_log=False, log_level="warning")


if __name__ == "__main__":
    main()
