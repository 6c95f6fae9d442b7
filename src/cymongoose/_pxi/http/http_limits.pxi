# HTTP limits and timeouts: the defaults, and how set_http_limits()/listen(**limits) check
# and apply them (docs/server-behaviour.md lists them; http_guard.pxi enforces them).

cdef HttpLimits _DEFAULT_LIMITS = HttpLimits(
    max_header_count=100, max_header_size=16384, max_uri_size=8192,
    max_body_size=16 * 1024 * 1024, header_timeout_ms=30000, body_timeout_ms=60000,
    keepalive_timeout_ms=5000, tls_handshake_timeout_ms=10000, send_timeout_ms=60000,
    linger_timeout_ms=5000, linger_time_ms=30000, stream_body=False, http2=True,
    h2_stream=False)

cdef tuple _LIMIT_NAMES = (
    "max_header_count", "max_header_size", "max_uri_size", "max_body_size",
    "header_timeout_ms", "body_timeout_ms", "keepalive_timeout_ms", "tls_handshake_timeout_ms",
    "send_timeout_ms", "linger_timeout_ms", "linger_time_ms")

cdef enum:
    # The largest values set_http_limits() accepts.
    _MAX_TIMEOUT_MS = 7 * 24 * 3600 * 1000
    _MAX_BODY = 1 << 30
    _MAX_HEAD = 16 * 1024 * 1024


cdef int _update_limits(HttpLimits *lim, dict changes) except -1:
    """Validate `changes` (name -> int) and apply them to *lim, all or nothing."""
    cdef HttpLimits out = lim[0]
    for name, value in changes.items():
        if name == "http2":  # a listener setting carried with the limits (http2.pxi)
            out.http2 = _http2_flag(value)
            continue
        if name not in _LIMIT_NAMES:
            raise TypeError(
                f"unknown HTTP limit {name!r}; the limits are {', '.join(_LIMIT_NAMES)} "
                f"(and the http2 setting)")
        if type(value) is bool or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, not {type(value).__name__}")
        if name.endswith("_ms"):
            if not 0 <= value <= _MAX_TIMEOUT_MS:
                raise ValueError(
                    f"{name} must be between 0 (no timeout) and {_MAX_TIMEOUT_MS} ms, "
                    f"not {value}")
        elif name == "max_header_count":
            if not 1 <= value <= mg.MG_MAX_HTTP_HEADERS:
                raise ValueError(
                    f"max_header_count must be between 1 and {mg.MG_MAX_HTTP_HEADERS} "
                    f"(the parser's capacity), not {value}")
        elif name == "max_header_size":
            if not 64 <= value <= _MAX_HEAD:
                raise ValueError(
                    f"max_header_size must be between 64 and {_MAX_HEAD} bytes, not {value}")
        elif name == "max_uri_size":
            if not 1 <= value <= _MAX_HEAD:
                raise ValueError(
                    f"max_uri_size must be between 1 and {_MAX_HEAD} bytes, not {value}")
        elif not 0 <= value <= _MAX_BODY:
            raise ValueError(
                f"max_body_size must be between 0 and {_MAX_BODY} bytes, not {value}")
    for name, value in changes.items():
        if name == "http2":
            pass
        elif name == "max_header_count":
            out.max_header_count = value
        elif name == "max_header_size":
            out.max_header_size = value
        elif name == "max_uri_size":
            out.max_uri_size = value
        elif name == "max_body_size":
            out.max_body_size = value
        elif name == "header_timeout_ms":
            out.header_timeout_ms = value
        elif name == "body_timeout_ms":
            out.body_timeout_ms = value
        elif name == "keepalive_timeout_ms":
            out.keepalive_timeout_ms = value
        elif name == "send_timeout_ms":
            out.send_timeout_ms = value
        elif name == "linger_timeout_ms":
            out.linger_timeout_ms = value
        elif name == "linger_time_ms":
            out.linger_time_ms = value
        else:
            out.tls_handshake_timeout_ms = value
    lim[0] = out
    return 0


cdef dict _limits_dict(const HttpLimits *lim):
    return {
        "max_header_count": lim.max_header_count,
        "max_header_size": lim.max_header_size,
        "max_uri_size": lim.max_uri_size,
        "max_body_size": lim.max_body_size,
        "header_timeout_ms": lim.header_timeout_ms,
        "body_timeout_ms": lim.body_timeout_ms,
        "keepalive_timeout_ms": lim.keepalive_timeout_ms,
        "tls_handshake_timeout_ms": lim.tls_handshake_timeout_ms,
        "send_timeout_ms": lim.send_timeout_ms,
        "linger_timeout_ms": lim.linger_timeout_ms,
        "linger_time_ms": lim.linger_time_ms,
        "http2": bool(lim.http2),
    }
