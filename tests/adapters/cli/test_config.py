"""One options table (config.py) for the command line, its CYMONGOOSE_* variables and the
servers' keyword arguments: a bad value is one line naming the option as it arrived, with the
same words each way; 0.2.x's old names still work, with a DeprecationWarning; `--help` lists
every option of the table."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
from support.cli_run import cli_env, run_cli

from cymongoose.asgi import ASGIServer
from cymongoose.config import SETTINGS, Config
from cymongoose.wsgi import WSGIServer

pytestmark = pytest.mark.timeout(60)


def _hello(environ: dict[str, object], start_response: object) -> list[bytes]:
    return [b"hello"]


async def _asgi_hello(scope: object, receive: object, send: object) -> None:
    return None


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("cymongoose: ") and "Traceback" not in err
    return err[len("cymongoose: "):].strip()


# (flag, bad value, what the message says it must be)
CASES = [
    ("--threads", "0", "must be an int >= 1"),
    ("--graceful-timeout", "-1", "must be a number of seconds >= 0"),
    ("--root-path", "api/", "must start with '/' and not end with one (or be empty)"),
    ("--lifespan", "maybe", "must be one of auto, on, off"),
    ("--max-requests", "-2", "must be an int >= 0 (0: no limit)"),
]


@pytest.mark.parametrize("flag,value,words", CASES)
def test_a_bad_value_has_the_same_words_by_flag_variable_or_keyword(
        tmp_path: Path, flag: str, value: str, words: str) -> None:
    name = flag[2:].replace("-", "_")
    by_flag = run_cli(tmp_path, "cli_app:app", flag, value)
    assert by_flag.returncode == 2
    assert _one_line(by_flag.stderr).startswith(f"{flag} {words}, not ")

    variable = f"CYMONGOOSE_{name.upper()}"
    by_variable = run_cli(tmp_path, "cli_app:app", env=cli_env(**{variable: value}))
    assert by_variable.returncode == 2
    assert _one_line(by_variable.stderr) == f"{variable}={value!r} {words}"

    typed: object = value if name in ("root_path", "lifespan") else float(value)
    if name in ("threads", "max_requests"):
        typed = int(value)
    with pytest.raises(ValueError, match=f"^{re.escape(f'{name} {words}')}") as raised:
        Config(**{name: typed})
    assert str(raised.value).startswith(f"{name} {words}, not ")
    server = ASGIServer if name == "lifespan" else WSGIServer
    with pytest.raises(ValueError, match=f"^{re.escape(f'{name} {words}')}"):
        server(_hello, **{name: typed})  # type: ignore[arg-type]


def test_a_keyword_of_the_wrong_type_is_a_type_error_with_the_same_words() -> None:
    with pytest.raises(TypeError, match=r"^threads must be an int >= 1, not '4'$"):
        WSGIServer(_hello, threads="4")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^config must be a Config"):
        ASGIServer(_asgi_hello, config={"lifespan": "off"})  # type: ignore[arg-type]


def test_old_spellings_warn_and_map_onto_the_new_option() -> None:
    with pytest.warns(DeprecationWarning, match=r"WSGIServer\(workers=\.\.\.\).*threads="):
        server = WSGIServer(_hello, 3)
    try:
        assert server.config.threads == 3
    finally:
        server.close()
    with pytest.warns(DeprecationWarning, match="shutdown_timeout.*graceful_timeout="):
        asgi = ASGIServer(_asgi_hello, shutdown_timeout=2)
    assert asgi.config.graceful_timeout == 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new names, and a Config, are quiet
        server = WSGIServer(_hello, threads=2, config=Config(graceful_timeout=1))
        try:
            assert (server.config.threads, server.config.graceful_timeout) == (2, 1.0)
        finally:
            server.close()


def test_help_lists_every_option_of_the_table(tmp_path: Path) -> None:
    done = run_cli(tmp_path, "--help")
    assert done.returncode == 0
    for setting in SETTINGS:
        if not setting.hidden and not setting.positional:
            assert f"{setting.flag} " in done.stdout, setting.flag
    assert "--worker-socket" not in done.stdout


def test_a_usage_mistake_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = run_cli(tmp_path, "cli_app:app", "--no-such-option")
    assert done.returncode == 2
    assert "--no-such-option" in _one_line(done.stderr)


def test_a_proxy_headers_source_without_proxy_headers_is_refused(tmp_path: Path) -> None:
    """Choosing which headers to believe while believing none is a mistake worth a line."""
    done = run_cli(tmp_path, "cli_app:app", "--proxy-headers-source", "forwarded")
    assert done.returncode == 2
    assert _one_line(done.stderr) == "--proxy-headers-source needs --proxy-headers"
    done = run_cli(tmp_path, "cli_app:app", "--proxy-headers", "--proxy-headers-source", "both")
    assert done.returncode == 2
    assert _one_line(done.stderr) == ("--proxy-headers-source must be one of x-forwarded, "
                                      "forwarded, not 'both'")
    with pytest.raises(ValueError, match="^proxy_headers_source must be one of x-forwarded, "):
        Config(proxy_headers=True, proxy_headers_source="both")


def test_a_proxy_headers_host_without_proxy_headers_is_refused(tmp_path: Path) -> None:
    done = run_cli(tmp_path, "cli_app:app", "--proxy-headers-host")
    assert done.returncode == 2
    assert _one_line(done.stderr) == "--proxy-headers-host needs --proxy-headers"
    with pytest.raises(ValueError, match="^proxy_headers_host needs proxy_headers$"):
        Config(proxy_headers_host=True)
    assert not Config(proxy_headers_host=False).proxy_headers_host  # off says nothing
    proxy = Config(proxy_headers=True, proxy_headers_host=True).new_proxy_headers()
    assert proxy is not None and proxy.host
    proxy = Config(proxy_headers=True).new_proxy_headers()
    assert proxy is not None and not proxy.host
