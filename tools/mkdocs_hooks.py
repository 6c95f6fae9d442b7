"""mkdocs hooks for the docs site: the benchmark results (tests/benchmarks/results/, written
by `make bench`) become the Benchmarks page with its chart, without copies kept in docs/; the
site's title carries the version, read from where it is written once."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "tests" / "benchmarks" / "results"
# docs/performance.md links the committed results by their paths in the repository, which
# GitHub resolves; the site has them as results.svg (added below) and the Benchmarks page.
SITE_LINKS = {"](../tests/benchmarks/results/results.svg)": "](results.svg)",
              "](../tests/benchmarks/results/results.md)": "](benchmarks.md)"}


def on_config(config: Any) -> Any:
    init = (ROOT / "src" / "cymongoose" / "__init__.py").read_text(encoding="utf-8")
    version = re.search(r'^__version__ = "([^"]+)"', init, re.MULTILINE)
    assert version, "src/cymongoose/__init__.py must set __version__"
    config["site_name"] = f"{config['site_name']} {version.group(1)}"
    return config


def on_files(files: Files, config: Any) -> Files:
    table = (RESULTS / "results.md").read_text(encoding="utf-8")
    title, _, rest = table.partition("\n")
    page = (f"{title}\n\n![Benchmark chart](results.svg)\n{rest}\n\n"
            "How these are measured, and what the figures mean: "
            "[Performance](performance.md).\n")
    files.append(File.generated(config, "benchmarks.md", content=page))
    files.append(File.generated(config, "results.svg",
                                content=(RESULTS / "results.svg").read_bytes()))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    # Only pages at the top of docs/ (all of them today): the links are relative to it.
    if "/" in page.file.src_uri:
        return markdown
    for repo_link, site_link in SITE_LINKS.items():
        markdown = markdown.replace(repo_link, site_link)
    return markdown
