"""`cymongoose APP` and `python -m cymongoose APP`: serve a WSGI, ASGI or raw-handler app.

The options are the settings table of config.py: every one can also come from a
`CYMONGOOSE_<OPTION>` environment variable (`--log-level` is `CYMONGOOSE_LOG_LEVEL`; flags take
1/true/yes or 0/false/no; repeatable options take a comma-separated list); the command line
wins. Which process does what:

- one worker: this process serves (process/serve.py);
- `--workers N`, `--max-requests`, `--workers-max-rss` or `--metrics`: this process
  supervises N worker processes sharing one listening socket (process/supervisor.py) and
  never imports the app;
- `--reload`: this process watches the files and restarts a serving child on changes.

A wrong app, a bad option or a port in use is one line on stderr and exit status 2; an ASGI
app whose lifespan startup fails, exit status 3 (as uvicorn).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from collections.abc import Sequence
from typing import NoReturn

from . import __version__
from ._mongoose import MONGOOSE_VERSION, TLS_ENGINE
from .config import SETTINGS, Config, Setting
from .errors import ConfigError

EXIT_USAGE = 2

# The argparse groups of --help, by the group names of the settings table.
_GROUPS = {"app": "app", "binding": "binding", "processes": "processes", "logging": "logging",
           "proxies": "proxies", "operations": "operations (docs/operations.md)",
           "limits": "limits (docs/server-behaviour.md; 0 turns a timeout off)"}


class _Parser(argparse.ArgumentParser):
    """Usage mistakes (an unknown option, a missing value) are one line and exit status 2,
    like every other mistake."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"{message} (see cymongoose --help)")


def _version_line() -> str:
    """What a bug report needs: ours, the Mongoose inside, the TLS engine, the Python."""
    return (f"cymongoose {__version__} (Mongoose {MONGOOSE_VERSION}, TLS {TLS_ENGINE}, "
            f"{platform.python_implementation()} {platform.python_version()})")


def _help(setting: Setting) -> str:
    if setting.hidden:
        return argparse.SUPPRESS
    text = setting.help
    default = setting.default_text().strip("`")
    if default and setting.kind is not bool:
        text += f"; default {default}"
    return text.replace("%", "%%")


def _parser() -> argparse.ArgumentParser:
    """The command line, from the settings table. Values stay strings here: Config converts
    and checks them, so a flag and its variable get the same words. Options not given are
    absent from the result (argument_default=SUPPRESS), so a variable can fill them in."""
    p = _Parser(
        prog="cymongoose", argument_default=argparse.SUPPRESS,
        description="Serve a WSGI app (Flask, Django...), an ASGI app (FastAPI, Starlette...) "
                    "or a raw cymongoose handler. Every option also reads CYMONGOOSE_<OPTION>.")
    groups = {name: p.add_argument_group(title) for name, title in _GROUPS.items()}
    for s in SETTINGS:
        where = groups.get(s.group, p)
        if s.positional:
            p.add_argument(s.name, nargs="?", help=_help(s))
        elif s.kind is bool:
            action = argparse.BooleanOptionalAction if s.negatable else "store_true"
            where.add_argument(s.flag, dest=s.name, action=action, help=_help(s))
        else:
            where.add_argument(s.flag, dest=s.name, metavar=s.metavar_text, help=_help(s),
                               action="append" if s.kind is tuple else "store")
    p.add_argument("--version", action="version", version=_version_line())
    return p


def parse_args(argv: Sequence[str] | None) -> Config:
    """The Config of this command line and the CYMONGOOSE_* variables."""
    flags = vars(_parser().parse_args(argv))
    config = Config.from_command_line(flags, os.environ)
    if not config.app and not config.proxy:
        raise ConfigError("give the app as module:attribute (or set CYMONGOOSE_APP), or "
                          "--proxy routes for a pure reverse proxy")
    return config


def main(argv: Sequence[str] | None = None) -> int:
    raw_argv = list(sys.argv[1:] if argv is None else argv)
    try:
        config = parse_args(raw_argv)
        # Started by a supervisor (a status pipe; the shared socket, or with --reuse-port a
        # socket of its own) or by the reloader (the socket): never a supervisor itself.
        worker = config.worker_socket is not None or config.worker_status is not None
        if config.reload and not worker:
            from .process.reloader import run_reloader
            return run_reloader(config, raw_argv)
        if not worker and config.supervised:
            from .process.supervisor import Supervisor
            return Supervisor(config, raw_argv).run()
        from .process.serve import serve_process
        return serve_process(config)
    except ConfigError as exc:
        print(f"cymongoose: {exc}", file=sys.stderr, flush=True)
        return exc.exit_status  # EXIT_USAGE, or 3 when the app's startup failed


if __name__ == "__main__":
    sys.exit(main())
