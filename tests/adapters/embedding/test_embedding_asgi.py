"""cymongoose.Server awaited inside a program's own running loop with an ASGI app, the way
model servers embed uvicorn.Server: beside the program's other tasks, on a socket the
program bound, the lifespan around serving, stopped by should_exit, shutdown(), the
task's cancellation or --max-requests, with the requests in flight finishing. Each case runs
on asyncio's loop and on uvloop's."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from support.embedding_apps import RecordingASGI
from support.event_loops import LOOP_KINDS, Ticker, run_on
from support.ports import HOST, bound_listener, free_port
from support.subprocess_env import tool_env
from support.waiting import wait_until

from cymongoose import Server
from cymongoose.config import Config

pytestmark = pytest.mark.timeout(60)

WAIT_S = 10.0  # for any one condition (generous: these run beside a CPU hog too)


async def _refused(port: int) -> bool:
    """Whether a new client of `port` is refused now (one that gets in is closed again; one
    reset while connecting met the listener closing: not yet)."""
    try:
        _, writer = await asyncio.open_connection(HOST, port)
    except ConnectionRefusedError:
        return True
    except ConnectionResetError:
        return False
    writer.close()
    return False


async def _curl(url: str) -> bytes:
    """GET `url` with curl, in a subprocess the loop waits on without blocking."""
    proc = await asyncio.create_subprocess_exec(
        "curl", "-sS", "--max-time", "10", url, env=tool_env(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode == 0, err
    return out


async def _started(server: Server, serving: asyncio.Task[None]) -> None:
    # serving.done(): a failure at start-up shows as its exception, not as a timeout.
    await wait_until(lambda: server.started or serving.done(), WAIT_S, "the server to listen")
    if serving.done():
        serving.result()


@pytest.mark.parametrize("loop_kind", LOOP_KINDS)
def test_serves_beside_the_programs_own_tasks(loop_kind: str) -> None:
    async def main() -> None:
        app = RecordingASGI()

        async def shout(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write((await reader.readline()).upper())
            await writer.drain()
            writer.close()

        ticker = Ticker()
        own_server = await asyncio.start_server(shout, HOST, 0)  # the program's own TCP
        shout_port = own_server.sockets[0].getsockname()[1]
        sock = bound_listener()
        port = sock.getsockname()[1]
        server = Server(Config(), app=app)
        assert not server.started and not server.should_exit
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        await _started(server, serving)
        assert app.events == ["startup"]  # the lifespan startup came first

        before = ticker.ticks
        async with httpx.AsyncClient(timeout=WAIT_S) as client:
            replies = await asyncio.gather(
                *(client.get(f"http://{HOST}:{port}/r{i}") for i in range(20)),
                _curl(f"http://{HOST}:{port}/curl"))
        assert [r.text for r in replies[:20]] == [f"/r{i}" for i in range(20)]
        assert replies[20] == b"/curl"
        reader, writer = await asyncio.open_connection(HOST, shout_port)
        writer.write(b"ping\n")
        assert await reader.readline() == b"PING\n"
        writer.close()
        await wait_until(lambda: ticker.ticks > before + 3, WAIT_S, "the program's ticker to tick")

        server.should_exit = True
        await asyncio.wait_for(serving, WAIT_S)
        assert app.events == ["startup", "shutdown"]
        assert sock.fileno() == -1  # closed, as uvicorn closes the sockets it was given
        assert await _refused(port)
        assert not ticker.task.done()  # the program's tasks are its own
        ticker.task.cancel()
        own_server.close()
        await own_server.wait_closed()

    run_on(loop_kind, main)


@pytest.mark.parametrize("loop_kind", LOOP_KINDS)
def test_should_exit_lets_requests_in_flight_finish(loop_kind: str) -> None:
    async def main() -> None:
        app = RecordingASGI()
        app.release = asyncio.Event()
        sock = bound_listener()
        port = sock.getsockname()[1]
        server = Server(Config(graceful_timeout=20), app=app)
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        await _started(server, serving)
        async with httpx.AsyncClient(timeout=WAIT_S) as client:
            slow = asyncio.ensure_future(client.get(f"http://{HOST}:{port}/slow"))
            await wait_until(lambda: app.in_flight == 1, WAIT_S, "the request to be in flight")
            server.should_exit = True
            # The server stops taking clients while the request is still in flight ...
            await wait_until(lambda: _refused(port), WAIT_S, "new clients to be refused")
            assert not slow.done() and not serving.done()
            assert app.events == ["startup"]  # the lifespan shutdown waits for the drain
            app.release.set()
            reply = await slow  # ... and the request finishes
        assert (reply.status_code, reply.text) == (200, "/slow")
        await asyncio.wait_for(serving, WAIT_S)
        assert app.events == ["startup", "shutdown"]

    run_on(loop_kind, main)


@pytest.mark.parametrize("loop_kind", LOOP_KINDS)
def test_shutdown_drains_and_returns_once_stopped(loop_kind: str) -> None:
    async def main() -> None:
        app = RecordingASGI()
        server = Server(Config(), app=app)
        await server.shutdown()  # not serving: returns at once
        server.should_exit = False
        sock = bound_listener()
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        await _started(server, serving)
        await asyncio.wait_for(server.shutdown(), WAIT_S)
        assert serving.done() and serving.result() is None
        assert app.events == ["startup", "shutdown"]
        await server.shutdown()  # again: stopped already

    run_on(loop_kind, main)


def test_binds_the_configs_port_when_given_no_sockets() -> None:
    async def main() -> None:
        port = free_port()
        server = Server(Config(host=HOST, port=port), app=RecordingASGI())
        serving = asyncio.ensure_future(server.serve())
        await _started(server, serving)
        async with httpx.AsyncClient(timeout=WAIT_S) as client:
            assert (await client.get(f"http://{HOST}:{port}/tcp")).text == "/tcp"
        await asyncio.wait_for(server.shutdown(), WAIT_S)
        assert await _refused(port)

    run_on("asyncio", main)


def test_binds_the_configs_unix_socket(tmp_path: Path) -> None:
    path = tmp_path / "app.sock"

    async def main() -> None:
        server = Server(Config(uds=str(path)), app=RecordingASGI())
        serving = asyncio.ensure_future(server.serve())
        await _started(server, serving)
        transport = httpx.AsyncHTTPTransport(uds=str(path))
        async with httpx.AsyncClient(transport=transport, timeout=WAIT_S) as client:
            assert (await client.get("http://local/uds")).text == "/uds"
        await asyncio.wait_for(server.shutdown(), WAIT_S)

    run_on("asyncio", main)
    assert not path.exists()  # the socket file it made is gone


def test_the_app_may_come_from_the_config_as_an_import_string() -> None:
    async def main() -> None:
        sock = bound_listener()
        port = sock.getsockname()[1]
        server = Server(Config(app="support.embedding_apps:lifespan_app"))
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        await _started(server, serving)
        async with httpx.AsyncClient(timeout=WAIT_S) as client:
            assert (await client.get(f"http://{HOST}:{port}/")).text == "ok"
        await asyncio.wait_for(server.shutdown(), WAIT_S)

    run_on("asyncio", main)


def test_cancelling_the_serving_task_still_stops_cleanly() -> None:
    async def main() -> None:
        app = RecordingASGI()
        sock = bound_listener()
        server = Server(Config(), app=app)
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        await _started(server, serving)
        serving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(serving, WAIT_S)
        assert app.events == ["startup", "shutdown"]
        assert sock.fileno() == -1

    run_on("asyncio", main)


def test_max_requests_stops_it_by_itself() -> None:
    async def main() -> None:
        app = RecordingASGI()
        sock = bound_listener()
        port = sock.getsockname()[1]
        server = Server(Config(max_requests=3), app=app)
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        await _started(server, serving)
        async with httpx.AsyncClient(timeout=WAIT_S) as client:
            for i in range(3):
                assert (await client.get(f"http://{HOST}:{port}/{i}")).status_code == 200
        await asyncio.wait_for(serving, WAIT_S)
        assert server.should_exit and app.events == ["startup", "shutdown"]

    run_on("asyncio", main)
