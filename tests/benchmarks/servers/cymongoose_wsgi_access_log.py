"""Ours, WSGI with the access log on, written to a file (the default gunicorn-style format):
the cost of `cymongoose --access-log --access-log-file FILE`, against cymongoose-wsgi."""

CONTENDER = {
    "name": "cymongoose-wsgi-access-log",
    "label": "cymongoose WSGI, access log to a file",
    "kind": "hello",
    "env": "project",
    "packages": ["cymongoose", "cython"],
    "command": ["{python}", "{dir}/cymongoose_wsgi.py", "--port", "{port}", "--app",
                "wsgi_hello", "--threads", "8", "--access-log", "{workdir}/access.log"],
    "phases": ["hello"],  # a feature's cost: the hello phase only
    "app": {"interface": "wsgi", "ref": "hello_apps:wsgi_hello", "label": "raw WSGI hello"},
    "notes": "WSGIServer, 8 app threads, raw WSGI callable, one access-log line per request",
}
