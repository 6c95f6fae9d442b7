"""The compression phase's apps (benchkit/compressphase.py): a Starlette app and a Flask app
serving the same two bodies, /data.json and /page.html, and an event stream, /events.

The bodies are the files the phase writes under .cache/compression (benchkit/compressbodies.py)
before any server starts, read here once at import: every server sends the same bytes, and
nginx serves those files themselves. Ours compresses the plain apps in C (--compression on);
the peers wrap the same apps in their framework's middleware: Starlette's GZipMiddleware and
Flask-Compress, both at level 3 as ours (their defaults are 9 and 6). Flask-Compress is only
in the peers' venv, so that app is made on first access (a module __getattr__).

The phase reads no CONTENDER here: it builds its contenders itself.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from flask import Flask
from flask import Response as FlaskResponse
from starlette.applications import Starlette
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

BODIES = Path(__file__).resolve().parent.parent / ".cache" / "compression"
JSON_BODY = (BODIES / "data.json").read_bytes()
HTML_BODY = (BODIES / "page.html").read_bytes()
LEVEL = 3
# Events per stream at most: a client that stops reading after the first costs a few more.
MAX_EVENTS = 20


async def data_json(request: Request) -> Response:
    return Response(JSON_BODY, media_type="application/json")


async def page_html(request: Request) -> Response:
    return Response(HTML_BODY, media_type="text/html; charset=utf-8")


async def events(request: Request) -> StreamingResponse:
    """One small event at once, then one every ?interval= ms."""
    interval = int(request.query_params.get("interval", "50")) / 1000

    async def stream() -> Any:
        for i in range(MAX_EVENTS):
            if i:
                await asyncio.sleep(interval)
            yield f"id: {i}\nevent: tick\ndata: {{\"n\": {i}, \"t\": {time.time():.6f}}}\n\n"

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})


ROUTES = [Route("/data.json", data_json), Route("/page.html", page_html),
          Route("/events", events)]
starlette_app = Starlette(routes=ROUTES)
starlette_gzip_app = GZipMiddleware(Starlette(routes=ROUTES), minimum_size=512,
                                    compresslevel=LEVEL)


def _flask(name: str) -> Flask:
    app = Flask(name)

    @app.get("/data.json")
    def flask_json() -> FlaskResponse:
        return FlaskResponse(JSON_BODY, mimetype="application/json")

    @app.get("/page.html")
    def flask_html() -> FlaskResponse:
        return FlaskResponse(HTML_BODY, content_type="text/html; charset=utf-8")

    return app


flask_app = _flask("compression_plain")


def __getattr__(name: str) -> Any:
    if name == "flask_compress_app":
        from flask_compress import Compress

        app = _flask("compression_flask_compress")
        app.config.update(COMPRESS_LEVEL=LEVEL, COMPRESS_ZSTD_LEVEL=LEVEL,
                          COMPRESS_MIN_SIZE=512, COMPRESS_ALGORITHM=["zstd", "gzip"])
        Compress(app)
        globals()[name] = app
        return app
    raise AttributeError(name)
