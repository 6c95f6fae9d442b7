"""Our WSGIServer on a background thread, as a context manager that stops and closes it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from .ports import HOST


@dataclass
class RunningServer:
    server: Any  # cymongoose.wsgi.WSGIServer (imported lazily: it may fail to import)
    port: int
    thread: threading.Thread
    errors: list[BaseException] = field(default_factory=list)


@contextmanager
def running_wsgi_server(app: Any, *, threads: int = 4, poll_ms: int = 20,
                        server_kwargs: dict[str, Any] | None = None, scheme: str = "http",
                        **limits: Any) -> Iterator[RunningServer]:
    """Serve `app` with cymongoose.wsgi.WSGIServer on 127.0.0.1 (free port) from a thread
    running `run()`. On exit: `stop()`, join the thread (it must end within 10 s), `close()`,
    and re-raise anything `run()` raised."""
    from cymongoose.wsgi import WSGIServer

    srv = WSGIServer(app, threads=threads, **(server_kwargs or {}))
    try:
        conn = srv.listen(f"{scheme}://{HOST}:0", **limits)
        port = int(conn.local_addr[1])
    except BaseException:
        srv.close()
        raise
    errors: list[BaseException] = []

    def run() -> None:
        try:
            srv.run(poll_ms=poll_ms)
        except BaseException as exc:  # surfaced when the context exits
            errors.append(exc)

    thread = threading.Thread(target=run, name="wsgi-server-under-test", daemon=True)
    thread.start()
    running = RunningServer(srv, port, thread, errors)
    try:
        yield running
    finally:
        srv.stop()
        thread.join(10)
        stopped = not thread.is_alive()
        srv.close()
        assert stopped, "WSGIServer.run() did not return within 10 s of stop()"
        if errors:
            raise errors[0]
