"""`--static` in front of a WSGI and an ASGI app, against nginx serving the same tree: `%00`
in a path is a 400 from the server (it was a 500 and a traceback per request), an index file
that is a symlink out of the mount is not served (the same file by its own URL never was),
and a directory without an index is not listed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pytest
from support.cli_run import CLI
from support.http_client import get, get_as_sent
from support.nginx import nginx_static, start_nginx, stop_nginx
from support.ports import free_port
from support.static_tree import StaticTree, make_static_tree
from support.subprocess_env import tool_env

from cymongoose.static_files import StaticFiles

pytestmark = pytest.mark.timeout(90)

ASGI_APP = '''
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"app:" + scope["path"].encode()})
'''

NUL_TARGETS = ["/s/img/.env%00.png", "/s/img/a.png%00", "/s/%00", "/s/img/.env%00"]


@pytest.fixture
def tree(tmp_path: Path) -> StaticTree:
    return make_static_tree(tmp_path)


@pytest.fixture(params=["wsgi", "asgi"])
def served(request: pytest.FixtureRequest, tmp_path: Path,
           tree: StaticTree) -> Iterator[tuple[int, CLI]]:
    (tmp_path / "asgi_hello.py").write_text(ASGI_APP)
    app = "cli_app:app" if request.param == "wsgi" else "asgi_hello:app"
    port = free_port()
    cli = CLI(tmp_path, app, "--port", str(port), "--static", f"/s={tree.root}")
    try:
        cli.wait_http(port)
        yield port, cli
    finally:
        cli.stop()


@pytest.fixture
def nginx(tmp_path: Path, tree: StaticTree) -> Iterator[int]:
    port = free_port()
    proc = start_nginx(tmp_path, nginx_static(port, tree.root, "/s"), port, tool_env())
    try:
        yield port
    finally:
        stop_nginx(proc)


def test_nul_in_a_path_is_400_and_logs_nothing(served: tuple[int, CLI], tree: StaticTree,
                                               nginx: int) -> None:
    port, cli = served
    for target in NUL_TARGETS:
        ours, theirs = get_as_sent(port, target), get_as_sent(nginx, target)
        assert (ours.status, theirs.status) == (400, 400), (target, ours.body)
        assert tree.secret not in ours.body
    assert get(port, "/s/img/a.png").status == 200  # and it goes on serving
    assert get(port, "/app%00").status == 400  # the app's paths too: one rule for a path
    assert cli.stop() == 0
    assert "Traceback" not in cli.err and "embedded null" not in cli.err, cli.err


def test_an_index_symlink_out_of_the_mount_is_not_served(served: tuple[int, CLI],
                                                         tree: StaticTree) -> None:
    port, _ = served
    for target in ("/s/link/", "/s/link/index.html"):
        r = get(port, target)
        assert r.status == 404 and tree.outside not in r.body, target
    # A symlink that stays inside the mount is served, as any file there.
    inner = get(port, "/s/inner/")
    assert inner.status == 200 and inner.body == (tree.root / "img" / "a.png").read_bytes()


def test_a_directory_without_index_is_not_listed(served: tuple[int, CLI]) -> None:
    port, _ = served
    r = get(port, "/s/sub/")
    assert r.status == 404 and b"f.txt" not in r.body
    assert get(port, "/s/sub/f.txt").body == b"listed\n"


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - wsgiref's name
        pass


def test_the_middleware_refuses_nul_behind_another_server(tree: StaticTree) -> None:
    # StaticFiles is public middleware: behind a server that lets `%00` through (wsgiref
    # decodes it into PATH_INFO), it answers 400 itself instead of failing.
    app = StaticFiles(lambda environ, start: [], [("/s", str(tree.root))])
    server = make_server("127.0.0.1", 0, app, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        r = get_as_sent(server.server_port, "/s/img/.env%00.png")
        assert r.status == 400 and tree.secret not in r.body
        assert get_as_sent(server.server_port, "/s/img/a.png").status == 200
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
