# HTTP limits and timeouts enforced in front of Mongoose's HTTP parser (placeholder).

cdef HttpLimits _DEFAULT_LIMITS = HttpLimits(
    max_header_count=100, max_header_size=16384, max_uri_size=8192,
    max_body_size=16 * 1024 * 1024, header_timeout_ms=30000, body_timeout_ms=60000,
    keepalive_timeout_ms=5000, tls_handshake_timeout_ms=10000)


cdef void _install_http_guard(mg.mg_connection *c) noexcept:
    pass
