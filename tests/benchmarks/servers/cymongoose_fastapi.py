"""Ours, FastAPI: hello_apps.fastapi_app (the app FastAPI on uvicorn and on granian serve) on
cymongoose.asgi.ASGIServer, through cymongoose_asgi.py."""

CONTENDER = {
    "name": "cymongoose-fastapi",
    "label": "FastAPI on cymongoose ASGI",
    "kind": "hello",
    "env": "project",
    "packages": ["cymongoose", "fastapi", "starlette", "uvloop"],
    "command": ["{python}", "{dir}/cymongoose_asgi.py", "--port", "{port}", "--app",
                "fastapi_app", "--lifespan", "auto", "--workers", "{workers}"],
    "app": {"interface": "asgi", "ref": "hello_apps:fastapi_app", "label": "FastAPI hello"},
    "notes": "ASGIServer on uvloop, FastAPI from the project's .venv",
}
