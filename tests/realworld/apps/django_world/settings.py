"""Settings from the environment: REALWORLD_DSN (postgresql://user@host:port/name) and
REALWORLD_POOL. No middleware, no sessions or auth: TechEmpower's Django setup keeps only
what the endpoints use."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from realworld.apps import techempower as te

_dsn = urlsplit(te.dsn())

DEBUG = False
SECRET_KEY = "realworld-tests-only-not-secret"
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "realworld.apps.django_world.urls"
INSTALLED_APPS = ["realworld.apps.django_world"]
MIDDLEWARE: list[str] = []
USE_TZ = False
# Django sets the process time zone from this: UTC keeps the server log in the same time.
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates",
              "DIRS": [te.TEMPLATES], "APP_DIRS": False}]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _dsn.path.lstrip("/"),
        "USER": unquote(_dsn.username or ""),
        "PASSWORD": unquote(_dsn.password or ""),
        "HOST": _dsn.hostname or "",
        "PORT": str(_dsn.port or ""),
        # Pooled connections (Django 5.1+): a request takes one and gives it back. The
        # timeouts turn a gone database into a 500 within seconds, never a hang.
        "OPTIONS": {
            "pool": {"min_size": te.pool_size(), "max_size": te.pool_size(),
                     "timeout": te.DB_TIMEOUT_S},
            "connect_timeout": int(te.DB_TIMEOUT_S),
        },
    },
}
# A failed request's traceback to stderr (Django's default sends it to ADMINS by mail only
# when DEBUG is off).
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {"django.request": {"handlers": ["stderr"], "level": "ERROR"}},
}
