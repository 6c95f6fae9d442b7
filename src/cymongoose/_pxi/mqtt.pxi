# MQTT client and broker-side listener (to be completed).


cdef list _mqtt_properties(mg.mg_mqtt_message *mm):
    return []


cdef Connection _mqtt_connect(Manager manager, str url, object handler, object client_id,
                              object username, object password, object clean_session,
                              object keepalive, dict options):
    raise NotImplementedError("mqtt_connect")


cdef Connection _mqtt_listen(Manager manager, str url, object handler):
    raise NotImplementedError("mqtt_listen")


cdef object _mqtt_pub(Connection conn, str topic, object message, object qos, object retain):
    raise NotImplementedError("mqtt_pub")


cdef int _mqtt_sub(Connection conn, str topic, object qos) except -1:
    raise NotImplementedError("mqtt_sub")


cdef int _mqtt_unsub(Connection conn, str topic) except -1:
    raise NotImplementedError("mqtt_unsub")


cdef int _mqtt_ping(Connection conn) except -1:
    raise NotImplementedError("mqtt_ping")


cdef int _mqtt_pong(Connection conn) except -1:
    raise NotImplementedError("mqtt_pong")


cdef int _mqtt_disconnect(Connection conn) except -1:
    raise NotImplementedError("mqtt_disconnect")
