"""The serving options the core's HTTP guard carries out by itself, without the app:
--limit-concurrency (503 with Retry-After past it) and --health-path (answered from
`Manager.ready`). Every server sets them the same way, here."""

from __future__ import annotations

from .._mongoose import Manager
from ..config import Config

__all__ = ["set_guard_options"]


def set_guard_options(manager: Manager, config: Config) -> None:
    """Give `manager` the config's limit_concurrency and health_path. The server sets
    `manager.ready` itself: True once it serves, False when it starts to drain."""
    manager.limit_concurrency = config.limit_concurrency or 0
    manager.health_path = config.health_path
