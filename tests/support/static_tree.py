"""One directory tree for the static-file tests, served alike by raw `serve_dir`, `--static`
(WSGI and ASGI) and nginx: a dotfile beside an image, a directory without an index (with a
dotfile in it), and index files that are symlinks, one to a file inside the root and one to a
file outside it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class StaticTree:
    root: Path  # the directory served
    secret: bytes  # img/.env: must never leave, whatever the target says
    outside: bytes  # ../outside.html, beside the root: reachable through link/ only


def make_static_tree(tmp: Path) -> StaticTree:
    root = tmp / "public"
    for sub in ("img", "sub", "link", "inner"):
        (root / sub).mkdir(parents=True)
    secret = b"SECRET_KEY=do-not-serve\n"
    (root / "img" / ".env").write_bytes(secret)
    (root / "img" / "a.png").write_bytes(b"\x89PNG not really\n")
    (root / "sub" / "f.txt").write_text("listed\n")
    (root / "sub" / ".hidden").write_text("never listed\n")
    outside = b"<p>outside the root</p>\n"
    (tmp / "outside.html").write_bytes(outside)
    (root / "link" / "index.html").symlink_to(tmp / "outside.html")  # out of the root
    (root / "inner" / "index.html").symlink_to(root / "img" / "a.png")  # inside it
    return StaticTree(root, secret, outside)
