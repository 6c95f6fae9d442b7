"""cymongoose.Server refuses what it cannot serve with one clear exception, before the app's
lifespan startup runs: sockets that are closed, not listening or not stream sockets, no
running loop, run() inside a running loop, the app given twice or not at all, the command
line's process models, serving twice; a failed lifespan startup raises the app's message."""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any

import pytest
from support.embedding_apps import RecordingASGI
from support.ports import HOST, bound_listener

from cymongoose import Server
from cymongoose.config import Config
from cymongoose.errors import ConfigError, LifespanFailure

pytestmark = pytest.mark.timeout(60)


def _serve_with(sockets: Any) -> RecordingASGI:
    """serve(sockets) on a new loop; the exception it raises propagates."""
    app = RecordingASGI()
    asyncio.run(asyncio.wait_for(Server(Config(), app=app).serve(sockets=sockets), 10))
    return app


def test_a_closed_socket() -> None:
    sock = bound_listener()
    sock.close()
    with pytest.raises(ValueError, match=r"sockets\[0\] is closed"):
        _serve_with([sock])


def test_a_socket_that_is_not_listening() -> None:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        with pytest.raises(ValueError, match=r"sockets\[0\] is not listening: call "
                                             r"sock.bind\(...\) and sock.listen\(\)"):
            _serve_with([sock])


def test_a_udp_socket() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind((HOST, 0))
        with pytest.raises(ValueError, match=r"sockets\[0\] is not a stream socket"):
            _serve_with([sock])


def test_the_second_socket_is_named() -> None:
    good, bad = bound_listener(), bound_listener()
    bad.close()
    try:
        with pytest.raises(ValueError, match=r"sockets\[1\] is closed"):
            _serve_with([good, bad])
        assert good.fileno() >= 0  # refused before anything: the caller's still
    finally:
        good.close()


@pytest.mark.parametrize(("sockets", "error", "words"), [
    ([], ValueError, "sockets is empty"),
    ([3], TypeError, r"sockets\[0\] must be a socket.socket, not int"),
    (42, TypeError, "sockets must be a list of listening sockets or None, not int"),
])
def test_what_is_not_a_list_of_sockets(sockets: Any, error: type[Exception],
                                       words: str) -> None:
    with pytest.raises(error, match=words):
        _serve_with(sockets)


def test_one_socket_instead_of_a_list() -> None:
    with bound_listener() as sock, pytest.raises(TypeError, match=r"serve\(sockets=\[sock\]\)"):
        _serve_with(sock)


def test_serve_needs_a_running_loop() -> None:
    server = Server(Config(), app=RecordingASGI())
    for current in (None, asyncio.new_event_loop()):  # none at all; one set but not running
        asyncio.set_event_loop(current)
        coroutine = server.serve()
        try:
            with pytest.raises(RuntimeError, match="must be awaited in a running asyncio "
                                                   "event loop"):
                coroutine.send(None)
        finally:
            coroutine.close()
            asyncio.set_event_loop(None)
            if current is not None:
                current.close()
    assert not server.started


def test_run_refuses_a_running_loop() -> None:
    async def main() -> None:
        with pytest.raises(RuntimeError, match=r"cannot be called from a running event "
                                               r"loop: await server.serve\(\)"):
            Server(Config(), app=RecordingASGI()).run()

    asyncio.run(main())


def test_signal_handlers_only_on_the_main_thread() -> None:
    caught: list[BaseException] = []

    def elsewhere() -> None:
        server = Server(Config(), app=RecordingASGI())
        with bound_listener() as sock:
            try:
                asyncio.run(server.serve(sockets=[sock], install_signal_handlers=True))
            except RuntimeError as exc:
                caught.append(exc)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join(10)
    assert len(caught) == 1 and "needs the main thread" in str(caught[0])


@pytest.mark.parametrize(("config", "app", "error", "words"), [
    (Config(app="support.embedding_apps:lifespan_app"), RecordingASGI(), ValueError,
     "the app is given twice"),
    (Config(), None, ValueError, "no app: pass Server"),
    (Config(), 42, TypeError, "app must be a callable or 'module:attribute', not int"),
    ("host=0.0.0.0", RecordingASGI(), TypeError, "config must be a cymongoose.config.Config"),
    (Config(workers=2), RecordingASGI(), ConfigError, "workers=2 is a process model"),
    (Config(reload=True), RecordingASGI(), ConfigError, "reload=True is a process model"),
])
def test_bad_construction(config: Any, app: Any, error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words):
        Server(config, app=app)


def test_a_server_serves_once() -> None:
    async def main() -> None:
        server = Server(Config(), app=RecordingASGI())
        serving = asyncio.ensure_future(server.serve(sockets=[bound_listener()]))
        await asyncio.sleep(0)  # it has begun
        with bound_listener() as other, pytest.raises(RuntimeError,
                                                      match="a Server serves once"):
            await server.serve(sockets=[other])
        await asyncio.wait_for(server.shutdown(), 10)
        assert serving.done()

    asyncio.run(main())


def test_a_failed_lifespan_startup_raises_the_apps_message() -> None:
    from support.asgi_apps import failing_startup_app

    sock = bound_listener()
    server = Server(Config(), app=failing_startup_app)
    with pytest.raises(LifespanFailure, match="database unreachable"):
        asyncio.run(asyncio.wait_for(server.serve(sockets=[sock]), 10))
    assert not server.started
    assert sock.fileno() == -1
