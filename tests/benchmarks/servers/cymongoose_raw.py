"""Ours, raw handler: the demo server itself (../demo_server.py), i.e. what `make demo` runs."""

CONTENDER = {
    "name": "cymongoose-raw",
    "label": "cymongoose (raw handler)",
    "kind": "hello",
    "env": "project",
    "packages": ["cymongoose", "cython"],
    "command": ["{python}", "{bench}/demo_server.py", "--port", "{port}", "--log-level",
                "WARNING"],
    "quick": True,
    "phases": ["hello", "connections", "close"],
    "notes": "Manager + handler calling conn.reply() with a prebuilt body",
}
