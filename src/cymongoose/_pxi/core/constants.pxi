# Public constants, each read from Mongoose's own C value (never retyped).


class Event(enum_IntEnum):
    """Mongoose event codes, as passed to handlers in `ev`."""
    ERROR = mg.MG_EV_ERROR
    OPEN = mg.MG_EV_OPEN
    POLL = mg.MG_EV_POLL
    RESOLVE = mg.MG_EV_RESOLVE
    CONNECT = mg.MG_EV_CONNECT
    ACCEPT = mg.MG_EV_ACCEPT
    TLS_HS = mg.MG_EV_TLS_HS
    READ = mg.MG_EV_READ
    WRITE = mg.MG_EV_WRITE
    CLOSE = mg.MG_EV_CLOSE
    HTTP_HDRS = mg.MG_EV_HTTP_HDRS
    HTTP_MSG = mg.MG_EV_HTTP_MSG
    WS_OPEN = mg.MG_EV_WS_OPEN
    WS_MSG = mg.MG_EV_WS_MSG
    WS_CTL = mg.MG_EV_WS_CTL
    MQTT_CMD = mg.MG_EV_MQTT_CMD
    MQTT_MSG = mg.MG_EV_MQTT_MSG
    MQTT_OPEN = mg.MG_EV_MQTT_OPEN
    SNTP_TIME = mg.MG_EV_SNTP_TIME
    WAKEUP = mg.MG_EV_WAKEUP
    USER = mg.MG_EV_USER


# Events Mongoose defines but never fires on a connection this API can create: they come
# only from its mDNS responder and Modbus listener, which cymongoose does not expose.
# tests/core/test_constants.py checks that every event in mongoose.h is either in Event
# or listed here.
UNEXPOSED_EVENTS = {
    "MG_EV_MDNS_REQ": mg.MG_EV_MDNS_REQ,
    "MG_EV_MDNS_RESP": mg.MG_EV_MDNS_RESP,
    "MG_EV_MODBUS_REQ": mg.MG_EV_MODBUS_REQ,
}

# Plain ints (not enum members) so `ev == MG_EV_HTTP_MSG` in a hot handler is a plain
# integer comparison.
MG_EV_ERROR = int(Event.ERROR)
MG_EV_OPEN = int(Event.OPEN)
MG_EV_POLL = int(Event.POLL)
MG_EV_RESOLVE = int(Event.RESOLVE)
MG_EV_CONNECT = int(Event.CONNECT)
MG_EV_ACCEPT = int(Event.ACCEPT)
MG_EV_TLS_HS = int(Event.TLS_HS)
MG_EV_READ = int(Event.READ)
MG_EV_WRITE = int(Event.WRITE)
MG_EV_CLOSE = int(Event.CLOSE)
MG_EV_HTTP_HDRS = int(Event.HTTP_HDRS)
MG_EV_HTTP_MSG = int(Event.HTTP_MSG)
MG_EV_WS_OPEN = int(Event.WS_OPEN)
MG_EV_WS_MSG = int(Event.WS_MSG)
MG_EV_WS_CTL = int(Event.WS_CTL)
MG_EV_MQTT_CMD = int(Event.MQTT_CMD)
MG_EV_MQTT_MSG = int(Event.MQTT_MSG)
MG_EV_MQTT_OPEN = int(Event.MQTT_OPEN)
MG_EV_SNTP_TIME = int(Event.SNTP_TIME)
MG_EV_WAKEUP = int(Event.WAKEUP)
MG_EV_USER = int(Event.USER)

# Every opcode mongoose.h defines; 0.2.x had no CONTINUE or CLOSE (the ASGI server sends
# CLOSE frames itself, tests/core/test_constants.py checks the list against the header).
WEBSOCKET_OP_CONTINUE = mg.WEBSOCKET_OP_CONTINUE
WEBSOCKET_OP_TEXT = mg.WEBSOCKET_OP_TEXT
WEBSOCKET_OP_BINARY = mg.WEBSOCKET_OP_BINARY
WEBSOCKET_OP_CLOSE = mg.WEBSOCKET_OP_CLOSE
WEBSOCKET_OP_PING = mg.WEBSOCKET_OP_PING
WEBSOCKET_OP_PONG = mg.WEBSOCKET_OP_PONG

MG_LL_NONE = mg.MG_LL_NONE
MG_LL_ERROR = mg.MG_LL_ERROR
MG_LL_INFO = mg.MG_LL_INFO
MG_LL_DEBUG = mg.MG_LL_DEBUG
MG_LL_VERBOSE = mg.MG_LL_VERBOSE

MQTT_PROP_TYPE_BYTE = mg.MQTT_PROP_TYPE_BYTE
MQTT_PROP_TYPE_STRING = mg.MQTT_PROP_TYPE_STRING
MQTT_PROP_TYPE_STRING_PAIR = mg.MQTT_PROP_TYPE_STRING_PAIR
MQTT_PROP_TYPE_BINARY_DATA = mg.MQTT_PROP_TYPE_BINARY_DATA
MQTT_PROP_TYPE_VARIABLE_INT = mg.MQTT_PROP_TYPE_VARIABLE_INT
MQTT_PROP_TYPE_INT = mg.MQTT_PROP_TYPE_INT
MQTT_PROP_TYPE_SHORT = mg.MQTT_PROP_TYPE_SHORT

MONGOOSE_VERSION = (<bytes>mg.MG_VERSION).decode()
