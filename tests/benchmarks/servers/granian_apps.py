"""granian with its three interfaces, Flask on its WSGI interface and FastAPI on its ASGI one.

The WSGI, ASGI and Flask apps are those of hello_apps.py (the same objects our servers and
the other peers serve); the RSGI app is granian's own interface, so it lives here. The WSGI
contenders run 8 blocking threads (the app thread pool), as ours and gunicorn gthread do: in
an A/B on the benchmark machine that was faster than granian's default for WSGI (up to
backpressure / 2 = 512 threads, started on demand), for the raw app and for Flask.
"""

CONTENDERS = [
    {
        "name": "granian-wsgi",
        "label": "granian WSGI",
        "kind": "hello",
        "env": "granian",
        "requires": ["granian"],
        "command": ["{python}", "-m", "granian", "--interface", "wsgi", "--workers", "{workers}",
                    "--blocking-threads", "8", "--host", "127.0.0.1", "--port", "{port}",
                    "--no-ws", "--log-level", "warning", "hello_apps:wsgi_hello"],
        "quick": True,
        "app": {"interface": "wsgi", "ref": "hello_apps:wsgi_hello", "label": "raw WSGI hello"},
        "notes": "1 worker, 8 blocking threads (as ours; faster here than the default, up to "
                 "512 started on demand), raw WSGI callable",
    },
    {
        "name": "granian-asgi",
        "label": "granian ASGI",
        "kind": "hello",
        "env": "granian",
        "requires": ["granian"],
        "command": ["{python}", "-m", "granian", "--interface", "asgi", "--workers", "{workers}",
                    "--host", "127.0.0.1", "--port", "{port}", "--no-ws", "--log-level",
                    "warning", "hello_apps:asgi_hello"],
        "app": {"interface": "asgi", "ref": "hello_apps:asgi_hello", "label": "raw ASGI hello"},
        "notes": "1 worker, raw ASGI app",
    },
    {
        "name": "granian-rsgi",
        "label": "granian RSGI",
        "kind": "hello",
        "env": "granian",
        "requires": ["granian"],
        "command": ["{python}", "-m", "granian", "--interface", "rsgi", "--workers", "{workers}",
                    "--host", "127.0.0.1", "--port", "{port}", "--no-ws", "--log-level",
                    "warning", "{module}:rsgi_app"],
        "notes": "1 worker, RSGI response_bytes()",
    },
    {
        "name": "granian-fastapi",
        "label": "FastAPI on granian",
        "kind": "hello",
        "env": "granian-fastapi",
        "requires": ["granian", "fastapi"],
        "command": ["{python}", "-m", "granian", "--interface", "asgi", "--workers", "{workers}",
                    "--host", "127.0.0.1", "--port", "{port}", "--no-ws", "--log-level",
                    "warning", "hello_apps:fastapi_app"],
        "app": {"interface": "asgi", "ref": "hello_apps:fastapi_app", "label": "FastAPI hello"},
        "notes": "1 worker, ASGI interface, FastAPI's lifespan on (granian's default)",
    },
    {
        "name": "granian-flask",
        "label": "Flask on granian",
        "kind": "hello",
        "env": "granian-flask",
        "requires": ["granian", "flask"],
        "command": ["{python}", "-m", "granian", "--interface", "wsgi", "--workers", "{workers}",
                    "--blocking-threads", "8", "--host", "127.0.0.1", "--port", "{port}",
                    "--no-ws", "--log-level", "warning", "hello_apps:flask_app"],
        "app": {"interface": "wsgi", "ref": "hello_apps:flask_app", "label": "Flask hello"},
        "notes": "1 worker, 8 blocking threads (as gunicorn gthread's and ours; faster here "
                 "than the default), WSGI interface",
    },
]

BODY = b'{"message":"Hello, World!"}'
RSGI_HEADERS = [("content-type", "application/json")]


async def rsgi_app(scope, proto):
    proto.response_bytes(200, RSGI_HEADERS, BODY)
