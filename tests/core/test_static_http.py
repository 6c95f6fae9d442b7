"""Raw `serve_dir` answering static-file requests as nginx does (`gzip_static on`) on the
same tree: ranges (suffix included), 416, If-Range, ETag/If-None-Match, If-Modified-Since,
precompressed siblings with Vary, 405, the redirect to a directory's slash with its query,
404 for a file URL with a slash; and its options (extra_headers, page404, mime_types) on
every answer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.http_client import get
from support.nginx import nginx_static, start_nginx, stop_nginx
from support.ports import free_port
from support.static_cases import NGINX_GZIP_STATIC, check_our_choices, compare_with_nginx
from support.static_tree import Precompressed, add_precompressed
from support.subprocess_env import tool_env

from cymongoose import MG_EV_HTTP_MSG, Connection

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def files(tmp_path: Path) -> Precompressed:
    return add_precompressed(tmp_path / "public")


@pytest.fixture
def nginx(tmp_path: Path, files: Precompressed) -> Iterator[int]:
    port = free_port()
    proc = start_nginx(tmp_path, nginx_static(port, tmp_path / "public", "/s",
                                              NGINX_GZIP_STATIC), port, tool_env())
    try:
        yield port
    finally:
        stop_nginx(proc)


def _raw(server_thread: Any, root: Path, **serve: Any) -> int:
    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            conn.serve_dir(msg, f"/s={root}", **serve)

    st = server_thread(handler)
    port: int = st.listen()
    st.start()
    return port


def test_raw_ranges_match_nginx(server_thread: Any, tmp_path: Path, files: Precompressed,
                                nginx: int) -> None:
    port = _raw(server_thread, tmp_path / "public")
    compare_with_nginx(port, nginx, "/s", files)
    check_our_choices(port, "/s", files)


def test_raw_directory_redirect_keeps_the_query(server_thread: Any, tmp_path: Path,
                                                files: Precompressed) -> None:
    port = _raw(server_thread, tmp_path / "public")
    r = get(port, "/s/pc/dir?a=1&b=%20")
    assert r.status == 301 and r.header("location") == "/s/pc/dir/?a=1&b=%20"
    assert get(port, r.header("location") or "").body == b"<a href=x>x</a>\n"


def test_raw_options_on_every_answer(server_thread: Any, tmp_path: Path,
                                     files: Precompressed) -> None:
    root = tmp_path / "public"
    (root / "missing.html").write_bytes(b"<p>no such page</p>\n")
    port = _raw(server_thread, root, extra_headers="X-Static: yes",
                mime_types="txt=text/x-test", page404=str(root / "missing.html"))
    r = get(port, "/s/pc/plain.txt")
    assert r.header("content-type") == "text/x-test" and r.header("x-static") == "yes"
    # page404 stands in for a missing file, as a 404 (Mongoose 7.23 sent it as a 200).
    r = get(port, "/s/pc/nope.txt")
    assert r.status == 404 and r.body == b"<p>no such page</p>\n"
    assert r.header("x-static") == "yes" and r.header("date")
    for target, headers, status in (("/s/pc/plain.txt", [("Range", "bytes=999-")], 416),
                                    ("/s/pc/dir", [], 301), ("/s/pc/", [], 403)):
        r = get(port, target, headers)
        assert r.status == status and r.header("x-static") == "yes", target
        assert r.header("date"), target
