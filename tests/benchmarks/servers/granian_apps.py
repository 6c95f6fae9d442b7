"""granian with its three interfaces, each with a framework-free app answering prebuilt bytes."""

CONTENDERS = [
    {
        "name": "granian-wsgi",
        "label": "granian WSGI",
        "kind": "hello",
        "env": "granian",
        "requires": ["granian"],
        "command": ["{python}", "-m", "granian", "--interface", "wsgi", "--workers", "1",
                    "--host", "127.0.0.1", "--port", "{port}", "--no-ws", "--log-level",
                    "warning", "{module}:wsgi_app"],
        "notes": "1 worker, raw WSGI callable",
    },
    {
        "name": "granian-asgi",
        "label": "granian ASGI",
        "kind": "hello",
        "env": "granian",
        "requires": ["granian"],
        "command": ["{python}", "-m", "granian", "--interface", "asgi", "--workers", "1",
                    "--host", "127.0.0.1", "--port", "{port}", "--no-ws", "--log-level",
                    "warning", "{module}:asgi_app"],
        "notes": "1 worker, raw ASGI app",
    },
    {
        "name": "granian-rsgi",
        "label": "granian RSGI",
        "kind": "hello",
        "env": "granian",
        "requires": ["granian"],
        "command": ["{python}", "-m", "granian", "--interface", "rsgi", "--workers", "1",
                    "--host", "127.0.0.1", "--port", "{port}", "--no-ws", "--log-level",
                    "warning", "{module}:rsgi_app"],
        "notes": "1 worker, RSGI response_bytes()",
    },
]

BODY = b'{"message":"Hello, World!"}'
WSGI_HEADERS = [("Content-Type", "application/json"), ("Content-Length", str(len(BODY)))]
ASGI_START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"application/json"),
                (b"content-length", str(len(BODY)).encode())],
}
ASGI_BODY = {"type": "http.response.body", "body": BODY}
RSGI_HEADERS = [("content-type", "application/json")]


def wsgi_app(environ, start_response):
    start_response("200 OK", WSGI_HEADERS)
    return [BODY]


async def asgi_app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send(ASGI_START)
    await send(ASGI_BODY)


async def rsgi_app(scope, proto):
    proto.response_bytes(200, RSGI_HEADERS, BODY)
