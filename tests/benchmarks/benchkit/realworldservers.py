"""The realworld phase's contenders: each TechEmpower-style app of tests/realworld/apps on ours
and on the peers, one worker process each.

They are made here rather than declared in servers/ (whose files serve the hello phases): the
same app module runs on every server, imported by name from tests/ (the contender's `file` is
the tests/realworld package, so its working directory is tests/). Ours runs from the
project's .venv; the peers share one venv, "realworld", with the same versions of the
frameworks and database drivers as the .venv (read from it), so only the server differs.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import contenders as ck

PACKAGE = ck.ROOT / "tests" / "realworld"
ENV = "realworld"
PEER_SERVERS = ["granian", "gunicorn", "uvicorn", "httptools"]
# Pinned to the .venv's versions when it has them (`pip install name==version`).
PEER_APP_PACKAGES = ["flask", "fastapi", "django", "psycopg", "psycopg-pool", "asyncpg",
                     "uvloop"]
QUICK = ("rw-flask-cymongoose", "rw-flask-granian-b8", "rw-flask-gunicorn-t32",
         "rw-fastapi-cymongoose", "rw-fastapi-uvicorn", "rw-fastapi-granian")


@dataclass(frozen=True)
class App:
    id: str
    label: str
    ref: str  # module:attribute, imported from tests/
    interface: str  # "wsgi" or "asgi"
    peers: str  # how the report names the peers it is compared with
    packages: tuple[str, ...]  # whose versions the report shows


APPS = [
    App("flask", "Flask + psycopg pool (WSGI)", "realworld.apps.flask_psycopg:app", "wsgi",
        "granian's and gunicorn's settings", ("flask", "psycopg", "psycopg-pool")),
    App("fastapi", "FastAPI + asyncpg pool (ASGI)", "realworld.apps.fastapi_asyncpg:app",
        "asgi", "uvicorn and granian", ("fastapi", "asyncpg", "uvloop")),
    App("django-wsgi", "Django ORM (WSGI)", "realworld.apps.django_world.wsgi:application",
        "wsgi", "granian's and gunicorn's settings", ("django", "psycopg", "psycopg-pool")),
    App("django-asgi", "Django ORM (ASGI)", "realworld.apps.django_world.asgi:application",
        "asgi", "uvicorn and granian", ("django", "psycopg", "psycopg-pool")),
]
APP_IDS = [a.id for a in APPS]
# The peers' settings per app: granian's blocking threads, gunicorn gthread's threads.
GRANIAN_BLOCKING = {"flask": (1, 8, 32), "django-wsgi": (8, 32)}
GUNICORN_THREADS = {"flask": (8, 32), "django-wsgi": (8, 32)}
# Ours with --threads N besides the default, for these apps (the --realworld-threads values).
OURS_THREADS_APPS = ("flask",)


def is_ours(name: str) -> bool:
    return "-cymongoose" in name


def app_of(name: str) -> App:
    return next(a for a in APPS if name.startswith(f"rw-{a.id}-"))


def _peer_requires(project_python: str) -> list[str]:
    out = list(PEER_SERVERS)
    for name, version in ck.package_versions(project_python, PEER_APP_PACKAGES).items():
        # psycopg's binary build (libpq inside), as in the .venv.
        name = "psycopg[binary]" if name == "psycopg" else name
        out.append(f"{name}=={version}" if version not in ("missing", "unknown") else name)
    return out


def _contender(app: App, server: str, name: str, label: str, command: list[str],
               notes: str, env: str = ENV) -> ck.Contender:
    """`server`: the distribution whose version the report shows first."""
    return ck.Contender(name=name, label=label, kind="realworld", file=PACKAGE,
                        command=command, env=env, packages=[server, *app.packages],
                        notes=notes, quick=name in QUICK, phases=["realworld"])


def _ours(app: App, threads: int | None) -> ck.Contender:
    name = f"rw-{app.id}-cymongoose" + (f"-t{threads}" if threads else "")
    command = ["{python}", "-m", "cymongoose", app.ref, "--interface", app.interface,
               "--host", "127.0.0.1", "--port", "{port}", "--log-level", "warning"]
    if threads:
        command += ["--threads", str(threads)]
    what = ("WSGI, " + (f"--threads {threads}" if threads else "--threads default")
            if app.interface == "wsgi" else "ASGI, lifespan auto")
    label = "ours" + (f" --threads {threads}" if threads else "")
    return _contender(app, "cymongoose", name, label, command,
                      f"cymongoose CLI, 1 process, {what}", env="project")


def _granian(app: App, blocking: int | None) -> ck.Contender:
    name = f"rw-{app.id}-granian" + (f"-b{blocking}" if blocking else "")
    command = ["{python}", "-m", "granian", "--interface", app.interface, "--workers", "1"]
    if blocking:
        command += ["--blocking-threads", str(blocking)]
    command += ["--host", "127.0.0.1", "--port", "{port}", "--no-ws", "--log-level", "warning",
                app.ref]
    label = "granian" + (f" b{blocking}" if blocking else "")
    notes = f"1 worker, {app.interface.upper()} interface" + (
        f", {blocking} blocking threads" if blocking else ", lifespan on (its default)")
    return _contender(app, "granian", name, label, command, notes)


def _gunicorn(app: App, threads: int) -> ck.Contender:
    command = ["{python}", "-m", "gunicorn", "--workers", "1", "--worker-class", "gthread",
               "--threads", str(threads), "--worker-connections", "1000", "--keep-alive", "30",
               "--bind", "127.0.0.1:{port}", "--log-level", "warning", app.ref]
    return _contender(app, "gunicorn", f"rw-{app.id}-gunicorn-t{threads}",
                      f"gunicorn t{threads}", command,
                      f"1 worker, gthread, {threads} threads, keep-alive 30 s")


def _uvicorn(app: App) -> ck.Contender:
    command = ["{python}", "-m", "uvicorn", app.ref, "--host", "127.0.0.1", "--port", "{port}",
               "--workers", "1", "--loop", "uvloop", "--http", "httptools", "--no-access-log",
               "--log-level", "warning"]
    return _contender(app, "uvicorn", f"rw-{app.id}-uvicorn", "uvicorn", command,
                      "1 worker, uvloop + httptools, lifespan auto")


def contenders(ours_threads: list[int]) -> list[ck.Contender]:
    """Every contender, app by app (ours first), ours with each of `ours_threads` besides
    the default where OURS_THREADS_APPS says."""
    out: list[ck.Contender] = []
    for app in APPS:
        out.append(_ours(app, None))
        if app.id in OURS_THREADS_APPS:
            out += [_ours(app, n) for n in ours_threads]
        if app.interface == "wsgi":
            out += [_granian(app, n) for n in GRANIAN_BLOCKING[app.id]]
            out += [_gunicorn(app, n) for n in GUNICORN_THREADS[app.id]]
        else:
            out += [_uvicorn(app), _granian(app, None)]
    return out


def set_peer_requires(group: list[ck.Contender], project_python: str) -> None:
    """The peers' venv requirements, pinned to the .venv's framework versions (read once)."""
    peers = [c for c in group if c.env == ENV]
    if not peers:
        return
    requires = _peer_requires(project_python)
    for c in peers:
        c.requires = list(requires)
