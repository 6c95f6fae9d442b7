"""Ours as a pure reverse proxy (issue 21): the command line with --proxy and no app."""

CONTENDER = {
    "name": "cymongoose-proxy",
    "label": "cymongoose --proxy",
    "kind": "proxy",
    "env": "project",
    "packages": ["cymongoose", "cython"],
    # The pool size is its default, spelled out so a new default cannot change the run
    # unnoticed; it matches the tuned nginx's `keepalive 64`.
    "command": ["{python}", "-m", "cymongoose", "--proxy", "/=http://{backend}",
                "--port", "{port}", "--workers", "1", "--proxy-pool-size", "64",
                "--log-level", "warning"],
    "quick": True,
    "notes": "1 process, --proxy-pool-size 64 (its default): at most 64 upstream "
             "connections, more requests wait for one",
}
