"""PEP 3333 server on the Mongoose loop (see server.py): the public names of cymongoose.wsgi."""

from ..errors import ClientDisconnected
from ..typedefs import WSGIApp
from .bodies import FileWrapper
from .server import WSGIServer, serve

__all__ = ["WSGIServer", "FileWrapper", "serve", "WSGIApp", "ClientDisconnected"]
