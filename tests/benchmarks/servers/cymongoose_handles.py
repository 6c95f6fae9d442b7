"""Ours, raw handler declaring @handles(MG_EV_HTTP_MSG): the demo server with --http-only."""

CONTENDER = {
    "name": "cymongoose-handles",
    "label": "cymongoose (raw handler, @handles)",
    "kind": "hello",
    "env": "project",
    "packages": ["cymongoose", "cython"],
    "command": ["{python}", "{bench}/demo_server.py", "--port", "{port}", "--log-level",
                "WARNING", "--http-only"],
    "quick": True,
    "notes": "same handler body; only MG_EV_HTTP_MSG is delivered to Python",
}
