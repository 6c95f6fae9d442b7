"""Logging set-up for the command line: the `cymongoose.*` loggers on stderr at a level, the
access log where asked, or the user's own configuration (dictConfig as JSON or YAML, or an
INI file for fileConfig)."""

from __future__ import annotations

import importlib
import json
import logging
import logging.config
import os
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["LEVELS", "configure_logging", "keep_server_loggers"]

LEVELS = {"critical": logging.CRITICAL, "error": logging.ERROR, "warning": logging.WARNING,
          "info": logging.INFO, "debug": logging.DEBUG}

_FORMAT = "%(asctime)s [%(process)d] %(levelname)s %(name)s: %(message)s"


def configure_logging(level: str, access_log: bool, access_log_file: str | None = None,
                      log_config: str | None = None) -> None:
    """Our defaults first (so a partial user configuration still has them), then the user's
    file. Raises ValueError for a file that cannot be read or applied."""
    root = logging.getLogger("cymongoose")
    root.setLevel(LEVELS[level])
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(_FORMAT))
        root.addHandler(handler)
    root.propagate = False
    access = logging.getLogger("cymongoose.access")
    access.propagate = False
    access.handlers.clear()
    if access_log:
        from .access_log import AccessLogWriter  # batched writes, see access_log.py
        access.addHandler(AccessLogWriter(access_log_file))
        access.setLevel(logging.INFO)
    else:
        access.setLevel(logging.CRITICAL + 1)  # off unless a user configuration turns it on
    # Mongoose's own C log reaches `cymongoose.mongoose` (c_log.pxi); ask it for as much.
    from ._mongoose import MG_LL_DEBUG, MG_LL_ERROR, MG_LL_NONE, log_set
    log_set(MG_LL_DEBUG if level == "debug" else MG_LL_NONE if level == "critical"
            else MG_LL_ERROR)
    if log_config:
        _apply_file(log_config)


def _apply_file(path: str) -> None:
    if not os.path.isfile(path):
        raise ValueError(f"--log-config {path!r}: no such file")
    ext = os.path.splitext(path)[1].lower()
    try:
        if ext in (".json", ".yaml", ".yml"):
            with open(path, encoding="utf-8") as fh:
                if ext == ".json":
                    config: Any = json.load(fh)
                else:
                    try:
                        yaml: Any = importlib.import_module("yaml")  # optional: cli extra
                    except ImportError:
                        # The except below adds "--log-config 'x.yaml': " once.
                        raise ValueError("YAML needs PyYAML (pip install 'cymongoose[cli]', "
                                         "or use a .json file)") from None
                    config = yaml.safe_load(fh)
            if not isinstance(config, dict):
                raise ValueError("the file does not hold a mapping")
            config.setdefault("version", 1)
            config.setdefault("disable_existing_loggers", False)
            logging.config.dictConfig(config)
        else:
            logging.config.fileConfig(path, disable_existing_loggers=False)
    except ValueError as exc:
        raise ValueError(f"--log-config {path!r}: {exc}") from None
    except Exception as exc:  # json/yaml/configparser errors, bad handler classes...
        raise ValueError(f"--log-config {path!r}: {type(exc).__name__}: {exc}") from None


_SERVER_LOGGERS = ("cymongoose", "cymongoose.error", "cymongoose.access", "cymongoose.mongoose")


def keep_server_loggers() -> Callable[[], None]:
    """Remembers which server loggers are on now; the function it returns turns back on
    those that something disabled since. Called around loading the app: an app that runs
    `dictConfig()` while it is imported (Django does, and a configuration's
    `disable_existing_loggers` defaults to true) must not silence the log and the access log
    the command line asked for. The app's handlers added to them stay."""
    enabled = [name for name in _SERVER_LOGGERS if not logging.getLogger(name).disabled]

    def restore() -> None:
        for name in enabled:
            logging.getLogger(name).disabled = False

    return restore
