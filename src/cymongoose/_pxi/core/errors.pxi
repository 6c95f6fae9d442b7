# Error messages and the bridge that routes callback exceptions to logging or error handlers.

cdef object _log = logging_getLogger("cymongoose")

cdef str _CLOSED_MSG = "Connection has been closed"
cdef str _MANAGER_CLOSED_MSG = (
    "Manager has been closed; create a new Manager to listen or connect again")
cdef str _STALE_VIEW_MSG = (
    "{} was used after its event handler returned: Mongoose has reused its memory. "
    "Copy what you need (for example msg.body_bytes or msg.headers()) inside the handler.")


class RequestBodyTooLarge(ConnectionResetError):
    """A streamed request body went over max_body_size after the handler had its head."""

    def __init__(self, limit, answered):
        self.limit = limit
        self.answered = answered
        super().__init__(
            f"the request body is larger than max_body_size ({limit} bytes): "
            + ("the server answered 413 Content Too Large and closes the connection"
               if answered else "the response had started, so the connection is closed"))


cdef void _default_error_handler(BaseException exc) noexcept:
    """Log an exception from a handler, timer or callback with its traceback."""
    try:
        _log.error("Unhandled exception in a cymongoose callback", exc_info=exc)
    except BaseException:
        pass


cdef inline bint _is_fatal(BaseException exc):
    # KeyboardInterrupt and SystemExit stop the loop (uvloop's rule); everything else is
    # reported and the loop goes on.
    return not isinstance(exc, Exception)
