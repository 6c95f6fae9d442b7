"""--loop-threads on the interpreter the suite runs on: its checks, and the refusal where
the GIL is on (a GIL-enabled build, or a free-threaded one that turned it back on). The
serving itself is tested on a free-threaded Python with the GIL off
(test_loop_threads_ft.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support.cli_run import cli_env, run_cli

from cymongoose.config import Config
from cymongoose.errors import ConfigError

pytestmark = pytest.mark.timeout(60)

_GIL_ON = getattr(sys, "_is_gil_enabled", lambda: True)()
gil_on = pytest.mark.skipif(not _GIL_ON, reason="the GIL is off here: the option is allowed")


@gil_on
def test_more_than_one_loop_with_the_gil_on_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = run_cli(tmp_path, "cli_app:app", "--loop-threads", "2", "--port", "0")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("cymongoose: --loop-threads 2 runs event loops in parallel"), lines
    assert "GIL" in lines[0]


@gil_on
def test_the_variable_is_refused_the_same_way(tmp_path: Path) -> None:
    done = run_cli(tmp_path, "cli_app:app", "--port", "0",
                   env=cli_env(CYMONGOOSE_LOOP_THREADS="3"))
    assert done.returncode == 2
    assert done.stderr.startswith("cymongoose: CYMONGOOSE_LOOP_THREADS 3 runs event loops")


@gil_on
def test_the_keyword_is_refused_the_same_way() -> None:
    with pytest.raises(ConfigError, match=r"^loop_threads 2 runs event loops .*GIL"):
        Config(app="cli_app:app", loop_threads=2)


def test_one_loop_is_the_default_and_allowed_everywhere() -> None:
    assert Config().loop_threads == 1
    assert Config(app="cli_app:app", loop_threads=1).loop_threads == 1


@pytest.mark.parametrize(("args", "message"), [
    (("--loop-threads", "0"), "cymongoose: --loop-threads must be an int >= 1, not 0"),
    (("--loop-threads", "two"), "cymongoose: --loop-threads must be an int >= 1, not 'two'"),
    (("--loop-threads",), "cymongoose: argument --loop-threads: expected one argument"),
])
def test_a_wrong_value_is_the_tables_one_line(tmp_path: Path, args: tuple[str, ...],
                                              message: str) -> None:
    done = run_cli(tmp_path, "cli_app:app", "--port", "0", *args)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [message] or done.stderr.startswith(message), \
        done.stderr


def test_a_keyword_of_the_wrong_type_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="loop_threads must be an int >= 1"):
        Config(loop_threads="2")  # type: ignore[arg-type]
