"""What TechEmpower's rules say every app does the same way: the `queries` parameter's
clamping, the random ids, the fortune added at request time, the fortunes template, and the
settings read from the environment."""

from __future__ import annotations

import os
import random
from pathlib import Path

WORLD_ROWS = 10_000
MAX_QUERIES = 500
ADDED_FORTUNE = "Additional fortune added at request time."
HELLO = "Hello, World!"
# One template for all three apps: Jinja2 (Flask, FastAPI) and Django's engine read this
# loop alike, and both escape by default.
TEMPLATES = Path(__file__).resolve().parent / "templates"
FORTUNES_TEMPLATE = "fortunes.html"
HTML = "text/html; charset=utf-8"
PLAIN = "text/plain"

# Each row by its own statement, as the db, queries and updates tests require; `{}` is where
# each driver puts its placeholder (psycopg %s, asyncpg $1).
SELECT_WORLD = "SELECT id, randomnumber FROM world WHERE id = {}"
# pg_sleep in FROM runs once per statement: the row arrives 1 ms later (the slow-query test).
SELECT_WORLD_SLOWLY = ("SELECT w.id, w.randomnumber FROM world w, pg_sleep(0.001) "
                       "WHERE w.id = {}")
SELECT_FORTUNES = "SELECT id, message FROM fortune"
UPDATE_WORLD = "UPDATE world SET randomnumber = {} WHERE id = {}"
# Seconds: how long a request may wait to connect or for a pooled connection before its
# database error (a 500) rather than a hang when the database is gone.
DB_TIMEOUT_S = 3.0


def dsn() -> str:
    return os.environ["REALWORLD_DSN"]


def pool_size() -> int:
    return int(os.environ.get("REALWORLD_POOL", "16"))


def query_count(raw: str | None) -> int:
    """TechEmpower's clamping: a missing or non-integer value is 1, then 1..500."""
    try:
        n = int(raw or "")
    except ValueError:
        return 1
    return min(max(n, 1), MAX_QUERIES)


def random_id() -> int:
    return random.randint(1, WORLD_ROWS)


def random_ids(n: int) -> list[int]:
    """`n` ids for the queries test, each drawn on its own (repeats allowed)."""
    return [random.randint(1, WORLD_ROWS) for _ in range(n)]


def distinct_random_ids(n: int) -> list[int]:
    """`n` different ids, for updates: one request never writes a row twice, so its
    answer is what the table holds after it; sorted, so concurrent batches lock rows in one
    order and never deadlock."""
    return sorted(random.sample(range(1, WORLD_ROWS + 1), n))


def new_number() -> int:
    return random.randint(1, WORLD_ROWS)


def sorted_fortunes(rows: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The rows plus the one added at request time, sorted by message."""
    return sorted([*rows, (0, ADDED_FORTUNE)], key=lambda row: row[1])
