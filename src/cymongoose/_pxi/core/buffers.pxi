# Conversions between Python objects and C byte ranges: argument coercion and text decoding.


cdef inline str _decode(const char *buf, size_t n):
    # Text from Mongoose: UTF-8 with surrogateescape, so undecodable bytes round-trip.
    if n == 0:
        return ""
    return buf[:n].decode("utf-8", "surrogateescape")


cdef inline str _decode_mg(mg.mg_str s):
    if s.buf == NULL or s.len == 0:
        return ""
    return s.buf[:s.len].decode("utf-8", "surrogateescape")


cdef inline bytes _bytes_mg(mg.mg_str s):
    if s.buf == NULL or s.len == 0:
        return b""
    return PyBytes_FromStringAndSize(s.buf, <Py_ssize_t>s.len)


cdef bytes _coerce_bytes(object data, str argname):
    """`data` as bytes: str is UTF-8 encoded, anything bytes() accepts except an int.

    0.2.5 turned an int into that many NUL bytes; that hides bugs, so an int is refused.
    """
    if type(data) is bytes:
        return <bytes>data
    if isinstance(data, str):
        return (<str>data).encode("utf-8")
    if isinstance(data, int) or data is None:
        raise TypeError(
            f"{argname} must be str or bytes-like, not {type(data).__name__}")
    try:
        return bytes(data)
    except TypeError:
        raise TypeError(
            f"{argname} must be str or bytes-like, not {type(data).__name__}") from None


cdef object _buffer_source(object data, str argname):
    """`data` itself when it exposes a buffer (bytes, bytearray, a *_view memoryview), so
    the caller copies it once, straight into Mongoose's send buffer; otherwise
    _coerce_bytes(data) (str as UTF-8, and its TypeError for the rest)."""
    if type(data) is bytes or (not isinstance(data, str) and PyObject_CheckBuffer(data)):
        return data
    return _coerce_bytes(data, argname)


cdef long long _int_arg(object value, str argname) except? -1:
    """An integer argument, with its name in the error: a typed `int` parameter's own
    message is only "an integer is required", which leaves the caller guessing which."""
    if type(value) is int:
        return value
    if not isinstance(value, bool):
        try:
            return value.__index__()
        except AttributeError:
            pass
    raise TypeError(f"{argname} must be an int, not {type(value).__name__}")


cdef inline bytes _utf8(str s):
    return s.encode("utf-8")


cdef bytes _utf8_no_nul(str s, str argname):
    """UTF-8 for a value handed to C as a NUL-terminated string: a NUL would cut it."""
    cdef bytes b = s.encode("utf-8")
    if b"\x00" in b:
        raise ValueError(f"{argname} must not contain NUL characters")
    return b
