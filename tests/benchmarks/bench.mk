# Included by the root Makefile. `make bench`: every contender and every phase (hello, static,
# rss, connections, close, clients256, workers, pythons, proxy, idle, realworld, threads), full
# length, results/ and the README's Performance block. `make bench-quick`: the subset,
# results/quick/ (2-3 minutes, 2-3 more for the proxy phase's short form, a few for the short
# forms of the traffic shapes: close, clients256, and pythons on the project's own Python
# only, and about 5 for the realworld phase's).
# The traffic shapes: --phases close,clients256,workers,pythons; --workers N (the workers
# phase; it runs only where the machine has N + 2 CPUs); --pythons 3.10,3.12,3.13t (the
# pythons phase; default every CPython 3.10+ of pyenv or PATH and the free-threaded 3.13t that
# make test caches, GIL off, each built under .envs/ once per source tree).
# Extra runner options: make bench BENCH_ARGS="--only cymongoose-raw,mongoose-c".
# One phase alone: make bench BENCH_ARGS="--phases proxy" (the reverse proxies, ~12 minutes:
# results/proxy.json and proxy.md, and the README's block re-rendered with them).
# BENCH_ARGS="--phases idle": a fresh client's first byte, quiet and with 15,000 idle
# connections held (--idle-count; 5,000 in the quick form), ours against Mongoose in C and
# tuned nginx (~5 minutes; quick ~1): results/idle.json and idle.md, the same way.
# BENCH_ARGS="--phases realworld": TechEmpower's test types (json, plaintext, pipelined, db,
# queries, fortunes, updates, slowdb) against a PostgreSQL cluster the phase starts and stops,
# on the apps of tests/realworld (Flask + psycopg, FastAPI + asyncpg, Django WSGI and ASGI):
# ours against granian, gunicorn gthread and uvicorn, one worker each, server on CPU 0, wrk
# and PostgreSQL on CPU 1; req/s, p99, errors, server and database CPU, WSGI apps in flight
# (~1 hour; quick ~5 minutes: Flask and FastAPI, 6 test types, 1 round): results/realworld.json
# and realworld.md. Narrower: --realworld-apps flask --realworld-tests db,slowdb, or
# --only rw-flask-cymongoose,rw-flask-granian-b8 (run.py --list names them);
# --realworld-threads 8,32 adds ours at those --threads; --realworld-outage db stops the
# database halfway through db's first run (the run reports non-2xx, the phase goes on).
# BENCH_ARGS="--phases threads" (issue 37): --loop-threads on the free-threaded 3.13t that
# `make py313t-build` caches (--ft-python), GIL off: --loop-threads 1 against one plain process
# and against the 3.13 GIL build (--gil-python) and granian's free-threaded wheel, raw, WSGI and
# ASGI hello on one CPU; N loops against --workers N where the machine has N + 2 CPUs; RSS of
# --loop-threads N against --workers N (N = 2 and 4) for Flask and FastAPI (goal <= 0.6). Our
# package is built for each interpreter under .envs/ once per source tree; without the
# free-threaded interpreter the phase is skipped, saying why (~10 minutes; quick ~4):
# results/threads.json and threads.md.
# BENCH_ARGS="--phases compression" (issue 39): response compression, a 10 KiB JSON and a
# 100 KiB HTML body with gzip, zstd or none, ours (WSGI, ASGI, --compression on) against
# Starlette's GZipMiddleware (uvicorn, granian), Flask-Compress (granian) and nginx gzip; a
# precompressed page, ours (--static, serve_dir) against nginx gzip_static; compressed sizes,
# the first event of a stream, and codec_costs.py (brotli against gzip and zstd) (~10 minutes;
# quick ~3): results/compression.json and compression.md, and the bench-compression tables of
# the README and docs/performance.md.
BENCH_ARGS ?=

.PHONY: bench bench-quick bench-setup bench-profile bench-ws

# wrk, nginx, caddy, valgrind from Debian (tools/debian-packages.txt); our extension built in
# .venv; matplotlib for the chart. Each Python peer gets its own venv from the runner itself.
bench-setup: debian-packages setup
	$(UV) sync --inexact --group dev --group bench

bench: bench-setup
	UV="$(UV)" $(UV) run --no-sync python tests/benchmarks/run.py $(BENCH_ARGS)

bench-quick: bench-setup
	UV="$(UV)" $(UV) run --no-sync python tests/benchmarks/run.py --quick $(BENCH_ARGS)

# The pythons phase on CPython 3.14, which runs only inside make test's sid root (make
# py314-build): the runner runs there on the 3.14 venv (ours built from the tree), with sid's
# wrk (installed into the root the first time; the mirror's sid is a snapshot whose Release
# file has expired, hence Check-Valid-Until) and the peers' venvs in .envs-py314/; its rows
# join the per-Python table of results/results.json and the docs' blocks (--merge-pythons),
# dated. Run it after a full make bench, which would replace them. About 5 minutes.
.PHONY: bench-py314
bench-py314: py314-build
	$(IN_PY314_ROOT) sh -c 'command -v wrk >/dev/null || { \
	    apt-get update -qq -o Acquire::Check-Valid-Until=false && \
	    apt-get install -y -qq wrk >/dev/null; }'
	$(IN_PY314_ROOT) $(PY314_VENV)/bin/python -m pip install --quiet \
	    --disable-pip-version-check uv
	$(IN_PY314_ROOT) env UV="$(CURDIR)/$(PY314_VENV)/bin/python -m uv" \
	    CYMONGOOSE_BENCH_ENVS=$(CURDIR)/tests/benchmarks/.envs-py314 \
	    $(PY314_VENV)/bin/python tests/benchmarks/run.py --phases pythons --pythons 3.14 \
	    --merge-pythons --no-chart $(BENCH_ARGS)

# Instruction counts per request, ours vs the C ceiling, under callgrind (docs/performance.md).
bench-profile: bench-setup
	UV="$(UV)" $(UV) run --no-sync python tests/benchmarks/profile_callgrind.py $(BENCH_ARGS)

# WebSocket echo: ours, uvicorn and granian on the ASGI echo app, a C client (ws_echo.py).
bench-ws: bench-setup
	UV="$(UV)" $(UV) run --no-sync python tests/benchmarks/ws_echo.py $(BENCH_ARGS)

# TLS: handshake rate and HTTPS hello throughput, ours against nginx with the same
# certificates (tls_bench.py; results/tls/). Extra options: BENCH_TLS_ARGS="--kinds rsa4096".
BENCH_TLS_ARGS ?=
.PHONY: bench-tls
bench-tls: bench-setup
	UV="$(UV)" $(UV) run --no-sync python tests/benchmarks/tls_bench.py $(BENCH_TLS_ARGS)

# HTTP/2 (h2c): h2load against ours (raw, WSGI, ASGI; and ours over HTTP/1.1), granian,
# hypercorn and nginx on the same hello apps (h2_bench.py; results/http2/). Extra options:
# BENCH_HTTP2_ARGS="--only cymongoose-raw,nginx --rounds 5".
BENCH_HTTP2_ARGS ?=
.PHONY: bench-http2
bench-http2: bench-setup
	UV="$(UV)" $(UV) run --no-sync python tests/benchmarks/h2_bench.py $(BENCH_HTTP2_ARGS)

# The production options (docs/operations.md): --metrics overhead on the hello apps, admitted
# and shed latency under twice the --limit-concurrency, counters against the access log.
.PHONY: bench-operations
bench-operations: bench-setup
	$(UV) run --no-sync python tests/benchmarks/operations_bench.py $(BENCH_ARGS)

# One shared listening socket against a socket per worker (--reuse-port, docs/deployment.md):
# req/s, p99 and how evenly the workers share the work, keep-alive and a connection per
# request. BENCH_ARGS="--workers 8" where the machine has the CPUs.
.PHONY: bench-reuse-port
bench-reuse-port: bench-setup
	$(UV) run --no-sync python tests/benchmarks/reuse_port_bench.py $(BENCH_ARGS)
