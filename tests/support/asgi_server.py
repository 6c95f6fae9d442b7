"""The ASGI servers under test: ours (ASGIServer on an event loop in a background thread)
and uvicorn (the reference, in a subprocess on a socket this process bound)."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from .gunicorn_server import TESTS_DIR
from .http_client import HttpConnection
from .ports import HOST, bound_listener
from .processes import ServerProcess, wait_serving
from .subprocess_env import child_env


@dataclass
class RunningASGI:
    server: Any  # cymongoose.asgi.ASGIServer
    port: int
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread
    errors: list[BaseException] = field(default_factory=list)

    def call(self, fn: Any, timeout: float = 10.0) -> Any:
        """Run `fn()` on the server's loop and return its result."""
        async def run() -> Any:
            return fn()
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def task_count(self) -> int:
        return int(self.call(lambda: len(self.server._tasks)))


@contextmanager
def running_asgi_server(app: Any, *, uvloop: bool = False,
                        server_kwargs: dict[str, Any] | None = None,
                        **limits: Any) -> Iterator[RunningASGI]:
    """Serve `app` with cymongoose.asgi.ASGIServer on 127.0.0.1 (free port) from a thread
    running its own event loop. On exit: `stop()`, the thread must end within 10 s, and
    anything the loop raised is re-raised."""
    from cymongoose.aio import new_event_loop
    from cymongoose.asgi import ASGIServer

    loop = new_event_loop() if uvloop else asyncio.new_event_loop()
    server = ASGIServer(app, **(server_kwargs or {}))
    started = threading.Event()
    stop = asyncio.Event()  # set on the loop's thread (request_stop)
    errors: list[BaseException] = []
    port_box: list[int] = []

    async def main() -> None:
        try:
            conn = await server.start(f"http://{HOST}:0", **limits)
            port_box.append(int(conn.local_addr[1]))
        finally:
            started.set()
        await stop.wait()
        await server.stop()

    def request_stop() -> None:
        try:
            loop.call_soon_threadsafe(stop.set)
        except RuntimeError:
            pass  # the loop has ended already

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(main())
        except BaseException as exc:  # surfaced when the context exits
            errors.append(exc)
        finally:
            loop.close()

    thread = threading.Thread(target=run, name="asgi-server-under-test", daemon=True)
    thread.start()
    started.wait(20)
    if not port_box:
        request_stop()
        thread.join(10)
        raise errors[0] if errors else RuntimeError("ASGIServer did not start")
    running = RunningASGI(server, port_box[0], loop, thread, errors)
    try:
        yield running
    finally:
        request_stop()
        thread.join(15)
        assert not thread.is_alive(), "ASGIServer.stop() did not return within 15 s"
        if errors:
            raise errors[0]


class UvicornServer(ServerProcess):
    """`uvicorn --fd N app` (one process, websockets for WebSocket), the reference server.
    Ready once `GET /_ctl/ping` answers 200."""

    def __init__(self, app: str, *, root_path: str = "", factory: bool = False,
                 startup_timeout: float = 20.0) -> None:
        super().__init__()
        self.app = app
        self.root_path = root_path
        self.factory = factory
        self.startup_timeout = startup_timeout

    def start(self) -> UvicornServer:
        listener = bound_listener()
        # uvicorn leaves Nagle on for a socket it is handed; accepted sockets inherit this.
        listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.port = int(listener.getsockname()[1])
        cmd = [sys.executable, "-m", "uvicorn", "--fd", str(listener.fileno()),
               "--ws", "websockets", "--lifespan", "auto", "--log-level", "warning",
               "--no-access-log", "--timeout-graceful-shutdown", "2", self.app]
        if self.root_path:
            cmd += ["--root-path", self.root_path]
        if self.factory:
            cmd.append("--factory")
        try:
            self.proc = subprocess.Popen(cmd, env=child_env(str(TESTS_DIR)), cwd=TESTS_DIR,
                                         stdin=subprocess.DEVNULL, stdout=self._log,
                                         stderr=self._log, pass_fds=(listener.fileno(),))
        finally:
            listener.close()

        def ready() -> bool:
            with HttpConnection(self.port, timeout=2.0) as c:
                return c.request("GET", "/_ctl/ping").status in (200, 404)

        wait_serving(self.proc, "uvicorn", ready, self.startup_timeout, self.log)
        return self
