"""The errors of the app server, at the bottom of its layers so every layer can raise them:
the one a user fixes (a bad option, a port in use) and the ones both servers raise."""

from __future__ import annotations

__all__ = ["AppLoadError", "ClientDisconnected", "ConfigError", "LifespanFailure",
           "StartupFailed"]


class ConfigError(ValueError):
    """A problem the user can fix: an option's value, a file, a port. The command line prints
    it as one line and exits with status 2; the servers' keyword arguments raise it as the
    `ValueError` it is."""

    exit_status = 2


class StartupFailed(ConfigError):
    """The app itself refused to start (its ASGI lifespan startup failed): the command line
    prints one line and exits with status 3, as uvicorn does, so a process manager can tell
    a broken app from a bad option."""

    exit_status = 3


class AppLoadError(Exception):
    """The app named on the command line or passed as a string could not be loaded."""


class ClientDisconnected(ConnectionResetError):
    """The client went away while the app was reading its request or writing its response
    (WSGI's `wsgi.input.read()` and `write()`, an ASGI WebSocket's `send()`): an `OSError`.
    An ASGI HTTP `send()` after the client left returns quietly instead (spec 2.3, as
    uvicorn): Django's handler leaks the request's database connection on an error there."""


class LifespanFailure(RuntimeError):
    """The ASGI app's lifespan startup failed; the message is the app's."""
