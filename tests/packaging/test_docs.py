"""The docs site builds with `mkdocs build --strict` (every page, the API reference from the
.pyi and the public modules, with only the names they export, the benchmark chart), and every
Python sample in docs/*.md runs.

How samples run, page by page, each in a fresh interpreter in a scratch directory:
- a block that starts with `# name.py` is that file: it is written there (and imported, or
  run when it serves); `# serve.py, next to manage.py` gets a Django project beside it;
- other blocks run after the page's earlier blocks (their serving lines left out), so a
  fragment may use what the page defined before; `from cymongoose import *` and a do-nothing
  `handler(conn, ev, data)` come first, for fragments that only show a call;
- a block that serves (`.run()`, `serve(`) must answer an HTTP request, then stop on SIGINT
  with exit status 0. Ports are replaced by free ones and 0.0.0.0 by 127.0.0.1.
"""

from __future__ import annotations

import http.client
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.ports import free_port
from support.source_version import source_version
from support.subprocess_env import child_env
from support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(p.name for p in DOCS.glob("*.md"))
SERVES = re.compile(r"\.run\(|\bserve\(")
PRELUDE = ("from cymongoose import *  # noqa\n\n"
           "def handler(conn, ev, data):\n    pass\n\n")

pytestmark = pytest.mark.timeout(120)


def test_site_builds_strictly(tmp_path: Path) -> None:
    env = child_env()
    env["NO_MKDOCS_2_WARNING"] = "1"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d",
                           str(tmp_path / "site")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=110)
    assert done.returncode == 0, done.stderr[-3000:]
    site = tmp_path / "site"
    for page in PAGES:
        name = page.removesuffix(".md")
        assert (site / ("index.html" if name == "index" else f"{name}/index.html")).exists()
    api = (site / "api" / "index.html").read_text()
    for name in ("cymongoose._mongoose.Manager.listen", "cymongoose._mongoose.listen_fd",
                 "cymongoose.wsgi.WSGIServer", "cymongoose.wsgi.WSGIServer.run",
                 "cymongoose.asgi.ASGIServer", "cymongoose.asgi.serve",
                 "cymongoose.static_files.StaticFiles", "cymongoose.proxy_headers.ProxyHeaders"):
        assert f'id="{name}"' in api, name
    # Only what the modules export: the servers' C helpers say so in their docstrings.
    assert "not a user API" not in api
    assert 'id="cymongoose._mongoose.WSGILoop"' not in api
    assert (site / "results.svg").exists()
    assert f"<title>cymongoose {source_version()}</title>" in (site / "index.html").read_text()
    for name in ("benchmarks", "performance"):
        assert 'src="../results.svg"' in (site / name / "index.html").read_text(), name


def _blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), re.S)


@pytest.mark.parametrize("page", [p for p in PAGES if _blocks(p)])
def test_samples_run(page: str, tmp_path: Path) -> None:
    ports: dict[str, str] = {}

    def localize(code: str) -> str:
        # A port in a URL (":8000"), a keyword ("port=8000") or an address tuple
        # ("0.0.0.0", 8000).
        def repl(m: re.Match[str]) -> str:
            return m.group(1) + ports.setdefault(m.group(2), str(free_port()))
        return re.sub(r"(:|port=|\", )(8\d\d\d|9\d\d\d)\b", repl,
                      code.replace("0.0.0.0", "127.0.0.1"))

    earlier = ""
    for block in _blocks(page):
        code = localize(block)
        first = code.splitlines()[0]
        named = re.match(r"# (\w+\.py)\b", first)
        if named:
            if "next to manage.py" in first:
                subprocess.run([sys.executable, "-m", "django", "startproject", "mysite",
                                str(tmp_path)], check=True, env=child_env(), timeout=60)
            (tmp_path / named.group(1)).write_text(code)
            if SERVES.search(code):
                _serves(tmp_path, [named.group(1)], ports, code)
            else:
                _runs(tmp_path, ["-c", f"import {named.group(1)[:-3]}"], code)
            continue
        script = PRELUDE + earlier + code
        if SERVES.search(code):
            (tmp_path / "sample.py").write_text(script)
            _serves(tmp_path, ["sample.py"], ports, code)
        else:
            _runs(tmp_path, ["-c", script], code)
        earlier += "\n".join(ln for ln in code.splitlines() if not SERVES.search(ln)) + "\n"


def _runs(cwd: Path, args: list[str], code: str) -> None:
    done = subprocess.run([sys.executable, *args], cwd=cwd, env=child_env(str(cwd)),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{code}\n---\n{done.stderr[-2000:]}"


def _serves(cwd: Path, args: list[str], ports: dict[str, str], code: str) -> None:
    used = [ports[p] for p in sorted(ports) if re.search(rf"\b{ports[p]}\b", code)]
    assert used, f"a serving sample without a port:\n{code}"
    proc = subprocess.Popen([sys.executable, *args], cwd=cwd, env=child_env(str(cwd)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def answer() -> int:
            try:
                c = http.client.HTTPConnection("127.0.0.1", int(used[0]), timeout=5)
                c.request("GET", "/")
                status = c.getresponse().status
                c.close()
                return status
            except OSError:
                assert proc.poll() is None, f"{code}\n---\n{proc.communicate()[1][-2000:]}"
                return 0

        status = wait_for(answer, 30, lambda: f"an answer from the sample:\n{code}",
                          interval=0.1)
        assert 100 <= status < 600
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, f"{code}\n---\n{err[-2000:]}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
