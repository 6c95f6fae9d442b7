"""A Manager polled on a background thread: the one harness behind ServerThread (the
`server_thread` fixture's servers) and the reliability suite's Server."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from cymongoose import Manager


class PollThread:
    """Polls `manager` on a daemon thread until stop(), which also closes the manager.
    Handlers run on that thread; call(fn) runs fn there too (a Manager is not thread-safe)
    and hands back its result or exception. An exception out of poll() itself ends the loop
    and is kept in loop_errors."""

    def __init__(self, manager: Manager, poll_ms: int = 20,
                 name: str = "cymongoose-test") -> None:
        self.manager = manager
        self.poll_ms = poll_ms
        self.loop_errors: list[BaseException] = []
        self._stop = threading.Event()
        self._calls: queue.Queue[tuple[Callable[[], Any], queue.Queue[Any]]] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> PollThread:
        self._thread.start()
        return self

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.manager.poll(self.poll_ms)
                while not self._calls.empty():
                    fn, out = self._calls.get()
                    try:
                        out.put((True, fn()))
                    except BaseException as exc:  # handed back to the caller
                        out.put((False, exc))
        except BaseException as exc:  # surfaced through loop_errors
            self.loop_errors.append(exc)

    def call(self, fn: Callable[[], Any], timeout: float = 10) -> Any:
        out: queue.Queue[Any] = queue.Queue()
        self._calls.put((fn, out))
        ok, value = out.get(timeout=timeout)
        if not ok:
            raise value
        return value

    def stop(self) -> None:
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join(10)
            assert not self._thread.is_alive(), "poll thread did not stop"
        self.manager.close()


class ServerThread(PollThread):
    """A Manager made from these arguments, polled on a background thread; `errors` holds
    what ended the loop."""

    def __init__(self, handler: Any = None, **manager_kwargs: Any) -> None:
        super().__init__(Manager(handler, **manager_kwargs))
        self.errors = self.loop_errors

    def listen(self, url: str = "http://127.0.0.1:0", handler: Any = None, **kw: Any) -> int:
        conn = self.manager.listen(url, handler, **kw)
        return int(conn.local_addr[1])
