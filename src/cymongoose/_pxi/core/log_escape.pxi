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
# The access log calls this for several fields of every request: the common case (printable
# ASCII, no quote, no backslash) is a C scan that returns the same object.

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object text)

cdef dict _LOG_ESCAPES = {i: f"\\x{i:02x}" for i in range(0x20)}
_LOG_ESCAPES[0x22] = "\\x22"
_LOG_ESCAPES[0x5c] = "\\x5c"
_LOG_ESCAPES[0x7f] = "\\x7f"


cdef inline bint _log_plain(str text) noexcept:
    """Whether `text` is printable ASCII without `"` or `\\` (nothing to escape)."""
    if not PyUnicode_IS_ASCII(text):
        return False
    cdef const unsigned char *p = <const unsigned char *>PyUnicode_1BYTE_DATA(text)
    cdef Py_ssize_t i, n = PyUnicode_GET_LENGTH(text)
    cdef unsigned char ch
    for i in range(n):
        ch = p[i]
        if ch < 0x20 or ch == 0x7f or ch == 0x22 or ch == 0x5c:
            return False
    return True


def log_escape(str text not None):
    if _log_plain(text):
        return text
    return text.translate(_LOG_ESCAPES).encode("ascii", "backslashreplace").decode("ascii")
