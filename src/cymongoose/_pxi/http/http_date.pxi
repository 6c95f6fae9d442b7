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


cdef size_t _imf_fixdate(char *w, _c_time_t when) noexcept nogil:
    """Write the IMF-fixdate of `when` (RFC 9110 5.6.7: "Sun, 06 Nov 1994 08:49:37 GMT",
    29 bytes) at w, without strftime's locale; its length (0 when it cannot be had)."""
    cdef _c_tm t
    cdef int year
    if _c_gmtime_r(&when, &t) == NULL:
        return 0
    memcpy(w, _WEEKDAYS + 3 * (t.tm_wday % 7), 3)
    memcpy(w + 3, b", ", 2)
    _two_digits(w + 5, t.tm_mday)
    w[7] = 32
    memcpy(w + 8, _MONTHS + 3 * (t.tm_mon % 12), 3)
    w[11] = 32
    year = 1900 + t.tm_year
    _two_digits(w + 12, year // 100)
    _two_digits(w + 14, year % 100)
    w[16] = 32
    _two_digits(w + 17, t.tm_hour)
    w[19] = 58
    _two_digits(w + 20, t.tm_min)
    w[22] = 58
    _two_digits(w + 23, t.tm_sec)
    memcpy(w + 25, b" GMT", 4)
    return 29


cdef size_t _date_line(char *w) noexcept nogil:
    """Write "Date: <IMF-fixdate>\r\n" and a NUL at w (_DATE_LINE_SIZE bytes); its length
    without the NUL (0 when the clock cannot be read: then no Date is sent)."""
    if _imf_fixdate(w + 6, _c_time(NULL)) == 0:
        w[0] = 0
        return 0
    memcpy(w, b"Date: ", 6)
    memcpy(w + 35, b"\r\n", 2)
    w[37] = 0
    return 37
