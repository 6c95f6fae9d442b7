"""The serving options the core's HTTP guard carries out by itself, without the app:
--limit-concurrency (503 with Retry-After past it), --health-path (answered from
`Manager.ready`), --proxy (routes answered by upstreams), --static (files answered from
their mounts, `Manager.set_static_mounts`) and --compression (responses compressed as they
leave). Every server sets them the same way, here."""

from __future__ import annotations

from .._mongoose import Manager
from ..config import Config
from .default_headers import SERVER_NAME

__all__ = ["set_guard_options"]


def set_guard_options(manager: Manager, config: Config) -> None:
    """Give `manager` the config's limit_concurrency, health_path, static mounts,
    compression and reverse-proxy routes (ConfigError when an upstream does not resolve;
    ValueError for a mount whose directory is gone). The server sets `manager.ready`
    itself: True once it serves, False when it starts to drain."""
    manager.limit_concurrency = config.limit_concurrency or 0
    manager.health_path = config.health_path
    if config.static:
        # Static answers never reach the app, so they carry the Server field the servers
        # add to the app's answers here.
        manager.set_static_mounts(
            config.static_mounts(),
            headers=[("Server", SERVER_NAME.decode("ascii"))] if config.server_header
            else None)
    if config.compression:  # "on": every coding the build makes
        manager.set_compression(config.compression,
                                min_length=config.compression_min_length)
    proxy = config.new_reverse_proxy()
    if proxy is not None:
        proxy.attach(manager)
