"""The answer while starting: with --health-path, the port listens before the app is loaded
and a Manager of its own, polled on a thread, answers on it until the server is ready. The
health path gets `503 starting` (the core's own answer, Manager.ready being False); every
other request `503` with `Retry-After: 1` and `Connection: close`, as limit_concurrency
answers, since nothing can serve it yet. Without it a probe was refused while a WSGI app
imported and waited unanswered through an ASGI lifespan start-up (docs/operations.md
promised 503).

Used by the serving process around the app's import and the ASGI lifespan startup, and by
the supervisor until its first worker is ready: the supervisor stops it accepting before it
lets that worker accept (status_pipe.py), so the two never take turns on the socket.
Connections still in the accept queue go to the real server.
"""

from __future__ import annotations

import socket
import threading
import time
from email.utils import formatdate

from ..config import Config

__all__ = ["StartingResponder"]

_POLL_MS = 50
_DRAIN_S = 1.0  # at most, for a client that connected but has not sent its request yet
_BODY = b"starting\n"


def _headers() -> dict[str, str]:
    return {"Content-Type": "text/plain; charset=utf-8", "Date": formatdate(usegmt=True),
            "Retry-After": "1", "Connection": "close"}


class StartingResponder:
    """Answers on `sock` (which the caller keeps and closes) from construction to close()."""

    def __init__(self, config: Config, sock: socket.socket) -> None:
        from .._mongoose import Manager, listen_fd
        from ..serving.fixed_answer import fixed_answer_handler

        tls = config.new_tls()
        handler = fixed_answer_handler(tls, 503, _BODY, _headers)
        self._manager = Manager(handler)
        self._manager.health_path = config.health_path  # ready stays False: 503 starting
        try:
            self._listener = listen_fd(self._manager, sock, handler, http=True,
                                       tls=tls is not None, **config.limits())
        except BaseException:
            self._manager.close()
            raise
        self._stop = threading.Event()
        self._closed = False
        # The thread alone polls the Manager until close() joins it: one user at a time.
        self._thread = threading.Thread(target=self._run, name="cymongoose-starting",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._manager.poll(_POLL_MS)

    def stop_accepting(self, ready: bool = False) -> None:
        """Stop taking connections off the socket; the ones accepted already are still
        answered until close(). `ready`: a server that answers 200 takes over (a
        supervisor's worker), so the health path says 200 from now on here too, and a
        probe never sees 200 then 503."""
        if self._stop.is_set():
            return
        if ready:
            # Set while the thread may be polling: one int store the guard reads (a
            # probe gets one answer or the other, both true now), not worth a wake-up.
            self._manager.ready = True
        self._stop.set()
        self._thread.join()
        self._listener.close()

    def close(self, ready: bool = False) -> None:
        """Stop accepting, answer the requests of the connections accepted already (the
        real server may have been accepting beside it for a moment: a connection taken
        here just before must get its answer, not a reset), then close."""
        if self._closed:
            return
        self._closed = True
        self.stop_accepting(ready)
        deadline = time.monotonic() + _DRAIN_S
        while time.monotonic() < deadline and any(
                not c.is_listening for c in self._manager.connections):
            self._manager.poll(10)
        self._manager.close()


def starting_responder(config: Config, sock: socket.socket) -> StartingResponder | None:
    """A StartingResponder when --health-path asks for start-up answers, else None."""
    if not config.health_path:
        return None
    return StartingResponder(config, sock)
