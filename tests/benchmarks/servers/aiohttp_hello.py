"""aiohttp's web server on uvloop, a handler returning a prebuilt body."""

import argparse

import uvloop
from aiohttp import web

CONTENDER = {
    "name": "aiohttp",
    "label": "aiohttp (uvloop)",
    "kind": "hello",
    "env": "aiohttp",
    "requires": ["aiohttp", "uvloop"],
    "command": ["{python}", "{file}", "--port", "{port}"],
    "notes": "web.Response with prebuilt bytes, access log off",
}

BODY = b'{"message":"Hello, World!"}'


async def hello(request: web.Request) -> web.Response:
    return web.Response(body=BODY, content_type="application/json")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = web.Application()
    app.router.add_get("/", hello)
    web.run_app(app, host="127.0.0.1", port=args.port, access_log=None, print=None,
                loop=uvloop.new_event_loop())


if __name__ == "__main__":
    main()
