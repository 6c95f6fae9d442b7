"""The listening socket of the command line, opened before any app loads so that a port in
use is one line at start-up: inherited (--fd), a Unix socket (--uds) or TCP (--host/--port).
The supervisor and the reloader open it once and hand it to the processes they start;
with --reuse-port each worker opens one of its own."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat

from ..config import Config
from ..errors import ConfigError

__all__ = ["close_listener", "listener_url", "open_listener"]


def open_listener(config: Config, *, listen: bool = True) -> socket.socket:
    """The listening socket the options name: inherited (--fd), a Unix socket (--uds) or
    TCP (--host/--port), bound here so a port in use is reported before any app loads.
    `listen=False` (TCP): bound only, holding the port for workers that listen on sockets
    of their own (--reuse-port)."""
    if config.fd is not None:
        try:
            sock = socket.socket(fileno=config.fd)
        except OSError as exc:
            raise ConfigError(f"--fd {config.fd}: not a socket ({exc.strerror})") from None
        if not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            sock.detach()
            raise ConfigError(f"--fd {config.fd}: the socket is not listening")
        return sock
    if config.uds:
        return _unix_listener(config.uds)
    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if config.reuse_port:  # one socket per worker, the kernel picks one per connection
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((config.host.strip("[]"), config.port))
        if listen:
            sock.listen(1024)
    except OSError as exc:
        sock.close()
        hint = "; is the port in use?" if exc.errno == errno.EADDRINUSE else ""
        raise ConfigError(f"cannot listen on {config.host}:{config.port} ({exc.strerror})"
                          f"{hint}") from None
    return sock


def close_listener(config: Config, sock: socket.socket) -> None:
    """Close the socket; the process that created a Unix socket file removes it too."""
    unix = sock.family == socket.AF_UNIX
    sock.close()
    if unix and config.uds and config.worker_socket is None:
        with contextlib.suppress(OSError):
            os.unlink(config.uds)


def _unix_listener(path: str) -> socket.socket:
    if os.path.exists(path):
        if not stat.S_ISSOCK(os.stat(path).st_mode):
            raise ConfigError(f"--uds {path}: the path exists and is not a socket")
        probe = socket.socket(socket.AF_UNIX)
        try:
            probe.connect(path)
        except ConnectionRefusedError:
            os.unlink(path)  # a stale socket file from a server that is gone
        except OSError as exc:
            raise ConfigError(f"--uds {path}: {exc.strerror}") from None
        else:
            raise ConfigError(f"--uds {path}: another server is listening there")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        os.chmod(path, 0o666)  # the proxy in front usually runs as another user
        sock.listen(1024)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {path} ({exc.strerror})") from None
    return sock


def listener_url(config: Config, sock: socket.socket | None) -> str:
    scheme = "https" if config.ssl_certfile else "http"
    if sock is not None and sock.family == socket.AF_UNIX:
        return f"unix:{sock.getsockname()}"
    if sock is not None:
        host, port = sock.getsockname()[:2]
    else:
        host, port = config.host, config.port
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"
