"""`import cymongoose` stays cheap: asyncio (more than half of the package's import time
when it was imported eagerly) loads only with what drives an asyncio loop, and the names
imported on first use (cymongoose.aio's AsyncManager, cymongoose.proxy's ReverseProxy,
cymongoose.server's Server) are still there for `from cymongoose import X`. Each case runs
in a fresh interpreter, since this one has long imported everything."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(120)


def _run(code: str) -> str:
    """What `code` prints, run by a fresh interpreter."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True).stdout.strip()


def _modules_after(statement: str) -> set[str]:
    """sys.modules' names after `statement`, in a fresh interpreter."""
    loaded: list[str] = ast.literal_eval(
        _run(f"import sys\n{statement}\nprint(sorted(sys.modules))"))
    return set(loaded)


@pytest.mark.parametrize("statement", ["import cymongoose", "import cymongoose.wsgi"])
def test_import_leaves_asyncio_out(statement: str) -> None:
    assert "asyncio" not in _modules_after(statement)


def test_import_cymongoose_defers_what_only_some_calls_need() -> None:
    # socket: listen_fd(); json: reply_json(), Rpc (tests/core runs those calls).
    assert not {"asyncio", "socket", "json"} & _modules_after("import cymongoose")


def test_what_needs_asyncio_still_gets_it() -> None:
    for statement in ("import cymongoose.asgi", "from cymongoose import AsyncManager"):
        assert "asyncio" in _modules_after(statement), statement


def test_every_public_name_imports_by_name_and_by_star() -> None:
    out = _run("import cymongoose\n"
               "missing = []\n"
               "for name in cymongoose.__all__:\n"
               "    try:\n"
               "        exec(f'from cymongoose import {name}', {})\n"
               "    except ImportError:\n"
               "        missing.append(name)\n"
               "star = {}\n"
               "exec('from cymongoose import *', star)\n"
               "print(missing, sorted(set(cymongoose.__all__) - set(star)))")
    assert out == "[] []"


def test_lazy_names_are_the_submodules_objects() -> None:
    out = _run("import cymongoose, cymongoose.aio, cymongoose.proxy, cymongoose.server\n"
               "print(cymongoose.AsyncManager is cymongoose.aio.AsyncManager,\n"
               "      cymongoose.ReverseProxy is cymongoose.proxy.ReverseProxy,\n"
               "      cymongoose.Server is cymongoose.server.Server,\n"
               "      {'AsyncManager', 'ReverseProxy', 'Server', 'aio', 'proxy', 'server'}\n"
               "      <= set(dir(cymongoose)))")
    assert out.split() == ["True", "True", "True", "True"]
    out = _run("import cymongoose\n"
               "try:\n"
               "    cymongoose.no_such_name\n"
               "except AttributeError as exc:\n"
               "    print(exc)\n")
    assert out == "module 'cymongoose' has no attribute 'no_such_name'"
