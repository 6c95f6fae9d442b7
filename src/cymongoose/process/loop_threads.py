"""--loop-threads N: one serving process runs N event loops, each on a thread of its own
with a server of its own (its own Manager, and for ASGI its own asyncio loop), all accepting
on the one listening socket. Only a free-threaded Python with the GIL off runs them in
parallel; config.py refuses the option anywhere else.

What the loops share: the app object, the listening socket (each Manager listens on its own
duplicate; whichever loop is idle accepts, so a busy loop takes fewer new connections), the
process's --max-requests count (one RequestBudget) and its metrics slot (one block per
Manager, added up by the supervisor). What they never share: a connection, and so a request,
belongs to the loop that accepted it until it closes.

The main thread serves nothing. It builds nothing either: each loop thread builds, listens
and runs its own server, so an ASGI loop's asyncio objects never leave their thread. The
main thread takes the stop signals (only it can) and passes them on to every loop, reports
`ready` to the supervisor once every loop is ready (none accepts before), and when a loop
thread dies it stops the others and exits with status 1: a process whose loop is gone would
keep accepting with part of its capacity lost, so the supervisor replaces it whole.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..config import Config
from ..errors import ConfigError
from ..serving.request_budget import RequestBudget
from ..serving.stop_signals import StopSignals
from .starting import StartingResponder
from .status_pipe import StatusPipe
from .worker_metrics import shared_blocks

if TYPE_CHECKING:
    from .._mongoose import Manager

__all__ = ["LoopThreads"]

log = logging.getLogger("cymongoose.error")

# Exit status of a process one of whose loop threads died (a crash for the supervisor).
EXIT_LOOP_DIED = 1


class LoopServer(Protocol):
    """What a loop thread asks of its server: WSGIServer, ASGIRun, RawServer."""

    on_ready: Callable[[], object] | None
    on_stop: Callable[[], object] | None

    @property
    def manager(self) -> Manager: ...

    def listen_socket(self, sock: Any, *, tls: bool = False) -> object: ...

    def run(self) -> None: ...

    def stop(self) -> None: ...

    def close(self) -> None: ...


class _Loop:
    """One loop thread and what the main thread knows of it."""

    __slots__ = ("index", "thread", "server", "manager", "ready", "ended", "error")

    def __init__(self, index: int) -> None:
        self.index = index
        self.thread: threading.Thread | None = None
        self.server: LoopServer | None = None
        self.manager: Manager | None = None  # its counts stay readable once it is closed
        self.ready = False
        self.ended = False
        self.error: BaseException | None = None


class LoopThreads:
    """Serve `app` on `config.loop_threads` loops; `build(config, app, status)` makes one
    loop's server (serve.py's SERVERS), `on_stop()` is called once when the process starts
    to stop, `budget` is the process's --max-requests count (None: no limit)."""

    def __init__(self, config: Config, interface: str, app: Any,
                 build: Callable[[Config, Any, StatusPipe], Any], status: StatusPipe,
                 *, budget: RequestBudget | None, on_stop: Callable[[], object]) -> None:
        self._config = config
        self._interface = interface
        self._app = app
        self._build = build
        self._status = status
        self._budget = budget
        self._on_stop = on_stop
        self._loops = [_Loop(i) for i in range(config.loop_threads)]
        self._changed = threading.Condition()  # a loop got ready or ended
        self._go = threading.Event()  # the supervisor said go (or the start failed)
        self._stopping = False
        self._recycling = False

    def serve(self, sock: Any, *, adopted: Callable[[], object],
              starting: StartingResponder | None, serving: str, url: str) -> int:
        """Run every loop until the process stops; 0 after a stop, EXIT_LOOP_DIED when a
        loop thread died. ConfigError (or StartupFailed) when a loop could not start."""
        config = self._config
        blocks: list[Any] = ([None] * len(self._loops) if config.worker_metrics is None
                             else shared_blocks(config.worker_metrics, len(self._loops)))
        with StopSignals(self.stop, delay=config.drain_delay, unready=self._unready):
            for loop, block in zip(self._loops, blocks, strict=True):
                loop.thread = threading.Thread(
                    target=self._run_loop, args=(loop, sock, block),
                    name=f"cymongoose-loop-{loop.index}", daemon=True)
                loop.thread.start()
            with self._changed:
                self._changed.wait_for(lambda: all(lp.ready or lp.ended for lp in self._loops))
                failed = next((lp for lp in self._loops if lp.ended), None)
            if failed is not None:  # one could not start: none serves
                self.stop()
                self._go.set()
                self._join()
                error = failed.error
                if isinstance(error, ConfigError):
                    raise error
                raise ConfigError(f"loop thread {failed.index} did not start: {error!r}")
            if starting is not None:
                starting.close()  # every loop listens: they answer from here
            adopted()
            log.info("%s on %s, %d loop threads", serving, url, len(self._loops))
            self._status.ready(self._interface)  # returns once the supervisor says go
            self._go.set()
            with self._changed:
                self._changed.wait_for(lambda: any(lp.ended for lp in self._loops))
                died = next((lp for lp in self._loops if lp.ended and lp.error is not None),
                            None)
            if died is not None:
                # Its traceback's frames belong to its thread until that thread has ended:
                # the thread hands each frame's data over to the frame object as it unwinds,
                # so formatting them before the join races with that (ThreadSanitizer saw it
                # on free-threaded 3.13).
                assert died.thread is not None
                died.thread.join()
                log.error("loop thread %d died (%r): stopping the process", died.index,
                          died.error, exc_info=died.error)
            self.stop()  # one ended: the process ends as a whole
            self._join()
        died = died or next((lp for lp in self._loops if lp.error is not None), None)
        log.info("requests per loop thread: %s", ", ".join(
            str(_requests(lp.manager)) for lp in self._loops))
        return EXIT_LOOP_DIED if died is not None else 0

    def _run_loop(self, loop: _Loop, sock: Any, block: Any) -> None:
        """A loop thread: build its server, listen, count into its metrics block, run."""
        server: LoopServer | None = None
        try:
            server = self._build(self._config, self._app, self._status)
            server.on_stop = None  # the process's on_stop, once, from stop()
            if self._budget is not None:  # WSGI and ASGI (a raw handler counts nothing)
                counted: Any = server
                counted.request_budget = self._budget
                counted.on_max_requests = self._max_requests
            try:
                server.listen_socket(sock, tls=self._config.ssl_certfile is not None)
            except ConfigError:
                raise
            except (ValueError, TypeError, RuntimeError, OSError) as exc:
                raise ConfigError(f"cannot serve on the listening socket: {exc}") from None
            loop.manager = server.manager
            if block is not None:
                server.manager.share_metrics(block)
            server.on_ready = lambda: self._ready(loop)
            with self._changed:
                loop.server = server
                stopping = self._stopping
            if stopping:
                server.stop()
            server.run()  # closes the server when it returns
            server = None
        except BaseException as exc:
            loop.error = exc
            if server is not None:
                try:
                    server.close()
                except Exception:  # the loop's own error is the one to report
                    log.exception("closing loop thread %d", loop.index)
        finally:
            with self._changed:
                loop.ended = True
                self._changed.notify_all()

    def _ready(self, loop: _Loop) -> None:
        """A loop's server serves from its next turn: wait until every loop does and the
        supervisor said go (the start-up responder no longer accepts)."""
        with self._changed:
            loop.ready = True
            self._changed.notify_all()
        self._go.wait()

    def _max_requests(self) -> None:
        """The process admitted its --max-requests: its successor starts now, every loop
        drains."""
        with self._changed:
            first = not self._recycling
            self._recycling = True
        if first:
            self._status.send("recycle")
            self.stop()

    def _unready(self) -> None:
        """--drain-delay: every loop's health probes fail while they serve on."""
        with self._changed:
            managers = [lp.manager for lp in self._loops if lp.manager is not None]
        for manager in managers:
            manager.ready = False

    def stop(self) -> None:
        """From any thread: every loop stops (the requests in flight are finished)."""
        with self._changed:
            first = not self._stopping
            self._stopping = True
            servers = [lp.server for lp in self._loops if lp.server is not None]
        if first:
            self._on_stop()
        for server in servers:
            server.stop()

    def _join(self) -> None:
        for loop in self._loops:
            if loop.thread is not None:
                loop.thread.join()


def _requests(manager: Manager | None) -> int:
    if manager is None:
        return 0
    return sum(manager.metrics()["requests"].values())
