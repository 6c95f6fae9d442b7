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


@dataclass
class Precompressed:
    page: bytes  # pc/page.txt, with .gz, .br and .zst siblings
    gz: bytes
    br: bytes
    zst: bytes
    plain: bytes  # pc/plain.txt: no sibling
    mtime: int  # of every file here, fixed so that both servers' ETags are comparable


def add_precompressed(root: Path) -> Precompressed:
    """pc/ under `root`: a page with precompressed siblings (gzip for real; the br and zstd
    bodies are stand-ins, a server sends them as they are) and a file without any, and a
    directory with an index page (for the redirect to its slash)."""
    import gzip
    import os

    pc = root / "pc"
    (pc / "dir").mkdir(parents=True)
    page = b"".join(b"line %04d of the page\n" % i for i in range(200))
    made = Precompressed(page, gzip.compress(page, mtime=0), b"br-stand-in " * 30,
                         b"zstd-stand-in " * 25, b"0123456789abcdefghij\n", 1700000000)
    for name, data in (("page.txt", made.page), ("page.txt.gz", made.gz),
                       ("page.txt.br", made.br), ("page.txt.zst", made.zst),
                       ("plain.txt", made.plain), ("dir/index.html", b"<a href=x>x</a>\n")):
        (pc / name).write_bytes(data)
        os.utime(pc / name, (made.mtime, made.mtime))
    return made
