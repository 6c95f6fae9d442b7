"""/_stats for the WSGI apps: how many app calls ran at once, at most, and on how many
distinct threads, since the last `/_stats?reset=1` (the bench reads it to show whether a
server ran apps concurrently while they waited on the database).

`InFlight(app)` wraps a WSGI app. GET /_stats answers
{"max_in_flight": int, "threads": int, "calls": int}; with `?reset=1` it answers the same and
then starts counting anew. The call to /_stats itself is not counted. An app call counts from
its start until it returns its iterable (the apps here do their database work before
returning)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from typing import Any

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class InFlight:
    def __init__(self, app: WSGIApp) -> None:
        self.app = app
        self._lock = threading.Lock()
        # All four guarded by _lock.
        self._now = 0
        self._max = 0
        self._calls = 0
        self._threads: set[int] = set()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]
                 ) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == "/_stats":
            return self._stats(environ, start_response)
        with self._lock:
            self._now += 1
            self._calls += 1
            self._max = max(self._max, self._now)
            self._threads.add(threading.get_ident())
        try:
            return self.app(environ, start_response)
        finally:
            with self._lock:
                self._now -= 1

    def _stats(self, environ: dict[str, Any], start_response: Callable[..., Any]
               ) -> list[bytes]:
        with self._lock:
            seen = {"max_in_flight": self._max, "threads": len(self._threads),
                    "calls": self._calls}
            if "reset=1" in environ.get("QUERY_STRING", "").split("&"):
                self._max = self._now
                self._calls = 0
                self._threads.clear()
        body = json.dumps(seen).encode()
        start_response("200 OK", [("Content-Type", "application/json"),
                                  ("Content-Length", str(len(body)))])
        return [body]
