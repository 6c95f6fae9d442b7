# Module initialisation: process-wide Mongoose settings made once at import.

# Quiet by default: Mongoose logs to stdout otherwise; log_set() turns it on.
mg.mg_log_level = mg.MG_LL_NONE
# Seed the wall clock so certificate validity checks work without an SNTP round-trip.
mg.mg_boot_timestamp_ms = <uint64_t>(time_time() * 1000) - mg.mg_millis()

__all__ = [
    "Manager", "Connection", "RequestBodyTooLarge", "HttpMessage", "WsMessage", "MqttMessage",
    "Timer", "TlsOpts", "ProxyTable", "Rpc", "RpcReq", "Event", "UNEXPOSED_EVENTS",
    "WAKEUP_MAX_PAYLOAD",
    "DEFAULT_MAX_RECV_SIZE", "METRICS_SIZE", "DURATION_BOUNDS", "read_metrics",
    "MONGOOSE_VERSION", "TLS_ENGINE", "MG_EV_ERROR", "MG_EV_OPEN",
    "MG_EV_POLL", "MG_EV_RESOLVE", "MG_EV_CONNECT", "MG_EV_ACCEPT", "MG_EV_TLS_HS", "MG_EV_READ",
    "MG_EV_WRITE", "MG_EV_CLOSE", "MG_EV_HTTP_HDRS", "MG_EV_HTTP_MSG", "MG_EV_WS_OPEN",
    "MG_EV_WS_MSG", "MG_EV_WS_CTL", "MG_EV_MQTT_CMD", "MG_EV_MQTT_MSG", "MG_EV_MQTT_OPEN",
    "MG_EV_SNTP_TIME", "MG_EV_WAKEUP", "MG_EV_USER", "WEBSOCKET_OP_CONTINUE",
    "WEBSOCKET_OP_TEXT", "WEBSOCKET_OP_BINARY", "WEBSOCKET_OP_CLOSE", "WEBSOCKET_OP_PING",
    "WEBSOCKET_OP_PONG", "MG_LL_NONE", "MG_LL_ERROR", "MG_LL_INFO",
    "MG_LL_DEBUG", "MG_LL_VERBOSE", "MQTT_PROP_TYPE_BYTE", "MQTT_PROP_TYPE_STRING",
    "MQTT_PROP_TYPE_STRING_PAIR", "MQTT_PROP_TYPE_BINARY_DATA", "MQTT_PROP_TYPE_VARIABLE_INT",
    "MQTT_PROP_TYPE_INT", "MQTT_PROP_TYPE_SHORT", "handles", "listen_fd", "event_name", "log_set",
    "log_get", "url_encode", "url_port", "url_host", "url_user", "url_pass", "url_uri",
    "url_is_ssl", "match", "http_var", "http_parse_multipart", "md5", "sha1", "sha256",
    "hmac_sha256", "base64_encode", "base64_decode", "millis", "random_bytes", "random_str",
    "crc32", "json_get", "json_get_num", "json_get_bool", "json_get_long", "json_get_str",
]
