"""Ours, WSGI, one listening socket per worker: `cymongoose --workers N --reuse-port` serving
the raw WSGI hello, for the workers phase only, beside cymongoose-wsgi's shared socket
(docs/deployment.md, per-worker sockets)."""

CONTENDER = {
    "name": "cymongoose-wsgi-reuse-port",
    "label": "cymongoose WSGI, a socket per worker",
    "kind": "hello",
    "env": "project",
    "packages": ["cymongoose", "cython"],
    "command": ["{python}", "{dir}/cymongoose_wsgi.py", "--port", "{port}", "--app",
                "wsgi_hello", "--threads", "8", "--workers", "{workers}", "--reuse-port"],
    "phases": ["workers"],  # the sockets differ only with several workers
    "app": {"interface": "wsgi", "ref": "hello_apps:wsgi_hello", "label": "raw WSGI hello"},
    "notes": "cymongoose --workers N --reuse-port, 8 app threads each, raw WSGI callable",
}
