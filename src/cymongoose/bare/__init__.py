"""The servers without an app protocol, picked by the command line beside the WSGI and ASGI
ones: a raw handler's server and the pure reverse proxy."""

from .proxy_server import ProxyServer
from .raw_server import RawServer

__all__ = ["ProxyServer", "RawServer"]
