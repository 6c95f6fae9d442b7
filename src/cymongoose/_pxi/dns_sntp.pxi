# DNS resolution and SNTP time requests (to be completed).


cdef int _resolve(Connection conn, str url) except -1:
    raise NotImplementedError("resolve")


cdef int _resolve_cancel(Connection conn) except -1:
    raise NotImplementedError("resolve_cancel")


cdef Connection _sntp_connect(Manager manager, str url, object handler):
    raise NotImplementedError("sntp_connect")


cdef int _sntp_request(Connection conn) except -1:
    raise NotImplementedError("sntp_request")
