"""TechEmpower's test types in Flask on a psycopg connection pool (WSGI: `app`).

The pool is made on the first request that needs it, not at import: a server that forks
workers after loading the app would otherwise share one pool's connections and threads
between processes. Its `timeout` bounds the wait for a connection and `connect_timeout` each
connection attempt, so with the database gone a request fails (500) within seconds."""

from __future__ import annotations

import threading
from typing import Any

from flask import Flask, Response, jsonify, render_template, request
from psycopg_pool import ConnectionPool

from realworld.apps import techempower as te
from realworld.apps.in_flight import InFlight

app = Flask(__name__, template_folder=str(te.TEMPLATES))
app.wsgi_app = InFlight(app.wsgi_app)  # type: ignore[method-assign]

SELECT_WORLD = te.SELECT_WORLD.format("%s")
SELECT_WORLD_SLOWLY = te.SELECT_WORLD_SLOWLY.format("%s")
UPDATE_WORLD = te.UPDATE_WORLD.format("%s", "%s")

_pool: ConnectionPool | None = None
_pool_lock = threading.Lock()


def pool() -> ConnectionPool:
    global _pool
    with _pool_lock:
        if _pool is None:
            size = te.pool_size()
            _pool = ConnectionPool(te.dsn(), min_size=size, max_size=size,
                                   timeout=te.DB_TIMEOUT_S, name="realworld",
                                   kwargs={"connect_timeout": int(te.DB_TIMEOUT_S),
                                           # No BEGIN/COMMIT round trips around a read.
                                           "autocommit": True})
        return _pool


def _world(row: Any) -> dict[str, int]:
    return {"id": row[0], "randomNumber": row[1]}


@app.route("/json")
def json_() -> Response:
    return jsonify(message=te.HELLO)


@app.route("/plaintext")
def plaintext() -> Response:
    return Response(te.HELLO, content_type=te.PLAIN)


@app.route("/db")
def db() -> Response:
    with pool().connection() as conn:
        row = conn.execute(SELECT_WORLD, (te.random_id(),)).fetchone()
    return jsonify(_world(row))


@app.route("/slowdb")
def slowdb() -> Response:
    with pool().connection() as conn:
        row = conn.execute(SELECT_WORLD_SLOWLY, (te.random_id(),)).fetchone()
    return jsonify(_world(row))


@app.route("/queries")
def queries() -> Response:
    ids = te.random_ids(te.query_count(request.args.get("queries")))
    with pool().connection() as conn, conn.cursor() as cur:
        worlds = [_world(cur.execute(SELECT_WORLD, (i,)).fetchone()) for i in ids]
    return jsonify(worlds)


@app.route("/updates")
def updates() -> Response:
    ids = te.distinct_random_ids(te.query_count(request.args.get("queries")))
    with pool().connection() as conn:
        with conn.cursor() as cur:
            worlds = [_world(cur.execute(SELECT_WORLD, (i,)).fetchone()) for i in ids]
            for world in worlds:
                world["randomNumber"] = te.new_number()
            # One batch: psycopg pipelines executemany's statements.
            cur.executemany(UPDATE_WORLD, [(w["randomNumber"], w["id"]) for w in worlds])
    return jsonify(worlds)


@app.route("/fortunes")
def fortunes() -> Response:
    with pool().connection() as conn:
        rows = conn.execute(te.SELECT_FORTUNES).fetchall()
    html = render_template(te.FORTUNES_TEMPLATE, fortunes=te.sorted_fortunes(rows))
    return Response(html, content_type=te.HTML)
