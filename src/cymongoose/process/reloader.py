"""`cymongoose --reload`: serve from a child process and start a new one when a watched file
changes (development only). The reloader binds the socket once and hands it to each child,
so clients see no refused connection while the code reloads."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading

from ..config import Config
from ..errors import ConfigError
from ..log_config import configure_logging
from .listening_socket import close_listener, open_listener

__all__ = ["run_reloader"]

log = logging.getLogger("cymongoose.error")

_WATCHED = (".py", ".pyi", ".html", ".txt", ".json", ".yaml", ".yml", ".ini", ".toml", ".cfg")


def run_reloader(config: Config, argv: list[str]) -> int:
    try:
        from watchfiles import watch
    except ImportError:
        raise ConfigError("--reload needs watchfiles (pip install 'cymongoose[cli]')") from None
    try:
        configure_logging(config.log_level, False, None, config.log_config)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    dirs = config.reload_dir or [os.getcwd()]
    for d in dirs:
        if not os.path.isdir(d):
            raise ConfigError(f"--reload-dir {d!r} is not a directory")
    sock = open_listener(config)
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set())
                for s in (signal.SIGINT, signal.SIGTERM)}
    cmd = [sys.executable, "-m", "cymongoose", *argv, "--no-reload",
           "--worker-socket", str(sock.fileno())]

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(cmd, pass_fds=(sock.fileno(),))

    def finish(proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(config.drain_delay + config.graceful_timeout + 5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    child = start()
    log.info("reloading on changes under %s", ", ".join(dirs))
    try:
        for changes in watch(*dirs, stop_event=stop, debounce=100, step=50,
                             watch_filter=lambda _c, path: path.endswith(_WATCHED),
                             raise_interrupt=False):
            log.info("%s changed: restarting", os.path.basename(sorted(changes)[0][1]))
            finish(child)
            child = start()
    finally:
        finish(child)
        for s, h in previous.items():
            signal.signal(s, h)
        close_listener(config, sock)
    return 0
