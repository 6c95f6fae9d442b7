"""TechEmpower's test types in FastAPI on an asyncpg connection pool (ASGI: `app`).

The pool is made in the lifespan (on the server's event loop, which its connections belong
to) and closed at shutdown. `timeout` bounds each connection attempt and `acquire(timeout=)`
the wait for a pooled connection, so with the database gone a request fails (500, logged by
the server) within seconds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import jinja2
from fastapi import FastAPI
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse

from realworld.apps import techempower as te

SELECT_WORLD = te.SELECT_WORLD.format("$1")
SELECT_WORLD_SLOWLY = te.SELECT_WORLD_SLOWLY.format("$1")
UPDATE_WORLD = te.UPDATE_WORLD.format("$1", "$2")

_templates = jinja2.Environment(loader=jinja2.FileSystemLoader(te.TEMPLATES), autoescape=True)
_fortunes = _templates.get_template(te.FORTUNES_TEMPLATE)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    size = te.pool_size()
    app.state.pool = await asyncpg.create_pool(te.dsn(), min_size=size, max_size=size,
                                               timeout=te.DB_TIMEOUT_S)
    try:
        yield
    finally:
        await app.state.pool.close()


app = FastAPI(lifespan=lifespan)


def _acquire() -> Any:
    return app.state.pool.acquire(timeout=te.DB_TIMEOUT_S)


def _world(row: Any) -> dict[str, int]:
    return {"id": row[0], "randomNumber": row[1]}


async def _worlds(conn: Any, ids: list[int]) -> list[dict[str, int]]:
    """Each row by its own query (one prepared statement, one round trip per row)."""
    statement = await conn.prepare(SELECT_WORLD)
    return [_world(await statement.fetchrow(i)) for i in ids]


@app.get("/json")
async def json_() -> JSONResponse:
    return JSONResponse({"message": te.HELLO})


@app.get("/plaintext")
async def plaintext() -> PlainTextResponse:
    return PlainTextResponse(te.HELLO)


@app.get("/db")
async def db() -> JSONResponse:
    async with _acquire() as conn:
        row = await conn.fetchrow(SELECT_WORLD, te.random_id())
    return JSONResponse(_world(row))


@app.get("/slowdb")
async def slowdb() -> JSONResponse:
    async with _acquire() as conn:
        row = await conn.fetchrow(SELECT_WORLD_SLOWLY, te.random_id())
    return JSONResponse(_world(row))


@app.get("/queries")
async def queries(queries: str | None = None) -> JSONResponse:
    ids = te.random_ids(te.query_count(queries))
    async with _acquire() as conn:
        worlds = await _worlds(conn, ids)
    return JSONResponse(worlds)


@app.get("/updates")
async def updates(queries: str | None = None) -> JSONResponse:
    ids = te.distinct_random_ids(te.query_count(queries))
    async with _acquire() as conn:
        worlds = await _worlds(conn, ids)
        for world in worlds:
            world["randomNumber"] = te.new_number()
        # One batch: asyncpg sends executemany's rows in one pipelined round.
        await conn.executemany(UPDATE_WORLD, [(w["randomNumber"], w["id"]) for w in worlds])
    return JSONResponse(worlds)


@app.get("/fortunes")
async def fortunes() -> HTMLResponse:
    async with _acquire() as conn:
        rows = await conn.fetch(te.SELECT_FORTUNES)
    html = _fortunes.render(fortunes=te.sorted_fortunes([(r[0], r[1]) for r in rows]))
    return HTMLResponse(html)
