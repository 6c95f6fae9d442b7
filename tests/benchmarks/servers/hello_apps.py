"""The hello apps several servers share, so that every server of an app runs the same object.

Imported (never run) by the server files of this directory, and by ../app_cost.py, which
calls each app in-process with a prebuilt environ/scope to measure what the app alone costs.
Every app answers ``200 {"message":"Hello, World!"}`` with ``Content-Type: application/json``
and a Content-Length (the runner's check: benchkit/httpcheck.py).

- ``raw_hello``: a raw cymongoose handler (the soak, tests/reliability/soak.py)
- ``wsgi_hello``: raw WSGI callable (granian WSGI, cymongoose WSGI)
- ``wsgi_wait``, ``wsgi_cpu``: the same answer after waiting WAIT_S off the CPU (as an app
  waits on its database) or after a fixed piece of pure-Python work (CPU_LOOP steps, about
  1.6 ms on CPython 3.13 here): the threads phase's app-threads part
- ``flask_app``: Flask app with one view returning prebuilt bytes (gunicorn sync/gthread,
  granian WSGI, cymongoose WSGI); made on first access (``hello_apps.flask_app``, as the servers'
  ``module:attr`` loaders do), so the raw apps never import Flask
- ``asgi_hello``: raw ASGI app (uvicorn, granian ASGI, cymongoose ASGI)
- ``asgi_ws_echo``: raw ASGI WebSocket echo (ws_echo.py: ours, uvicorn, granian)
- ``fastapi_app``: FastAPI the usual way, an async route returning a dict (uvicorn, granian
  ASGI, cymongoose ASGI); made on first access like ``flask_app``

No CONTENDER here: the runner's discovery skips this file.
"""

import time

BODY = b'{"message":"Hello, World!"}'

RAW_HEADERS = {"Content-Type": "application/json"}


def raw_hello(conn, ev, data):
    if ev == 11:  # MG_EV_HTTP_MSG, without importing cymongoose for the other servers
        conn.reply(200, BODY, RAW_HEADERS)


WSGI_STATUS = "200 OK"
WSGI_HEADERS = [("Content-Type", "application/json"), ("Content-Length", str(len(BODY)))]


def wsgi_hello(environ, start_response):
    start_response(WSGI_STATUS, WSGI_HEADERS)
    return [BODY]


WAIT_S = 0.002
CPU_LOOP = 20_000


def wsgi_wait(environ, start_response):
    time.sleep(WAIT_S)
    start_response(WSGI_STATUS, WSGI_HEADERS)
    return [BODY]


def wsgi_cpu(environ, start_response):
    # A fixed count, not a time: every interpreter does the same work per request.
    total = 0
    for i in range(CPU_LOOP):
        total += i * i % 7
    start_response(WSGI_STATUS, WSGI_HEADERS)
    return [BODY] if total >= 0 else []


ASGI_START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"application/json"),
                (b"content-length", str(len(BODY)).encode())],
}
ASGI_BODY = {"type": "http.response.body", "body": BODY}


async def asgi_hello(scope, receive, send):
    if scope["type"] != "http":
        return
    await send(ASGI_START)
    await send(ASGI_BODY)


async def asgi_ws_echo(scope, receive, send):
    """WebSocket echo (ws_echo.py): accept, then send every message back as it came."""
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.accept"})
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                return
            if message.get("text") is not None:
                await send({"type": "websocket.send", "text": message["text"]})
            else:
                await send({"type": "websocket.send", "bytes": message["bytes"]})
    elif scope["type"] == "http":
        await asgi_hello(scope, receive, send)


def _make_flask_app():
    from flask import Flask, Response

    app = Flask(__name__)

    # Prebuilt bytes, not jsonify(): Flask's JSON response ends with a newline, which the
    # runner's check (rightly) refuses as a different answer.
    @app.get("/")
    def hello() -> Response:
        return Response(BODY, content_type="application/json")

    return app


def _make_fastapi_app():
    from fastapi import FastAPI

    app = FastAPI()

    # async: a plain `def` route would run in a thread pool, several times slower.
    @app.get("/")
    async def root() -> dict[str, str]:
        return {"message": "Hello, World!"}

    return app


_LAZY_APPS = {"flask_app": _make_flask_app, "fastapi_app": _make_fastapi_app}


def __getattr__(name):
    # Module attributes made on first access (PEP 562), then ordinary globals.
    if name in _LAZY_APPS:
        app = globals()[name] = _LAZY_APPS[name]()
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
