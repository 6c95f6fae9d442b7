"""`--static` in front of a WSGI and an ASGI app answering static-file requests as nginx
(`gzip_static on`) and raw `serve_dir` do, on the same tree (tests/support/static_cases.py):
ranges, conditionals, precompressed siblings with Vary, 405, the redirect to a directory's
slash; and a sibling that links out of the mount is never sent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli_run import CLI
from support.http_client import get
from support.nginx import nginx_static, start_nginx, stop_nginx
from support.ports import free_port
from support.static_cases import NGINX_GZIP_STATIC, check_our_choices, compare_with_nginx
from support.static_tree import Precompressed, add_precompressed
from support.subprocess_env import tool_env

pytestmark = pytest.mark.timeout(90)

ASGI_APP = '''
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"app"})
'''


@pytest.fixture
def files(tmp_path: Path) -> Precompressed:
    return add_precompressed(tmp_path / "public")


@pytest.fixture(params=["wsgi", "asgi"])
def served(request: pytest.FixtureRequest, tmp_path: Path,
           files: Precompressed) -> Iterator[int]:
    (tmp_path / "asgi_hello.py").write_text(ASGI_APP)
    app = "cli_app:app" if request.param == "wsgi" else "asgi_hello:app"
    port = free_port()
    cli = CLI(tmp_path, app, "--port", str(port), "--static", f"/s={tmp_path / 'public'}")
    try:
        cli.wait_http(port)
        yield port
    finally:
        assert cli.stop() == 0
        assert "Traceback" not in cli.err, cli.err


@pytest.fixture
def nginx(tmp_path: Path, files: Precompressed) -> Iterator[int]:
    port = free_port()
    proc = start_nginx(tmp_path, nginx_static(port, tmp_path / "public", "/s",
                                              NGINX_GZIP_STATIC), port, tool_env())
    try:
        yield port
    finally:
        stop_nginx(proc)


def test_static_answers_match_nginx(served: int, files: Precompressed, nginx: int) -> None:
    compare_with_nginx(served, nginx, "/s", files)
    check_our_choices(served, "/s", files)


def test_a_sibling_linking_out_of_the_mount_is_not_sent(served: int, tmp_path: Path,
                                                        files: Precompressed) -> None:
    outside = tmp_path / "outside.gz"
    outside.write_bytes(b"not for the client\n")
    (tmp_path / "public" / "pc" / "plain.txt.gz").symlink_to(outside)
    r = get(served, "/s/pc/plain.txt", [("Accept-Encoding", "gzip")])
    assert r.status == 200 and r.body == files.plain and r.header("content-encoding") is None
