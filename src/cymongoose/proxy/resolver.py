"""Upstream names resolved again while the proxy runs: a container or a cluster service can
move. The system resolver may block for seconds, so it runs on a thread of its own; the
loop only picks up its results, from a timer, and hands the core a changed address. A
name that stops resolving keeps its last address (logged once): the upstream's own health
decides then, not a resolver hiccup."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from .upstreams import Upstream, resolve

if TYPE_CHECKING:
    from .._mongoose import Manager, Timer

__all__ = ["Reresolver"]

log = logging.getLogger("cymongoose.error")


class Reresolver:
    """Every `interval` seconds: resolve `named` (index, upstream, current connect URL) off
    the loop, and call `apply(index, connect_url)` on the loop for each that changed."""

    def __init__(self, manager: Manager, named: list[tuple[int, Upstream, str]],
                 apply: Callable[[int, str], object], interval: float) -> None:
        self._named = [(i, u) for i, u, _ in named]
        self._current = {i: url for i, _, url in named}
        self._failing: set[int] = set()
        self._apply = apply
        self._lock = threading.Lock()
        self._changed: dict[int, str] = {}
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self._timer: Timer | None = manager.timer_add(
            max(1, int(interval * 1000)), self._tick, repeat=True)

    def stop(self) -> None:
        self._stopped.set()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _tick(self) -> None:  # on the loop
        with self._lock:
            changed, self._changed = self._changed, {}
        for index, url in changed.items():
            self._apply(index, url)
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._resolve_all, daemon=True,
                                            name="cymongoose-proxy-resolver")
            self._thread.start()

    def _resolve_all(self) -> None:  # off the loop
        for index, upstream in self._named:
            if self._stopped.is_set():
                return
            try:
                url = resolve(upstream)
            except OSError as exc:
                if index not in self._failing:
                    self._failing.add(index)
                    log.warning("proxy: upstream %s no longer resolves (%s): keeping %s",
                                upstream.label, exc.strerror or exc, self._current[index])
                continue
            self._failing.discard(index)
            if url != self._current[index]:
                log.warning("proxy: upstream %s now resolves to %s (was %s)",
                            upstream.label, url, self._current[index])
                self._current[index] = url
                with self._lock:
                    self._changed[index] = url
