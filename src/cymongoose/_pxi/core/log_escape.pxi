# Client text made safe for a log line: every field a client chose (request target, method,
# Referer, User-Agent, Host, any header) passes through log_escape() before it is written
# to the access log or quoted by an error-log line, so a client cannot start a line of its
# own, close a quoted field early, or put bytes a terminal or a log shipper would act on.
#
# The rule, one for every log, nginx's: bytes below 0x20, 0x7f, `"` and `\` become `\xNN`,
# and so does every character from 0x80 on (`\uNNNN` above 0xFF, which only a decoded path
# has). `"` is `\x22` rather than Apache's `\"` so that a quoted field never holds a `"`:
# a parser that splits on quotes (`"[^"]*"`, as many do) cannot be led to end the field
# early, and `\` only ever starts a `\xNN`. Non-ASCII is escaped rather than passed on
# because the bytes may be invalid UTF-8 (a shipper may drop the line), C1 controls, U+0085
# or U+2028 (a line end to some readers) or bidi overrides that make a line read other than
# it is. The line is then plain ASCII, and the escapes give the client's bytes back.
#
# The access log escapes every line (log_escape_fields, one call for all its fields): the
# common case (printable ASCII, no quote, no backslash) is a C scan that returns the same
# object. Error-log lines call log_escape() on the request they name.

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object text)

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    /* Whether p[:n], all ASCII, holds none of the bytes a log line escapes: below 0x20,
       0x7f, the quote (0x22), the backslash (0x5c). Eight bytes at a time: v - 0x01..01
       & ~v & 0x80..80 is non-zero exactly when a byte of v is zero (x ^ c has a zero byte
       where x has c), and with 0x20 in place of 0x01 when a byte is below 0x20 (every byte
       is below 0x80 here). About a third of the instructions of a byte loop. */
    #define CYM_ONES 0x0101010101010101ULL
    #define CYM_HIGH 0x8080808080808080ULL
    #define CYM_ZERO_BYTE(v) (((v) - CYM_ONES) & ~(v) & CYM_HIGH)
    static int cym_log_plain(const unsigned char *p, Py_ssize_t n) {
        Py_ssize_t i = 0;
        uint64_t x;
        for (; i + 8 <= n; i += 8) {
            memcpy(&x, p + i, 8);
            if ((((x - CYM_ONES * 0x20) & ~x & CYM_HIGH)
                 | CYM_ZERO_BYTE(x ^ (CYM_ONES * 0x7f)) | CYM_ZERO_BYTE(x ^ (CYM_ONES * 0x22))
                 | CYM_ZERO_BYTE(x ^ (CYM_ONES * 0x5c))) != 0)
                return 0;
        }
        for (; i < n; i++)
            if (p[i] < 0x20 || p[i] == 0x7f || p[i] == 0x22 || p[i] == 0x5c) return 0;
        return 1;
    }
    """
    bint cym_log_plain(const unsigned char *p, Py_ssize_t n) nogil

cdef dict _LOG_ESCAPES = {i: f"\\x{i:02x}" for i in range(0x20)}
_LOG_ESCAPES[0x22] = "\\x22"
_LOG_ESCAPES[0x5c] = "\\x5c"
_LOG_ESCAPES[0x7f] = "\\x7f"


cdef inline bint _log_plain(str text) noexcept:
    """Whether `text` is printable ASCII without `"` or `\\` (nothing to escape)."""
    if not PyUnicode_IS_ASCII(text):
        return False
    return cym_log_plain(<const unsigned char *>PyUnicode_1BYTE_DATA(text),
                         PyUnicode_GET_LENGTH(text))


def log_escape(str text not None):
    if _log_plain(text):
        return text
    return text.translate(_LOG_ESCAPES).encode("ascii", "backslashreplace").decode("ascii")


def log_escape_fields(tuple values not None):
    # One call per access-log line instead of one per field: the tuple back as it is when no
    # str item needs escaping (the common case: a C scan of each), else a copy with every
    # str item escaped. Server-made items (time, durations, "-") have nothing to escape.
    cdef Py_ssize_t i, n = len(values)
    cdef object item
    for i in range(n):
        item = values[i]
        if type(item) is str and not _log_plain(<str>item):
            break
    else:
        return values
    return tuple([log_escape(v) if type(v) is str else v for v in values])
