# Mongoose's own log (MG_ERROR/MG_INFO/MG_DEBUG, hexdumps) routed to the standard `logging`
# module, logger `cymongoose.mongoose`, instead of stdout. Mongoose hands its log to a
# putchar-style function one character at a time, from whichever thread runs Mongoose code
# (often without the GIL): characters gather in a per-thread line buffer, and only a complete
# line takes the GIL, once. How much Mongoose logs is still set by log_set().

import logging as _clog_logging

cdef extern from *:
    """
    #define CYM_LOG_LINE 2048
    static __thread char cym_log_buf[CYM_LOG_LINE];
    static __thread size_t cym_log_len = 0;
    """
    enum: CYM_LOG_LINE
    char cym_log_buf[]
    size_t cym_log_len

cdef object _clog_logger = _clog_logging.getLogger("cymongoose.mongoose")
# Mongoose's levels (the digit after the timestamp in each line's prefix) in logging's terms.
cdef dict _CLOG_LEVELS = {"1": _clog_logging.ERROR, "2": _clog_logging.INFO,
                          "3": _clog_logging.DEBUG, "4": 5}


cdef void _clog_emit(const char *buf, size_t n) noexcept with gil:
    try:
        line = buf[:n].decode("utf-8", "replace")
        # "<hex ms> <level> <file:line:function> (padded) <message>"
        parts = line.split(None, 3)
        if len(parts) == 4 and parts[1] in _CLOG_LEVELS:
            level = _CLOG_LEVELS[parts[1]]
            text = f"{parts[2]}: {parts[3]}"
        else:
            level = _clog_logging.DEBUG  # a hexdump line, or a prefix we do not know
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
