"""A small Flask app: form posts, multipart file uploads, JSON in and out, and a streamed
generator response. `app` is wrapped in wsgiref's validator; `flask_app` is the Flask object."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from wsgiref.validate import validator

from flask import Flask, Response, jsonify, request, stream_with_context

flask_app = Flask(__name__)


@flask_app.get("/_ctl/ping")
def ping() -> str:
    return "pong"


@flask_app.post("/form")
def form() -> Response:
    return jsonify(name=request.form["name"], tags=request.form.getlist("tag"))


@flask_app.post("/upload")
def upload() -> Response:
    f = request.files["file"]
    data = f.read()
    return jsonify(filename=f.filename, size=len(data), sha256=hashlib.sha256(data).hexdigest(),
                   note=request.form.get("note"))


@flask_app.post("/json")
def json_echo() -> Response:
    payload = request.get_json()
    return jsonify(received=payload, count=len(payload["items"]))


@flask_app.get("/stream")
def stream() -> Response:
    n = int(request.args.get("n", "5"))

    def generate() -> Iterator[str]:
        for i in range(n):
            yield f"line {i}\n"
    return Response(stream_with_context(generate()), mimetype="text/plain")


_validated = validator(flask_app)


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    if environ["REQUEST_METHOD"] in ("GET", "HEAD"):
        return _validated(environ, start_response)  # type: ignore[no-any-return]
    return flask_app(environ, start_response)  # type: ignore[no-any-return]
