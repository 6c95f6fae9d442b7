"""`cymongoose APP` and `python -m cymongoose APP`: serve a WSGI, ASGI or raw-handler app.

Every option can also come from a `CYMONGOOSE_<OPTION>` environment variable (`--log-level`
is `CYMONGOOSE_LOG_LEVEL`; flags take 1/true/yes or 0/false/no; repeatable options take a
comma-separated list); the command line wins. Which process does what:

- one worker: this process serves (server_process.py);
- `--workers N` or `--max-requests`: this process supervises N worker processes sharing one
  listening socket (workers.py) and never imports the app;
- `--reload`: this process watches the files and restarts a serving child on changes.

A wrong app, a bad option or a port in use is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from collections.abc import Sequence

from . import __version__
from ._mongoose import MONGOOSE_VERSION, TLS_ENGINE, Manager
from .errors import ConfigError

EXIT_USAGE = 2

# Every limit and timeout of docs/server-behaviour.md, as listen()'s keyword: its flag's help.
LIMIT_OPTIONS = {
    "max_header_count": "request header fields at most (431 past it)",
    "max_header_size": "bytes of a request head at most (431)",
    "max_uri_size": "bytes of a request target at most (414)",
    "max_body_size": "bytes of a request body at most (413; at most 1 GiB)",
    "header_timeout_ms": "to receive a whole request head (408)",
    "body_timeout_ms": "window in which a request body must progress (408)",
    "keepalive_timeout_ms": "an idle keep-alive connection is closed after this",
    "tls_handshake_timeout_ms": "to finish the TLS handshake",
    "send_timeout_ms": "window in which a client must take some of its response",
    "linger_timeout_ms": "closing after a response or refusal: how long a quiet client is "
                         "waited for",
    "linger_time_ms": "closing after a response or refusal: how long the server reads and "
                      "discards at most",
}


def _version_line() -> str:
    """What a bug report needs: ours, the Mongoose inside, the TLS engine, the Python."""
    return (f"cymongoose {__version__} (Mongoose {MONGOOSE_VERSION}, TLS {TLS_ENGINE}, "
            f"{platform.python_implementation()} {platform.python_version()})")


def _limit_text(name: str, value: int) -> str:
    """A limit's default as people read it: 16 MiB, 30 s, 100."""
    if name.endswith("_ms"):
        return f"{value / 1000:g} s"
    if name.endswith("_size"):
        for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
            if value >= size and value % size == 0:
                return f"{value // size} {unit}"
        return f"{value} bytes"
    return str(value)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cymongoose",
        description="Serve a WSGI app (Flask, Django...), an ASGI app (FastAPI, Starlette...) "
                    "or a raw cymongoose handler. Every option also reads CYMONGOOSE_<OPTION>.")
    p.add_argument("app", nargs="?", help="the app as module:attribute, e.g. mysite.wsgi:app")
    a = p.add_argument_group("app")
    a.add_argument("--factory", action="store_true", help="APP is a callable returning the app")
    a.add_argument("--interface", choices=("auto", "wsgi", "asgi", "raw"), default="auto",
                   help="how to call the app (default: auto-detect)")
    a.add_argument("--root-path", default="", help="mount point: SCRIPT_NAME / root_path")
    a.add_argument("--static", action="append", default=[], metavar="URL=DIR",
                   help="serve DIR's files under URL (repeatable; WSGI and ASGI apps)")
    b = p.add_argument_group("binding")
    b.add_argument("--host", default="127.0.0.1")
    b.add_argument("--port", type=int, default=8000)
    b.add_argument("--uds", metavar="PATH", help="listen on this Unix socket instead")
    b.add_argument("--fd", type=int, help="listen on this inherited socket descriptor")
    b.add_argument("--ssl-certfile", help="PEM certificate (chain): serve HTTPS")
    b.add_argument("--ssl-keyfile", help="PEM private key (RSA or ECDSA)")
    b.add_argument("--ssl-ca", help="PEM CA: require client certificates signed by it")
    w = p.add_argument_group("processes")
    w.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    w.add_argument("--threads", type=int, default=8, help="WSGI app threads per process")
    w.add_argument("--graceful-timeout", type=float, default=30.0,
                   help="seconds to finish in-flight requests on SIGTERM (default 30)")
    w.add_argument("--max-requests", type=int, default=0,
                   help="restart a worker after this many requests (0: never)")
    w.add_argument("--max-requests-jitter", type=int, default=0,
                   help="add 0..N to --max-requests per worker, so they do not all restart "
                        "at once")
    w.add_argument("--reload", action=argparse.BooleanOptionalAction, default=False,
                   help="restart when a file changes (development)")
    w.add_argument("--reload-dir", action="append", default=[],
                   help="directory to watch (repeatable; default the working directory)")
    lg = p.add_argument_group("logging")
    lg.add_argument("--log-level", choices=("critical", "error", "warning", "info", "debug"),
                    default="info")
    lg.add_argument("--access-log", action=argparse.BooleanOptionalAction, default=False,
                    help="log every request on cymongoose.access (default off)")
    lg.add_argument("--access-log-format", default=None,
                    help="gunicorn-style atoms, e.g. '%%(h)s \"%%(r)s\" %%(s)s %%(M)sms', "
                         "or 'json'")
    lg.add_argument("--access-log-file", help="write the access log to this file")
    lg.add_argument("--log-config", help="logging configuration: .json/.yaml (dictConfig) "
                                         "or .ini (fileConfig)")
    px = p.add_argument_group("proxies")
    px.add_argument("--proxy-headers", action=argparse.BooleanOptionalAction, default=False,
                    help="honour X-Forwarded-For/-Proto/-Host and Forwarded from trusted peers")
    px.add_argument("--forwarded-allow-ips", default="127.0.0.1",
                    help="trusted proxies: IPs, CIDR networks or '*' (default 127.0.0.1)")
    lim = p.add_argument_group("limits (docs/server-behaviour.md; 0 turns a timeout off)")
    with Manager() as manager:  # the core's defaults, shown in each flag's help
        defaults = manager.http_limits
    for name, what in LIMIT_OPTIONS.items():
        lim.add_argument(f"--{name.replace('_', '-')}", type=int, default=None,
                         help=f"{what}; default {_limit_text(name, defaults[name])}")
    p.add_argument("--version", action="version", version=_version_line())
    # Set by a supervisor for the workers it starts; not for people.
    p.add_argument("--worker-socket", type=int, help=argparse.SUPPRESS)
    p.add_argument("--worker-status", type=int, help=argparse.SUPPRESS)
    return p


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def _env_defaults(parser: argparse.ArgumentParser) -> None:
    """CYMONGOOSE_<DEST> as each option's default (so the command line still wins)."""
    for action in parser._actions:
        if not action.option_strings and action.dest != "app":
            continue
        if action.help == argparse.SUPPRESS or action.dest in ("help", "version"):
            continue
        raw = os.environ.get("CYMONGOOSE_" + action.dest.upper())
        if raw is None:
            continue
        name = "CYMONGOOSE_" + action.dest.upper()
        if isinstance(action, (argparse._StoreTrueAction, argparse.BooleanOptionalAction)):
            if raw.strip().lower() not in _TRUE + _FALSE:
                raise ConfigError(f"{name}={raw!r}: use 1/true/yes or 0/false/no")
            value: object = raw.strip().lower() in _TRUE
        elif isinstance(action, argparse._AppendAction):
            value = [v.strip() for v in raw.split(",") if v.strip()]
        else:
            try:
                value = action.type(raw) if callable(action.type) else raw
            except ValueError:
                raise ConfigError(f"{name}={raw!r} is not a valid value") from None
            if action.choices is not None and value not in action.choices:
                raise ConfigError(f"{name}={raw!r}: choose from {', '.join(action.choices)}")
        parser.set_defaults(**{action.dest: value})


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = _parser()
    _env_defaults(parser)
    args = parser.parse_args(argv)
    if not args.app:
        raise ConfigError("give the app as module:attribute (or set CYMONGOOSE_APP)")
    for name, low in (("workers", 1), ("threads", 1), ("max_requests", 0),
                      ("max_requests_jitter", 0)):
        if getattr(args, name) < low:
            raise ConfigError(f"--{name.replace('_', '-')} must be at least {low}")
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port must be 0..65535, not {args.port}")
    if args.reload and (args.workers > 1 or args.max_requests):
        # The reloader serves from one child it restarts on changes; workers are another
        # process model, so both at once would silently drop one.
        given = f"--workers {args.workers}" if args.workers > 1 else "--max-requests"
        raise ConfigError(f"--reload serves from one process: drop {given} or --reload")
    if args.graceful_timeout < 0:
        raise ConfigError("--graceful-timeout must be >= 0 seconds")
    if args.uds and args.fd is not None:
        raise ConfigError("give either --uds or --fd, not both")
    if bool(args.ssl_certfile) != bool(args.ssl_keyfile):
        raise ConfigError("HTTPS needs both --ssl-certfile and --ssl-keyfile")
    if args.root_path and (not args.root_path.startswith("/") or args.root_path.endswith("/")):
        raise ConfigError(f"--root-path must start with '/' and not end with one, "
                       f"not {args.root_path!r}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    raw_argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parse_args(raw_argv)
        worker = args.worker_socket is not None  # started by a supervisor or the reloader
        if args.reload and not worker:
            from .process.reloader import run_reloader
            return run_reloader(args, raw_argv)
        if not worker and (args.workers > 1 or args.max_requests):
            from .process.supervisor import Supervisor
            return Supervisor(args, raw_argv).run()
        from .process.serve import serve_process
        return serve_process(args)
    except ConfigError as exc:
        print(f"cymongoose: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
