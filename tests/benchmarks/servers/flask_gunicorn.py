"""Flask on gunicorn: the sync worker (no keep-alive by design) and the gthread worker.

The view returns prebuilt bytes: Flask's own JSON response ends the body with a newline, which
the runner's check (rightly) refuses as a different answer.
"""

from flask import Flask, Response

CONTENDERS = [
    {
        "name": "flask-gunicorn-sync",
        "label": "Flask on gunicorn sync",
        "kind": "hello",
        "env": "flask-gunicorn",
        "requires": ["flask", "gunicorn"],
        "command": ["{python}", "-m", "gunicorn", "--workers", "1", "--worker-class", "sync",
                    "--bind", "127.0.0.1:{port}", "--log-level", "warning", "{module}:app"],
        "keepalive": False,
        "notes": "1 worker; the sync worker closes every connection (wrk reconnects)",
    },
    {
        "name": "flask-gunicorn-gthread",
        "label": "Flask on gunicorn gthread",
        "kind": "hello",
        "env": "flask-gunicorn",
        "requires": ["flask", "gunicorn"],
        "command": ["{python}", "-m", "gunicorn", "--workers", "1", "--worker-class", "gthread",
                    "--threads", "8", "--worker-connections", "1000", "--keep-alive", "30",
                    "--bind", "127.0.0.1:{port}", "--log-level", "warning", "{module}:app"],
        "notes": "1 worker, 8 threads, keep-alive 30 s",
    },
]

BODY = b'{"message":"Hello, World!"}'

app = Flask(__name__)


@app.get("/")
def hello() -> Response:
    return Response(BODY, content_type="application/json")
