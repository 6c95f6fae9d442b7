"""FastAPI the usual way (an async route returning a dict) on uvicorn, httptools and uvloop."""

import argparse

import uvicorn
from fastapi import FastAPI

CONTENDER = {
    "name": "fastapi",
    "label": "FastAPI on uvicorn",
    "kind": "hello",
    "env": "fastapi",
    "requires": ["fastapi", "uvicorn", "uvloop", "httptools"],
    "command": ["{python}", "{file}", "--port", "{port}"],
    "app": {"interface": "asgi", "ref": "fastapi_uvicorn:app", "label": "FastAPI hello"},
    "notes": "async route returning a dict (FastAPI serializes it), uvloop + httptools",
}

app = FastAPI()


# async: a plain `def` route would run in a thread pool, several times slower.
@app.get("/")
async def root() -> dict[str, str]:
    return {"message": "Hello, World!"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(app, host="127.0.0.1", port=args.port, loop="uvloop", http="httptools",
                access_log=False, log_level="warning")


if __name__ == "__main__":
    main()
