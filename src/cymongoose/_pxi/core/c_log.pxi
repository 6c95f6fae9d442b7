# Mongoose's own log (MG_ERROR/MG_INFO/MG_DEBUG, hexdumps) routed to the standard `logging`
# module, logger `cymongoose.mongoose`, instead of stdout. Mongoose hands its log to a
# putchar-style function one character at a time, from whichever thread runs Mongoose code
# (often without the GIL): characters gather in a per-thread line buffer, and only a complete
# line takes the GIL, once. How much Mongoose logs is still set by log_set().


cdef extern from *:
    """
    #define CYM_LOG_LINE 2048
    static __thread char cym_log_buf[CYM_LOG_LINE];
    static __thread size_t cym_log_len = 0;
    """
    enum: CYM_LOG_LINE
    char cym_log_buf[]
    size_t cym_log_len

cdef object _clog_logger = logging_getLogger("cymongoose.mongoose")
# Mongoose's levels (the digit after the timestamp in each line's prefix) in logging's terms.
cdef dict _CLOG_LEVELS = {"1": logging_ERROR, "2": logging_INFO,
                          "3": logging_DEBUG, "4": 5}


cdef void _clog_emit(const char *buf, size_t n) noexcept with gil:
    try:
        line = buf[:n].decode("utf-8", "replace")
        # "<hex ms> <level> <file:line:function> (padded) <message>"
        parts = line.split(None, 3)
        if len(parts) == 4 and parts[1] in _CLOG_LEVELS:
            level = _CLOG_LEVELS[parts[1]]
            text = f"{parts[2]}: {parts[3]}"
        else:
            level = logging_DEBUG  # a hexdump line, or a prefix we do not know
            text = line
        if _clog_logger.isEnabledFor(level):
            _clog_logger.log(level, text)
    except BaseException:
        pass  # logging must never raise into Mongoose's C code


cdef void _clog_putc(char ch, void *param) noexcept nogil:
    global cym_log_len
    if ch == b'\r':
        return
    if ch == b'\n' or cym_log_len >= <size_t>CYM_LOG_LINE:
        if cym_log_len:
            _clog_emit(cym_log_buf, cym_log_len)
        cym_log_len = 0
        if ch == b'\n':
            return
    cym_log_buf[cym_log_len] = ch
    cym_log_len += 1


mg.mg_log_set_fn(_clog_putc, NULL)


# A failed connection: mg_error() hands it here (build_fixes.py, CONN_ERROR_HOOK) instead of
# logging "<id> <fd> <text>" at ERROR. A client that resets or fails its TLS handshake is
# routine for a server (uvicorn and gunicorn log nothing for a reset): one line with the
# peer, at DEBUG for a reset and INFO for TLS and other client faults. A connection this
# process opened (a client, a resolver) still fails at ERROR, unless its owner reports the
# failure itself: the reverse proxy's upstream connections (its 502 names the reason) and
# connections whose log_errors is False (its health check), so one failure is one line.
cdef dict _TLS_REASONS = {
    "http request": "plain HTTP sent to the HTTPS port",
    "https proxy request": "a proxy request sent to the HTTPS port",
}


cdef frozenset _RESET_ERRNOS = frozenset([
    ECONNRESET, EPIPE, ETIMEDOUT, ECONNABORTED, EHOSTUNREACH, ENETUNREACH])


cdef void _on_conn_error(mg.mg_connection *c, const char *text, int err) noexcept nogil:
    if (mg.mg_log_level < mg.MG_LL_ERROR
            or c.fn == <mg.mg_event_handler_t>_px_upstream_event
            or (c.fn == _on_event and c.fn_data != NULL
                and (<Connection>c.fn_data)._quiet_errors)):
        # log_set() asked for silence, as Mongoose's own line would have obeyed; or the
        # connection's owner reports the failure. (OpenSSL's reason for this line goes too:
        # it must not be taken for the next one's.)
        mg.cym_tls_reason[0] = 0
        return
    if c.mgr.userdata != NULL:
        _take_gil_back(<GilSlot *>c.mgr.userdata)
    _log_conn_error(c, text, err)


cdef void _log_conn_error(mg.mg_connection *c, const char *text, int err) noexcept with gil:
    try:
        what = text.decode("utf-8", "replace")
        tls_reason = mg.cym_tls_reason.decode("utf-8", "replace")
        mg.cym_tls_reason[0] = 0
        ip, port, is_ip6 = _addr_tuple(&c.rem)
        peer = "-" if not port else f"[{ip}]:{port}" if is_ip6 else f"{ip}:{port}"
        if not c.is_accepted:
            # A socket error's text already names its reason (build_fixes.py SOCKET_ERRNO).
            _clog_logger.error("connection %d to %s: %s", c.id, peer, what)
            return
        if what.startswith("socket error") or what.startswith("peer RST"):  # TCP
            # err: the socket's pending error (SO_ERROR) for a socket error, else errno,
            # which is the failure's only when the socket call itself failed last.
            _clog_logger.debug("client %s: %s%s", peer,
                               os_strerror(err) if err in _RESET_ERRNOS else
                               "connection reset",
                               " (during the TLS handshake)" if c.is_tls_hs else "")
        elif tls_reason or c.is_tls_hs or what.lower().startswith("tls"):
            fields = tls_reason.split(":")
            reason = fields[5] if len(fields) > 5 else tls_reason or what
            _clog_logger.info("client %s: TLS %s failed: %s", peer,
                              "handshake" if c.is_tls_hs else "connection",
                              _TLS_REASONS.get(reason, reason))
        else:
            _clog_logger.info("client %s: %s", peer, what)
    except BaseException:
        pass  # logging must never raise into Mongoose's C code


mg.cym_conn_error_hook = _on_conn_error
