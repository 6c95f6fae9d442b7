"""Metrics: the numbers the core counts (`Manager.metrics()`, `WSGIServer.metrics()`,
`ASGIServer.metrics()`), added up over processes, and written in the Prometheus text format.

The supervisor of `cymongoose --metrics` serves them for every worker (process/); an app that
runs a server in-process can expose its own:

    from cymongoose.metrics import render
    text = render(server.metrics(), interface="wsgi")
"""

from __future__ import annotations

from .exposition import CONTENT_TYPE, render
from .snapshot import Snapshot, combine, settled
from .utilisation import Utilisation

__all__ = ["CONTENT_TYPE", "Snapshot", "Utilisation", "combine", "render", "settled"]
