"""README.md is also the project's page on the package index, which resolves no relative
link: every link and image there is absolute, or an anchor of the same page. A link into
this repository uses one of the two bases below, and the file it names must exist in the
checkout, so renaming or removing a doc breaks this test rather than the page.

Also: the README says how to install, CHANGELOG.md opens with the version being built, and
the container recipe of docs/deployment.md installs cymongoose from a wheel.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.source_version import source_version

pytestmark = pytest.mark.no_asan

ROOT = Path(__file__).resolve().parents[2]
BLOB = "https://github.com/cymongoose/cymongoose/blob/main/"
RAW = "https://raw.githubusercontent.com/cymongoose/cymongoose/main/"
OURS = re.compile(r"https?://(?:www\.)?(?:github\.com|raw\.githubusercontent\.com)"
                  r"/cymongoose/cymongoose(?![\w.-])", re.I)
FENCED = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.S)
COMMENT = re.compile(r"<!--.*?-->", re.S)
INLINE = re.compile(r"\]\(\s*<?([^)\s>]+)")                   # [text](x), ![alt](x "title")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)   # [id]: x
HTML = re.compile(r"""\b(?:href|src)\s*=\s*["']([^"']+)["']""", re.I)


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _targets(markdown: str) -> list[str]:
    """Every link and image target of a Markdown text, code blocks and spans left out."""
    prose = CODE_SPAN.sub("", FENCED.sub("", COMMENT.sub("", markdown)))
    return [*INLINE.findall(prose), *REFERENCE.findall(prose), *HTML.findall(prose)]


def _repo_path(target: str) -> str | None:
    """The path inside the repository that `target` names under one of our two bases,
    without its #fragment or ?query; None when it uses neither base."""
    for base in (BLOB, RAW):
        if target.startswith(base):
            return re.split(r"[#?]", target[len(base):], maxsplit=1)[0]
    return None


def test_the_link_finder_sees_links_images_and_references_but_not_code() -> None:
    sample = ("See [a](docs/a.md), ![b](img/b.svg \"title\") and [![c](c.png)](https://x/c).\n"
              "[ref]: ../d.md\n<img src=\"e.png\"> <a href='#f'>f</a>\n"
              "`[not](a-link)` and\n```python\nx = y[0](z)\n```\n<!-- [nor](this) -->\n")
    assert sorted(_targets(sample)) == sorted(
        ["docs/a.md", "img/b.svg", "c.png", "https://x/c", "../d.md", "e.png", "#f"])


def test_every_readme_link_is_absolute_or_an_anchor() -> None:
    targets = _targets(_text(ROOT / "README.md"))
    assert len(targets) >= 5, f"the link finder found too few links: {targets}"
    relative = [t for t in targets if not re.match(r"(https?://|#)", t)]
    assert not relative, ("relative links do not resolve on the package index; write "
                          f"{BLOB}<path> (or {RAW}<path> for an image): {relative}")


def test_readme_links_into_the_repository_use_its_base_and_existing_files() -> None:
    wrong, missing = [], []
    for target in _targets(_text(ROOT / "README.md")):
        if not OURS.match(target):
            continue
        path = _repo_path(target)
        if not path or "://" in path:
            wrong.append(target)
        elif not (ROOT / path).exists():
            missing.append(path)
    assert not wrong, f"links into the repository must start with {BLOB} or {RAW}: {wrong}"
    assert not missing, f"README.md links files that are not in the checkout: {missing}"


def test_readme_says_how_to_install_the_version_it_describes() -> None:
    """The index holds 0.2.5 (no command line, no `cli` extra): an install line without a
    version would install that; with `>=0.3` pip refuses until 0.3 is published."""
    readme = _text(ROOT / "README.md")
    lines = re.findall(r"^\s*pip install\b.*\bcymongoose\b.*$", readme, re.M)
    assert "pip install 'cymongoose>=0.3'" in [line.strip() for line in lines], \
        "README.md has no `pip install 'cymongoose>=0.3'` line"
    unversioned = [line for line in lines
                   if re.search(r"\bcymongoose(\[\w+\])?(?![\w\[>=<~!-])", line)
                   and "./" not in line]
    assert not unversioned, f"install lines that would take 0.2.5 from the index: {unversioned}"


def test_changelog_opens_with_this_version() -> None:
    version = source_version()
    headings = re.findall(r"^## (.*)$", _text(ROOT / "CHANGELOG.md"), re.M)
    assert headings, "CHANGELOG.md has no `## ` heading"
    assert re.fullmatch(rf"{re.escape(version)}(?: \(\d{{4}}-\d\d-\d\d\))?", headings[0]), (
        f"CHANGELOG.md's first entry is `## {headings[0]}`; the package is {version}: "
        f"write `## {version} (YYYY-MM-DD)` above it")


def test_the_container_recipe_installs_cymongoose_from_a_wheel() -> None:
    page = _text(ROOT / "docs" / "deployment.md")
    blocks = re.findall(r"^```dockerfile\n(.*?)^```", page, re.M | re.S)
    assert blocks, "docs/deployment.md has no ```dockerfile block"
    installs = [line for block in blocks for line in block.splitlines()
                if re.match(r"RUN\b.*\bpip install\b.*\bcymongoose\b", line)]
    assert installs, "no Dockerfile line of docs/deployment.md installs cymongoose"
    by_name = [line for line in installs if "--find-links" not in line and ".whl" not in line]
    assert not by_name, f"cymongoose installed by name instead of from a wheel: {by_name}"


def _instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments out."""
    joined = re.sub(r"\\\n\s*", " ", dockerfile)
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1])
            for line in joined.splitlines() if line.strip() and not line.startswith("#")]


def test_the_container_recipe_runs_unprivileged_with_static_files_and_a_health_check() -> None:
    """A non-root USER before CMD; Django's collectstatic into the directory --static serves;
    a HEALTHCHECK that asks the path the server answers itself (--health-path)."""
    page = _text(ROOT / "docs" / "deployment.md")
    (block,) = re.findall(r"^```dockerfile\n(.*?)^```", page, re.M | re.S)
    steps = _instructions(block)
    kinds = [kind for kind, _ in steps]
    users = [args.strip() for kind, args in steps if kind == "USER"]
    assert users and users[-1] not in ("root", "0"), "the recipe runs as root"
    assert kinds.index("USER") < kinds.index("CMD")
    runs = [args for kind, args in steps if kind == "RUN"]
    assert [r for r in runs if "manage.py collectstatic --noinput" in r], "no collectstatic"
    (cmd,) = [args for kind, args in steps if kind == "CMD"]
    argv = json.loads(cmd)
    health = argv[argv.index("--health-path") + 1]
    static_dir = argv[argv.index("--static") + 1].split("=", 1)[1]
    (check,) = [args for kind, args in steps if kind == "HEALTHCHECK"]
    assert re.search(rf"CMD \[.*'http://127\.0\.0\.1:8000{re.escape(health)}'", check), check
    assert static_dir in block.split("collectstatic", 1)[0].rsplit("\n", 2)[-2], (
        "the collectstatic comment names a directory --static does not serve")
