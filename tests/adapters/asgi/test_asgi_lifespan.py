"""Lifespan (startup, shutdown, state; a failed startup stops the server), apps that do not
speak it, how the app is named, and the server's API."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from support.asgi_fixtures import ServeASGI
from support.gunicorn_server import TESTS_DIR
from support.http_client import get
from support.ports import free_port
from support.served import Served
from support.waiting import wait_for

from cymongoose.asgi import ASGIServer, LifespanFailure, serve

pytestmark = pytest.mark.timeout(60)


def test_app_without_lifespan_still_serves(serve_asgi: ServeASGI) -> None:
    served: Served = serve_asgi("support.asgi_apps:no_lifespan_app")
    assert get(served.port, "/").body == b"served without lifespan"


def test_failed_startup_raises_with_the_apps_message() -> None:
    from support.asgi_apps import failing_startup_app

    async def main() -> None:
        server = ASGIServer(failing_startup_app)
        with pytest.raises(LifespanFailure, match="database unreachable"):
            await server.start("http://127.0.0.1:0")
        with pytest.raises(RuntimeError, match="not started"):
            server.manager  # noqa: B018 - nothing listens after a failed startup
        await server.stop()

    asyncio.run(main())


def test_serve_exits_nonzero_with_the_message_on_failed_startup() -> None:
    code = ("from cymongoose.asgi import serve; "
            "serve('support.asgi_apps:failing_startup_app', 'http://127.0.0.1:0')")
    # This child loads our extension: it keeps the environment (AddressSanitizer preload
    # included, under make asan-test).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH")) if p))
    out = subprocess.run([sys.executable, "-c", code], cwd=TESTS_DIR, capture_output=True,
                         env=env, timeout=30, check=False)
    assert out.returncode != 0
    assert b"database unreachable" in out.stderr


def test_lifespan_on_refuses_an_app_without_it() -> None:
    from support.asgi_apps import no_lifespan_app

    async def main() -> None:
        server = ASGIServer(no_lifespan_app, lifespan="on")
        with pytest.raises(LifespanFailure):
            await server.start("http://127.0.0.1:0")
        await server.stop()

    asyncio.run(main())


def test_shutdown_runs_and_state_reaches_requests() -> None:
    events: list[str] = []

    async def app(scope: dict, receive: object, send: object) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()  # type: ignore[operator]
                events.append(message["type"])
                if message["type"] == "lifespan.startup":
                    scope["state"]["db"] = "connected"
                    await send({"type": "lifespan.startup.complete"})  # type: ignore
                else:
                    await send({"type": "lifespan.shutdown.complete"})  # type: ignore
                    return
        body = scope["state"]["db"].encode()
        scope["state"]["db"] = "changed by a request"  # a copy: the next one sees "connected"
        await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore
        await send({"type": "http.response.body", "body": body})  # type: ignore

    async def main() -> None:
        server = ASGIServer(app)
        port = (await server.start("http://127.0.0.1:0")).local_addr[1]
        for _ in range(2):
            resp = await asyncio.to_thread(get, port, "/")
            assert resp.body == b"connected"
        await server.stop()

    asyncio.run(main())
    assert events == ["lifespan.startup", "lifespan.shutdown"]


@pytest.mark.parametrize("how", ["object", "string", "factory"])
def test_app_by_object_import_string_or_factory(our_asgi: ServeASGI, how: str) -> None:
    from support import asgi_apps
    app, kwargs = {
        "object": (asgi_apps.raw_app, {}),
        "string": ("support.asgi_apps:raw_app", {}),
        "factory": ("support.asgi_apps:make_raw_app", {"factory": True}),
    }[how]
    served = our_asgi(app if how != "object" else app, server_kwargs=kwargs)
    assert get(served.port, "/_ctl/ping").body == b"pong"


def test_wrong_arguments_say_what_to_pass() -> None:
    from cymongoose.serving import AppLoadError
    with pytest.raises(AppLoadError):
        ASGIServer("support.asgi_apps:missing")
    with pytest.raises(ValueError, match="root_path"):
        ASGIServer("support.asgi_apps:raw_app", root_path="api/")
    with pytest.raises(ValueError, match="lifespan"):
        ASGIServer("support.asgi_apps:raw_app", lifespan="maybe")
    assert callable(serve)


def test_root_path_is_in_the_scope(our_asgi: ServeASGI) -> None:
    import json
    served = our_asgi(server_kwargs={"root_path": "/api"})
    scope = json.loads(get(served.port, "/api/scope").body)
    assert scope["root_path"] == "/api" and scope["path"] == "/api/scope"


@pytest.fixture
def uvloop_initialised() -> None:
    """uvloop's first loop opens two process-wide descriptors for good; open them before
    the resource baseline is taken."""
    from cymongoose.aio import new_event_loop
    new_event_loop().close()


def test_uvloop_drives_it_too(uvloop_initialised: None, our_asgi: ServeASGI) -> None:
    served = our_asgi(uvloop=True)
    for _ in range(50):
        assert get(served.port, "/_ctl/ping").body == b"pong"


def test_requests_never_cross_a_thread() -> None:
    seen: set[int] = set()

    async def app(scope: dict, receive: object, send: object) -> None:
        seen.add(threading.get_ident())
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore
            await send({"type": "http.response.body", "body": b"x"})  # type: ignore

    async def main() -> None:
        server = ASGIServer(app, lifespan="off")
        port = (await server.start("http://127.0.0.1:0")).local_addr[1]
        for _ in range(20):
            await asyncio.to_thread(get, port, "/")
        await server.stop()
        assert seen == {threading.get_ident()}  # the loop's own thread, every time

    asyncio.run(main())


def test_serve_takes_the_servers_options(tmp_path: Path) -> None:
    """serve() with an access log (JSON lines to stderr), a limit, and max_requests: after
    three answered requests it stops by itself, exit status 0."""
    port = free_port()
    code = ("import logging, sys\n"
            "from cymongoose.access_log import AccessLog\n"
            "from cymongoose.asgi import serve\n"
            "logging.basicConfig(stream=sys.stderr, level=logging.INFO, format='%(message)s')\n"
            f"serve('support.asgi_apps:raw_app', 'http://127.0.0.1:{port}', lifespan='off',\n"
            "      access_log=AccessLog(as_json=True), max_requests=3, max_uri_size=100)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=TESTS_DIR, env=env,
                            stderr=subprocess.PIPE, text=True)
    try:
        def first_answer() -> int:
            try:
                return get(port, "/echo?first").status
            except OSError:
                assert proc.poll() is None, "the server exited"
                return 0

        status = wait_for(first_answer, 20, "the first answer", interval=0.05)
        assert status == 200
        assert get(port, "/" + "u" * 200).status == 414  # the limit reached the listener
        assert get(port, "/echo?second").status == 200
        assert get(port, "/echo?third").status == 200
        _, err = proc.communicate(timeout=20)  # max_requests=3: it stops by itself
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    logged = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert [(r["path"], r["query"], r["status"]) for r in logged if r["path"] == "/echo"] == [
        ("/echo", "first", 200), ("/echo", "second", 200), ("/echo", "third", 200)], err
