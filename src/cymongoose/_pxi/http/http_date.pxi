# The Date field of the answers the core writes itself (the guard's refusals, the health
# answer, the 500 after a failed handler, the proxy's 502/503/504): RFC 9110 §6.6.1 asks an
# origin server with a clock to send one, and nginx and uvicorn do on their own answers.
# Formatted on the stack, without the GIL or a shared buffer (several Managers may run on
# several threads), and without strftime, whose day and month names follow the locale.

cdef extern from "<time.h>" nogil:
    ctypedef long _c_time_t "time_t"
    ctypedef struct _c_tm "struct tm":
        int tm_sec
        int tm_min
        int tm_hour
        int tm_mday
        int tm_mon
        int tm_year
        int tm_wday
    _c_time_t _c_time "time"(_c_time_t *t)
    _c_tm *_c_gmtime_r "gmtime_r"(const _c_time_t *t, _c_tm *result)

cdef enum:
    _DATE_LINE_SIZE = 40  # "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n" is 37 bytes, plus NUL

cdef const char *_WEEKDAYS = b"SunMonTueWedThuFriSat"
cdef const char *_MONTHS = b"JanFebMarAprMayJunJulAugSepOctNovDec"


cdef inline void _two_digits(char *w, int v) noexcept nogil:
    w[0] = <char>(48 + v // 10 % 10)
    w[1] = <char>(48 + v % 10)


cdef size_t _date_line(char *w) noexcept nogil:
    """Write "Date: <IMF-fixdate>\r\n" and a NUL at w (_DATE_LINE_SIZE bytes); its length
    without the NUL (0 when the clock cannot be read: then no Date is sent)."""
    cdef _c_time_t now = _c_time(NULL)
    cdef _c_tm t
    cdef int year
    if _c_gmtime_r(&now, &t) == NULL:
        w[0] = 0
        return 0
    memcpy(w, b"Date: ", 6)
    memcpy(w + 6, _WEEKDAYS + 3 * (t.tm_wday % 7), 3)
    memcpy(w + 9, b", ", 2)
    _two_digits(w + 11, t.tm_mday)
    w[13] = 32
    memcpy(w + 14, _MONTHS + 3 * (t.tm_mon % 12), 3)
    w[17] = 32
    year = 1900 + t.tm_year
    _two_digits(w + 18, year // 100)
    _two_digits(w + 20, year % 100)
    w[22] = 32
    _two_digits(w + 23, t.tm_hour)
    w[25] = 58
    _two_digits(w + 26, t.tm_min)
    w[28] = 58
    _two_digits(w + 29, t.tm_sec)
    memcpy(w + 31, b" GMT\r\n", 6)
    w[37] = 0
    return 37
