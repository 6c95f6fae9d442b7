"""What `serve_dir` gives away, raw handler against nginx serving the same tree: `%00` in a
path is a 400 before any handler runs (it once cut the file name in C, so `.env%00.png`
passed a `.png` check and served `.env`), `serve_dir` refuses it itself on a message the
guard never saw, and directories are listed only when asked, without dotfiles or a version."""

from __future__ import annotations

import select
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.http_client import HttpConnection, get, get_as_sent
from support.nginx import nginx_static, start_nginx, stop_nginx
from support.ports import free_port
from support.static_tree import StaticTree, make_static_tree
from support.subprocess_env import tool_env
from support.waiting import recv_until, wait_for

from cymongoose import MG_EV_HTTP_MSG, Connection, Manager

pytestmark = pytest.mark.timeout(60)

NUL_TARGETS = ["/img/.env%00.png", "/img/.ENV%00.png", "/img/a.png%00", "/img/%00",
               "http://127.0.0.1/img/.env%00.png"]


def _images_only(root: Path, **serve: Any) -> Any:
    """A handler that serves images only, checking the URI as apps do."""
    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            if msg.uri.startswith("/img/") and not msg.uri.endswith(".png"):
                conn.reply(403, b"images only\n")
            else:
                conn.serve_dir(msg, str(root), **serve)
    return handler


@pytest.fixture
def tree(tmp_path: Path) -> StaticTree:
    return make_static_tree(tmp_path)


@pytest.fixture
def nginx(tmp_path: Path, tree: StaticTree) -> Iterator[int]:
    port = free_port()
    proc = start_nginx(tmp_path, nginx_static(port, tree.root), port, tool_env())
    try:
        yield port
    finally:
        stop_nginx(proc)


def test_nul_in_a_path_is_400_before_the_handler(server_thread: Any, tree: StaticTree,
                                                  nginx: int) -> None:
    seen: list[str] = []
    serve = _images_only(tree.root)

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            seen.append(msg.uri)
        serve(conn, ev, msg)

    st = server_thread(handler)
    port = st.listen()
    st.start()
    for target in NUL_TARGETS:
        ours, theirs = get_as_sent(port, target), get_as_sent(nginx, target)
        assert (ours.status, theirs.status) == (400, 400), target
        assert tree.secret not in ours.body, target
    # A raw NUL never was a valid target byte.
    with HttpConnection(port) as c:
        c.send_raw(b"GET /img/.env\x00.png HTTP/1.1\r\nHost: x\r\n\r\n")
        assert c.read_response().status == 400
    assert seen == []  # no handler ran for any of them
    # The query is the app's to decode (nginx passes it on too), and the server goes on.
    for p in (port, nginx):
        r = get(p, "/img/a.png?name=%00")
        assert r.status == 200 and r.body == (tree.root / "img" / "a.png").read_bytes()
    assert get_as_sent(port, "/img/.env.png").status == 404


def test_serve_dir_refuses_nul_in_a_message_the_guard_never_saw(tree: StaticTree) -> None:
    # A client connection's messages do not pass the server's guard: an app that hands one
    # to serve_dir (a reverse tunnel, say) still gets a 400, not the file cut at the NUL.
    # serve_file's path is the app's own: a NUL in it raises.
    raised: list[str] = []

    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            try:
                conn.serve_file(msg, str(tree.root / "img" / "a.png") + "\0.txt")
            except ValueError as exc:
                raised.append(str(exc))
            conn.serve_dir(msg, str(tree.root))

    with socket.create_server(("127.0.0.1", 0)) as peer:
        mgr = Manager(handler)
        try:
            mgr.connect(f"http://127.0.0.1:{peer.getsockname()[1]}")
            wait_for(lambda: _accepted(peer), 5, "the connection", manager=mgr)
            sock, _ = peer.accept()
            with sock:
                sock.setblocking(False)
                sock.sendall(b"GET /img/.env%00.png HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
                got = recv_until(mgr, sock, lambda read: b"\r\n\r\n" in read, 5,
                                 "serve_dir's answer")
        finally:
            mgr.close()
    assert got.startswith(b"HTTP/1.1 400 "), bytes(got)
    assert tree.secret not in got
    assert raised == ["path must not contain NUL characters"]


def _accepted(listener: socket.socket) -> bool:
    return bool(select.select([listener], [], [], 0)[0])


def test_directories_are_not_listed_unless_asked(server_thread: Any, tree: StaticTree,
                                                 nginx: int) -> None:
    st = server_thread(_images_only(tree.root))
    port = st.listen()
    st.start()
    # nginx's autoindex is off by default: a directory without an index is 403 there too.
    for p in (port, nginx):
        r = get(p, "/sub/")
        assert r.status == 403 and b"f.txt" not in r.body, (p, r.body)
        assert get(p, "/sub/f.txt").body == b"listed\n"


def test_a_listing_has_no_dotfiles_and_no_version(server_thread: Any,
                                                  tree: StaticTree) -> None:
    def handler(conn: Connection, ev: int, msg: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            conn.serve_dir(msg, str(tree.root), directory_listing=True)

    st = server_thread(handler)
    port = st.listen()
    st.start()
    r = get(port, "/sub/")
    assert r.status == 200 and r.header("content-type") == "text/html; charset=utf-8"
    assert b"f.txt" in r.body
    assert b".hidden" not in r.body and b"Mongoose" not in r.body, r.body
    r = get(port, "/img/")
    assert b"a.png" in r.body and b".env" not in r.body
    assert r.header("content-length") == str(len(r.body))
    # HEAD: the same head, no body.
    with HttpConnection(port) as c:
        head = c.request("HEAD", "/sub/")
        assert head.status == 200 and head.body == b""


def test_curl_sees_the_same(server_thread: Any, tree: StaticTree) -> None:
    # curl, which sends `%00` as given: what a scanner sends.
    st = server_thread(_images_only(tree.root))
    port = st.listen()
    st.start()
    out = subprocess.run(
        ["curl", "-s", "--path-as-is", "-o", "-", "-w", "\n%{http_code}",
         f"http://127.0.0.1:{port}/img/.env%00.png"],
        capture_output=True, timeout=20, env=tool_env())
    body, _, status = out.stdout.rpartition(b"\n")
    assert status == b"400" and tree.secret not in body
