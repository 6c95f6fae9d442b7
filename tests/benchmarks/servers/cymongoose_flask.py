"""Ours, Flask: hello_apps.flask_app (the app Flask on gunicorn and on granian serve) on
cymongoose.wsgi.WSGIServer, through cymongoose_wsgi.py."""

CONTENDER = {
    "name": "cymongoose-flask",
    "label": "Flask on cymongoose WSGI",
    "kind": "hello",
    "env": "project",
    "packages": ["cymongoose", "flask", "werkzeug"],
    "command": ["{python}", "{dir}/cymongoose_wsgi.py", "--port", "{port}", "--app",
                "flask_app", "--threads", "8", "--workers", "{workers}"],
    "app": {"interface": "wsgi", "ref": "hello_apps:flask_app", "label": "Flask hello"},
    "notes": "WSGIServer, 8 app threads (as gunicorn gthread's), Flask from the project's .venv",
}
