"""ASGI 3 server on the Mongoose loop (see server.py): the public names of cymongoose.asgi."""

from ..errors import ClientDisconnected, LifespanFailure
from ..typedefs import ASGIApp
from .server import ASGIServer, serve

__all__ = ["ASGIServer", "ClientDisconnected", "LifespanFailure", "serve", "ASGIApp"]
