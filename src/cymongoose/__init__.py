"""cymongoose: fast, memory-safe Python bindings for the Mongoose networking library."""

from ._mongoose import *  # noqa: F403 - the extension defines __all__
from ._mongoose import __all__ as _core_all
from .aio import AsyncManager
from .proxy import ReverseProxy

__version__ = "0.3.0"
__all__ = [*_core_all, "AsyncManager", "ReverseProxy"]
