"""Flask on gunicorn: the sync worker (no keep-alive by design) and the gthread worker.

The app is hello_apps.flask_app, the one every Flask contender serves (a view returning
prebuilt bytes); gunicorn imports it from this directory (its working directory).
"""

CONTENDERS = [
    {
        "name": "flask-gunicorn-sync",
        "label": "Flask on gunicorn sync",
        "kind": "hello",
        "env": "flask-gunicorn",
        "requires": ["flask", "gunicorn"],
        "command": ["{python}", "-m", "gunicorn", "--workers", "{workers}", "--worker-class",
                    "sync", "--bind", "127.0.0.1:{port}", "--log-level", "warning",
                    "hello_apps:flask_app"],
        "keepalive": False,
        "app": {"interface": "wsgi", "ref": "hello_apps:flask_app", "label": "Flask hello"},
        "notes": "1 worker; the sync worker closes every connection (wrk reconnects)",
    },
    {
        "name": "flask-gunicorn-gthread",
        "label": "Flask on gunicorn gthread",
        "kind": "hello",
        "env": "flask-gunicorn",
        "requires": ["flask", "gunicorn"],
        "command": ["{python}", "-m", "gunicorn", "--workers", "{workers}", "--worker-class",
                    "gthread", "--threads", "8", "--worker-connections", "1000", "--keep-alive",
                    "30", "--bind", "127.0.0.1:{port}", "--log-level", "warning",
                    "hello_apps:flask_app"],
        "app": {"interface": "wsgi", "ref": "hello_apps:flask_app", "label": "Flask hello"},
        "notes": "1 worker, 8 threads, keep-alive 30 s",
    },
]
