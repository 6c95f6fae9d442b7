"""The compression phase (issue 39): response compression, ours in C against the peers'.

Loads (each a wrk run, -c{connections}, named <body>-<coding>): the 10 KiB JSON and the 100
KiB HTML of compressbodies.py, asked for with `Accept-Encoding: gzip` or `zstd` (wrk -H), or
with none (identity, ours only: the baseline). Contenders, one process each:
  ours, WSGI (the Flask app) and ASGI (the Starlette app), --compression on;
  Starlette + GZipMiddleware (level 3) on uvicorn (uvloop, httptools) and on granian;
  Flask + Flask-Compress (level 3, zstd level 3) on granian's WSGI interface;
  nginx serving the same bytes as static files with `gzip on`, at level 3 and at its default 1;
and the precompressed page (static-html-gzip: page.html.gz beside page.html): ours --static
and raw serve_dir() against nginx `gzip_static on`.
Every contender's answer to every load is checked first (status 200, Content-Encoding as
asked, the body decoding to the exact bytes) and again after the runs; a load that fails is
reported and never measured. The compressed sizes come from those answers, beside the
libraries' own (zlib, zstandard) at level 3. Runs are interleaved: per round, each load in
turn on every contender (each round starting with another), the server on its CPU and wrk on
the other, as the other phases.
Then the event stream: ours (ASGI) with gzip, zstd and none, and uvicorn + GZipMiddleware
asked for gzip, one request after the other in turn, each on a new connection, timed from
the request to the first event decoded (ssefirst.py), --compression-sse requests each.
Last, codec_costs.py's table (brotli against gzip and zstd in-process). It all goes to
results/compression.json and compression.md (compressreport.py).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from . import compressbodies, httpcheck, procstat, ssefirst
from . import contenders as ck
from . import wrk as wrkmod

log = logging.getLogger("bench")

ENV = "compression"
APPS = ck.SERVERS_DIR / "compression_apps.py"
NGINX = ck.SERVERS_DIR / "nginx_compression.conf"
STATIC_OURS = ck.SERVERS_DIR / "cymongoose_static.py"
BODY_DIR = ck.CACHE_DIR / "compression"
PATHS = {"json": "/data.json", "html": "/page.html"}
CTYPES = {b: t.split(";")[0] for b, _f, t in compressbodies.BODIES}
SSE_INTERVAL_MS = 100
SSE_TIMEOUT_S = 2.0


@dataclass
class Spec:
    contender: ck.Contender
    loads: list[tuple[str, str]]  # (body id, coding); body "static-html" for the .gz sibling
    prefix: str = ""  # URL prefix of the files (ours --static)
    values: dict[str, str] = field(default_factory=dict)  # template values (nginx)
    sse: list[str] = field(default_factory=list)  # codings of the event-stream part

    @property
    def name(self) -> str:
        return self.contender.name


def load_id(body: str, coding: str) -> str:
    return f"{body}-{coding}"


def _peer_requires(project_python: str) -> list[str]:
    # The frameworks at the .venv's versions, so only the server (and its compressor) differs.
    out = ["granian", "uvicorn", "uvloop", "httptools", "flask-compress", "zstandard"]
    for name, version in ck.package_versions(project_python, ["starlette", "flask"]).items():
        out.append(f"{name}=={version}" if version not in ("missing", "unknown") else name)
    return out


def _c(name: str, label: str, command: list[str], notes: str, *, env: str = ENV,
       packages: list[str] | None = None, file: Any = APPS, **kw: Any) -> ck.Contender:
    return ck.Contender(name=name, label=label, kind="compression", file=file,
                        command=command, env=env, packages=packages or [], notes=notes,
                        phases=["compression"], **kw)


def specs(project_python: str) -> list[Spec]:
    both = [(b, c) for b in ("json", "html") for c in ("gzip", "zstd", "identity")]
    gz = [(b, "gzip") for b in ("json", "html")]
    ours = ["{python}", "-m", "cymongoose", "--host", "127.0.0.1", "--port", "{port}",
            "--log-level", "warning"]
    static = [("static-html", "gzip")]
    requires = _peer_requires(project_python)
    out = [
        Spec(_c("cmp-cymongoose-wsgi", "ours WSGI (Flask)",
                ours + ["compression_apps:flask_app", "--interface", "wsgi",
                        "--compression", "on"],
                "cymongoose CLI, 1 process, --compression on (gzip 3, zstd 3, in C)",
                env="project", packages=["cymongoose", "flask"], quick=True), both),
        Spec(_c("cmp-cymongoose-asgi", "ours ASGI (Starlette)",
                ours + ["compression_apps:starlette_app", "--interface", "asgi",
                        "--compression", "on"],
                "cymongoose CLI, 1 process, --compression on (gzip 3, zstd 3, in C)",
                env="project", packages=["cymongoose", "starlette"], quick=True), both,
             sse=["gzip", "zstd", "identity"]),
        Spec(_c("cmp-uvicorn-gzip", "Starlette GZipMiddleware on uvicorn",
                ["{python}", "-m", "uvicorn", "compression_apps:starlette_gzip_app",
                 "--host", "127.0.0.1", "--port", "{port}", "--loop", "uvloop", "--http",
                 "httptools", "--no-access-log", "--log-level", "warning"],
                "1 worker, uvloop + httptools; GZipMiddleware(compresslevel=3, "
                "minimum_size=512)", packages=["uvicorn", "starlette"], requires=requires,
                quick=True), gz, sse=["gzip"]),
        Spec(_c("cmp-granian-gzip", "Starlette GZipMiddleware on granian",
                ["{python}", "-m", "granian", "--interface", "asgi", "--workers", "1",
                 "--host", "127.0.0.1", "--port", "{port}", "--no-ws", "--log-level",
                 "warning", "compression_apps:starlette_gzip_app"],
                "1 worker, ASGI; GZipMiddleware(compresslevel=3, minimum_size=512)",
                packages=["granian", "starlette"], requires=requires), gz),
        Spec(_c("cmp-granian-flask-compress", "Flask-Compress on granian",
                ["{python}", "-m", "granian", "--interface", "wsgi", "--workers", "1",
                 "--blocking-threads", "8", "--host", "127.0.0.1", "--port", "{port}",
                 "--no-ws", "--log-level", "warning", "compression_apps:flask_compress_app"],
                "1 worker, WSGI, 8 blocking threads; COMPRESS_LEVEL=3, COMPRESS_ZSTD_LEVEL=3",
                packages=["granian", "flask", "flask-compress"], requires=requires,
                quick=True), [(b, c) for b in ("json", "html") for c in ("gzip", "zstd")]),
    ]
    nginx = ["nginx", "-p", "{workdir}", "-c", "{config}", "-e", "stderr"]
    for level, quick in ((3, True), (1, False)):
        out.append(Spec(_c(f"cmp-nginx-gzip{level}", f"nginx gzip on, level {level}", nginx,
                           f"1 worker, static files, gzip on, gzip_comp_level {level}"
                           + (" (nginx's default)" if level == 1 else ""),
                           env="system", file=NGINX, template=True, tools=["nginx"],
                           version_cmd=["nginx", "-v"], quick=quick), gz,
                        values={"gzip": "on", "level": str(level), "gzip_static": "off"}))
    out += [
        Spec(_c("cmp-cymongoose-static", "ours --static",
                ours + ["compression_apps:starlette_app", "--interface", "asgi", "--static",
                        "/static={static_dir}"],
                "cymongoose CLI, 1 process, --static /static=DIR (page.html.gz beside "
                "page.html), no --compression", env="project", packages=["cymongoose"],
                quick=True), static, prefix="/static"),
        Spec(_c("cmp-cymongoose-serve-dir", "ours serve_dir",
                ["{python}", "{file}", "--port", "{port}", "--root", "{static_dir}"],
                "Manager + handler calling conn.serve_dir() (page.html.gz beside page.html)",
                env="project", packages=["cymongoose"], file=STATIC_OURS), static),
        Spec(_c("cmp-nginx-gzip-static", "nginx gzip_static on", nginx,
                "1 worker, sendfile, gzip_static on (page.html.gz beside page.html)",
                env="system", file=NGINX, template=True, tools=["nginx"],
                version_cmd=["nginx", "-v"], quick=True), static,
             values={"gzip": "off", "level": "1", "gzip_static": "on"}),
    ]
    return out


def names() -> list[str]:
    return [s.name for s in specs("python3")]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--compression-sse", type=int,
                   help="requests per setting of the event-stream part (default 1000, so "
                   "that its p99 is the 10th worst, not the 4th; quick 200)")


class CompressionPhase:
    def __init__(self, bench: Any, only: set[str], skip: set[str], *, quick: bool,
                 sse_requests: int | None) -> None:
        """`bench`: a Bench of its own (its status and runs are compression.json's)."""
        self.bench = bench
        bench.static_dir = BODY_DIR
        self.quick = quick
        self.only, self.skip = only, skip
        self.sse_requests = sse_requests or (200 if quick else 1000)
        self.checks: dict[str, dict[str, Any]] = {}  # name -> load -> answer facts
        self.sse: dict[str, dict[str, Any]] = {}
        self.references: dict[str, dict[str, int]] = {}
        self.bodies: dict[str, int] = {}
        self.codecs: dict[str, Any] | None = None
        self.settings: dict[str, Any] = {}

    def _selected(self, all_specs: list[Spec]) -> list[Spec]:
        return [s for s in all_specs if s.name not in self.skip
                and (s.name in self.only if self.only else (s.contender.quick or not self.quick))]

    def expected(self, body: str) -> tuple[str, bytes, str]:
        """(path, decoded body, Content-Type) of a load's body id."""
        if body == "static-html":
            return PATHS["html"], (BODY_DIR / "page.html").read_bytes(), "text/html"
        return PATHS[body], (BODY_DIR / PATHS[body][1:]).read_bytes(), CTYPES[body]

    def check(self, spec: Spec, port: int, body: str, coding: str) -> dict[str, Any]:
        """The load's answer checked twice on one connection; its facts, or CheckFailed."""
        path, want, ctype = self.expected(body)
        headers = [f"Accept-Encoding: {coding}"] if coding != "identity" else []
        responses = httpcheck.exchange(port, [spec.prefix + path] * 2, headers=headers)
        if len(responses) < 2:
            raise httpcheck.CheckFailed("keep-alive not honoured")
        for resp in responses:
            what = f"GET {spec.prefix + path} ({coding})"
            if resp.status != 200:
                raise httpcheck.CheckFailed(f"{what}: status {resp.status}")
            got_ctype = (resp.header("content-type") or "").split(";")[0].strip().lower()
            if got_ctype != ctype:
                raise httpcheck.CheckFailed(f"{what}: Content-Type {got_ctype!r}")
            enc = (resp.header("content-encoding") or "identity").lower()
            if enc != coding:
                raise httpcheck.CheckFailed(f"{what}: Content-Encoding {enc!r}, expected "
                                            f"{coding!r}")
            try:
                decoded = compressbodies.decode(resp.body, enc)
            except Exception as exc:
                raise httpcheck.CheckFailed(f"{what}: does not decode: {exc}") from None
            if decoded != want:
                raise httpcheck.CheckFailed(f"{what}: decodes to {len(decoded)} bytes that "
                                            f"differ from the expected {len(want)}")
        first = responses[0]
        facts = {"status": first.status, "content_encoding": first.header("content-encoding"),
                 "vary": first.header("vary"), "body_bytes": len(first.body),
                 "head_bytes": len(first.raw_head) + 4,
                 "framing": "chunked" if first.header("transfer-encoding") else
                 "content-length"}
        if body == "static-html":
            facts["is_sibling"] = first.body == (BODY_DIR / "page.html.gz").read_bytes()
        return facts

    def run(self) -> None:
        bench = self.bench
        paths = compressbodies.write(BODY_DIR)
        for body_id in ("json", "html"):
            data = paths[body_id].read_bytes()
            self.bodies[body_id] = len(data)
            self.references[body_id] = compressbodies.reference_sizes(data)
        project_python = ck.ROOT / ".venv" / "bin" / "python"
        chosen = self._selected(specs(str(project_python) if project_python.exists()
                                      else "python3"))
        log.info("== compression phase: %s", ", ".join(s.name for s in chosen))
        ready = {c.name for c in bench.prepare([s.contender for s in chosen])}
        running: dict[str, tuple[Spec, ck.Running, list[tuple[str, str]]]] = {}
        for spec in (s for s in chosen if s.name in ready):
            r = bench.launch(spec.contender, values=spec.values)
            if r is None:
                continue
            good = []
            facts = self.checks.setdefault(spec.name, {})
            for body, coding in spec.loads:
                try:
                    facts[load_id(body, coding)] = self.check(spec, r.port, body, coding)
                    good.append((body, coding))
                except (httpcheck.CheckFailed, OSError) as exc:
                    facts[load_id(body, coding)] = {"error": str(exc)}
                    log.warning("%s: %s not measured: %s", spec.name, load_id(body, coding),
                                exc)
            if not good:
                bench.exclude(spec.name, "wrong answer", "every load failed its check")
                bench.stop(r)
                continue
            bench.status[spec.name]["check"] = "answers checked: " + ", ".join(
                load_id(*ld) for ld in good)
            running[spec.name] = (spec, r, good)
        script = bench.script("compression", [])
        loads = list(dict.fromkeys(ld for _s, _r, good in running.values() for ld in good))
        names_ = list(running)
        args = bench.args
        # The quick form: one round (its contenders are the quick ones).
        rounds = 1 if self.quick else args.rounds
        for rnd in range(1, rounds + 1):
            turn = names_[(rnd - 1) % max(len(names_), 1):] + names_[:(rnd - 1) % max(
                len(names_), 1)]
            for body, coding in loads:
                for name in turn:
                    spec, r, good = running[name]
                    if (body, coding) not in good or not bench.ok(name):
                        continue
                    self._measure(spec, r, body, coding, rnd, script)
        for name, (spec, r, good) in running.items():
            if bench.ok(name):
                for body, coding in good:
                    try:
                        self.check(spec, r.port, body, coding)
                    except (httpcheck.CheckFailed, OSError) as exc:
                        bench.exclude(name, "wrong answer", f"after the load: {exc}")
                        bench.invalidate(name, "wrong answer after the load")
        self._sse({n: (s, r) for n, (s, r, _g) in running.items() if s.sse and bench.ok(n)})
        for _spec, r, _good in running.values():
            bench.stop(r)
        self._codecs()
        self.settings = {
            "wrk": f"wrk -t1 -c{args.connections} -d{args.duration:g}s --latency "
                   "-H 'Accept-Encoding: <coding>'",
            "duration_s": args.duration, "warmup_s": args.warmup, "rounds": rounds,
            "connections": args.connections, "server_cpu": bench.server_cpu,
            "client_cpu": bench.client_cpu, "levels": {"gzip": 3, "zstd": 3},
            "bodies": self.bodies, "static_sibling": "page.html.gz, gzip -9 (mtime 0)",
            "sse": {"requests_per_setting": self.sse_requests, "interval_ms": SSE_INTERVAL_MS,
                    "timeout_s": SSE_TIMEOUT_S, "client": "benchkit/ssefirst.py, Python, "
                    "one request at a time on a new connection, settings in turn"},
        }

    def _measure(self, spec: Spec, r: ck.Running, body: str, coding: str, rnd: int,
                 script: Any) -> None:
        bench = self.bench
        path = spec.prefix + self.expected(body)[0]
        headers = [f"Accept-Encoding: {coding}"] if coding != "identity" else []
        phase = load_id(body, coding)
        procstat.settle(r.port)
        if rnd == 1 and bench.args.warmup > 0:
            try:
                bench.wrk(r, script, bench.args.connections, bench.args.warmup,
                          f"warmup-{phase}", path=path, headers=headers)
            except wrkmod.WrkError as exc:
                bench.exclude(spec.name, "wrk failed", f"warm-up of {phase}: {exc}")
                return
            procstat.settle(r.port)
        run = bench.measure(r, phase, rnd, bench.args.connections, script, path=path,
                            headers=headers)
        if run is not None:
            run.update(body=body, coding=coding,
                       bytes_per_response=round(run["bytes"] / run["requests"], 1)
                       if run["requests"] else None)

    def _sse(self, group: dict[str, tuple[Spec, ck.Running]]) -> None:
        settings = [(name, coding) for name, (spec, _r) in group.items() for coding in spec.sse]
        if not settings:
            return
        log.info("== compression phase, event stream: %s", ", ".join(
            f"{n} {c}" for n, c in settings))
        path = f"/events?interval={SSE_INTERVAL_MS}"
        times: dict[tuple[str, str], list[float]] = {s: [] for s in settings}
        misses: dict[tuple[str, str], list[str]] = {s: [] for s in settings}
        encodings: dict[tuple[str, str], set[str]] = {s: set() for s in settings}
        deadline = time.monotonic() + max(60.0, self.sse_requests * len(settings) * 0.05)
        for i in range(self.sse_requests):
            if time.monotonic() > deadline:
                log.warning("event stream: time is up after %d requests per setting", i)
                break
            for name, coding in settings[i % len(settings):] + settings[:i % len(settings)]:
                _spec, r = group[name]
                try:
                    got = ssefirst.first_event(r.port, path,
                                               None if coding == "identity" else coding,
                                               timeout=SSE_TIMEOUT_S)
                except OSError as exc:
                    misses[(name, coding)].append(repr(exc))
                    continue
                encodings[(name, coding)].add(got.content_encoding)
                if got.seconds is None or not got.event.startswith(b"id: 0\n"):
                    misses[(name, coding)].append(got.error or f"first event {got.event!r}")
                else:
                    times[(name, coding)].append(got.seconds)
            # The streams just left end at their next write; let them before the next ones.
            time.sleep(0.002)
        for (name, coding), ts in times.items():
            ts.sort()
            q = statistics.quantiles(ts, n=100, method="inclusive") if len(ts) >= 2 else None
            self.sse.setdefault(name, {})[coding] = {
                "requests": len(ts) + len(misses[(name, coding)]), "events": len(ts),
                "misses": len(misses[(name, coding)]),
                "miss_reasons": sorted(set(misses[(name, coding)]))[:3],
                "content_encoding": sorted(encodings[(name, coding)]),
                "p50_ms": round(statistics.median(ts) * 1000, 3) if ts else None,
                "p99_ms": round(q[98] * 1000, 3) if q else None,
                "max_ms": round(ts[-1] * 1000, 3) if ts else None,
            }
            log.info("event stream %-24s %-8s first event p50 %s ms p99 %s ms (%d missed; "
                     "Content-Encoding %s)", name, coding, self.sse[name][coding]["p50_ms"],
                     self.sse[name][coding]["p99_ms"], len(misses[(name, coding)]),
                     ",".join(sorted(encodings[(name, coding)])))

    def _codecs(self) -> None:
        import importlib.util
        spec = importlib.util.spec_from_file_location("codec_costs",
                                                      ck.BENCH_DIR / "codec_costs.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        self.codecs = module.measure(0.15 if self.quick else 0.3)
