"""What every server shares: loading the app, the headers the server adds, the listeners, the
drain on stop, the stop signals. Plain Python over the public core."""

from ..errors import AppLoadError
from .app import SERVER_NAME, DateHeader, adopt_listener, error_log, load_app, report_exception

__all__ = ["AppLoadError", "DateHeader", "SERVER_NAME", "adopt_listener", "error_log",
           "load_app", "report_exception"]
