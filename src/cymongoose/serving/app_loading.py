"""The app a server runs: the object itself, or the one an import string names."""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import AppLoadError
from ..typedefs import AppRef

__all__ = ["load_app"]


def load_app(app: AppRef, factory: bool = False) -> Any:
    """`app` itself, or the object an import string ``"module:attr"`` names (``attr`` may be
    dotted); with ``factory=True``, the result of calling it with no arguments."""
    if isinstance(app, str):
        module_name, sep, attr = app.partition(":")
        if not sep or not module_name or not attr:
            raise AppLoadError(f"app {app!r} must be given as 'module:attribute'")
        try:
            obj: Any = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                raise AppLoadError(f"cannot import module {module_name!r}: {exc}") from None
            raise
        for part in attr.split("."):
            try:
                obj = getattr(obj, part)
            except AttributeError:
                raise AppLoadError(
                    f"module {module_name!r} has no attribute {attr!r}") from None
    else:
        obj = app
    if factory:
        if not callable(obj):
            raise AppLoadError(f"factory {app!r} is not callable")
        obj = obj()
    if not callable(obj):
        raise AppLoadError(f"app {app!r} is not callable")
    return obj
