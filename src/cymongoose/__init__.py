"""cymongoose: fast, memory-safe Python bindings for the Mongoose networking library."""

from ._mongoose import *  # noqa: F403 - the extension defines __all__
from ._mongoose import __all__ as _core_all

# typing.TYPE_CHECKING without importing typing (mypy reads this name the same way).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import aio as aio
    from . import proxy as proxy
    from .aio import AsyncManager
    from .proxy import ReverseProxy
    from .server import Server

__version__ = "0.3.0"
__all__ = [*_core_all, "AsyncManager", "ReverseProxy", "Server"]

# Imported on first use (PEP 562), so that `import cymongoose` stays cheap: cymongoose.aio
# imports asyncio, which cost more than the rest of the package, and the reverse proxy its
# parsers, and the embeddable Server both. `from cymongoose import AsyncManager` and
# `cymongoose.aio` work as they always did; a program that uses none never loads them.
_LAZY = {"AsyncManager": "aio", "ReverseProxy": "proxy", "Server": "server", "aio": "aio",
         "proxy": "proxy", "server": "server"}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'cymongoose' has no attribute {name!r}")
    from importlib import import_module

    loaded = import_module(f"{__name__}.{module}")
    value = loaded if name == module else getattr(loaded, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
