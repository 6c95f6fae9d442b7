"""What every server shares: loading the app, the headers the server adds, the listeners, the
drain on stop, the flow-control marks, the stop signals and where failures are reported.
Plain Python over the public core; no framework is imported here."""

from ..errors import AppLoadError
from .app_loading import load_app

__all__ = ["AppLoadError", "load_app"]
