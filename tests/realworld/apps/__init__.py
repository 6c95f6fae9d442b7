"""TechEmpower's test types written for Flask + psycopg's pool (WSGI), FastAPI + an asyncpg
pool (ASGI) and Django's ORM (WSGI and ASGI), each reading REALWORLD_DSN (and REALWORLD_POOL,
the pool's size, 16 by default) from the environment; what they share is in techempower.py.

Endpoints: /json, /plaintext, /db, /queries?queries=N, /fortunes, /updates?queries=N, and
/slowdb (one world row fetched by a query that also sleeps 1 ms in the database, pg_sleep).
The WSGI apps also answer /_stats (in_flight.py). A database error is a 500 from the
framework, logged; the pools' connect and acquire timeouts keep a gone database from
holding a request longer than a few seconds."""
