"""A raw ASGI app (no framework) on uvicorn with httptools and uvloop."""

import argparse

import uvicorn

CONTENDER = {
    "name": "uvicorn-raw",
    "label": "uvicorn raw ASGI",
    "kind": "hello",
    "env": "uvicorn",
    "requires": ["uvicorn", "uvloop", "httptools"],
    "command": ["{python}", "{file}", "--port", "{port}"],
    "quick": True,
    "notes": "--loop uvloop --http httptools, access log off",
}

BODY = b'{"message":"Hello, World!"}'
START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"application/json"),
                (b"content-length", str(len(BODY)).encode())],
}
SEND_BODY = {"type": "http.response.body", "body": BODY}


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send(START)
    await send(SEND_BODY)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(app, host="127.0.0.1", port=args.port, loop="uvloop", http="httptools",
                lifespan="off", access_log=False, log_level="warning")


if __name__ == "__main__":
    main()
