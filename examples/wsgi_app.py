"""A plain WSGI app (no framework) served by the `cymongoose` command line. Flask and Django
apps are served the same way (`cymongoose mysite.wsgi:application`).

From this directory:

    cymongoose wsgi_app:app --port 8000

    curl http://127.0.0.1:8000/
    curl --data-binary @wsgi_app.py http://127.0.0.1:8000/upload

On a server: every interface, two worker processes, one access-log line per request:

    cymongoose wsgi_app:app --host 0.0.0.0 --port 8000 --workers 2 --access-log

Ctrl-C or SIGTERM stops it once the requests in flight are answered. docs/deployment.md has
every option.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from typing import Any

StartResponse = Callable[..., object]


def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    path = environ["PATH_INFO"]
    if path == "/":
        return _json(start_response, "200 OK",
                     {"message": "hello", "client": environ["REMOTE_ADDR"], "pid": os.getpid()})
    if path == "/upload" and environ["REQUEST_METHOD"] == "POST":
        size = 0
        while chunk := environ["wsgi.input"].read(65536):  # streamed: never held whole
            size += len(chunk)
        return _json(start_response, "201 Created", {"received": size})
    return _json(start_response, "404 Not Found", {"error": f"no route for {path}"})


def _json(start_response: StartResponse, status: str, value: object) -> list[bytes]:
    body = json.dumps(value).encode()
    start_response(status, [("Content-Type", "application/json"),
                            ("Content-Length", str(len(body)))])
    return [body]
