# WebSocket: upgrade, client connect and frame sending (to be completed).


cdef Connection _ws_connect(Manager manager, str url, object handler):
    raise NotImplementedError("ws_connect")


cdef int _ws_upgrade(Connection conn, HttpMessage message, object extra_headers) except -1:
    raise NotImplementedError("ws_upgrade")


cdef int _ws_send(Connection conn, object data, object op) except -1:
    raise NotImplementedError("ws_send")
