# MQTT client and broker-side listener (3.1.1 and 5): connect, listen, publish, properties.
#
# What Mongoose 7.23 does for QoS, and what it leaves to the user (tests/protocols/test_mqtt.py
# checks each point against Mosquitto and paho-mqtt):
# - It answers a received PUBLISH with PUBACK (QoS 1) or PUBREC (QoS 2), a PUBREC with
#   PUBREL and a PUBREL with PUBCOMP, so both QoS 2 handshakes complete on their own.
# - MG_EV_MQTT_MSG fires when the PUBLISH arrives (QoS 2: before PUBREL) and nothing
#   de-duplicates a DUP retransmission; brokers only retransmit after a reconnect, so within
#   one connection every message is delivered once.
# - It counts nothing in flight and never retransmits: a publisher keeps its own window of
#   unacknowledged QoS 1/2 messages (PUBACK/PUBCOMP arrive as MG_EV_MQTT_CMD with the packet
#   id mqtt_pub() returned); a broker disconnects clients that exceed its receive maximum.
# The protocol-callback wrapper below adds the error event, MQTT 5 parsing and reason codes
# that mg_mqtt_parse() lacks.

# Largest "remaining length" the 4-byte MQTT varint can carry (MQTT 3.1.1 §2.2.3).
DEF _MQTT_MAX_REMAINING = 268435455

cdef frozenset _MQTT_CONNECT_OPTIONS = frozenset(
    ("version", "will_topic", "will_message", "will_qos", "will_retain"))

# Property id -> MQTT_PROP_TYPE_*, as in MQTT 5.0 §2.2.2.2 (Mongoose keeps its table static).
cdef dict _MQTT_PROP_TYPES = {
    0x01: mg.MQTT_PROP_TYPE_BYTE, 0x02: mg.MQTT_PROP_TYPE_INT,
    0x03: mg.MQTT_PROP_TYPE_STRING, 0x08: mg.MQTT_PROP_TYPE_STRING,
    0x09: mg.MQTT_PROP_TYPE_BINARY_DATA, 0x0B: mg.MQTT_PROP_TYPE_VARIABLE_INT,
    0x11: mg.MQTT_PROP_TYPE_INT, 0x12: mg.MQTT_PROP_TYPE_STRING,
    0x13: mg.MQTT_PROP_TYPE_SHORT, 0x15: mg.MQTT_PROP_TYPE_STRING,
    0x16: mg.MQTT_PROP_TYPE_BINARY_DATA, 0x17: mg.MQTT_PROP_TYPE_BYTE,
    0x18: mg.MQTT_PROP_TYPE_INT, 0x19: mg.MQTT_PROP_TYPE_BYTE,
    0x1A: mg.MQTT_PROP_TYPE_STRING, 0x1C: mg.MQTT_PROP_TYPE_STRING,
    0x1F: mg.MQTT_PROP_TYPE_STRING, 0x21: mg.MQTT_PROP_TYPE_SHORT,
    0x22: mg.MQTT_PROP_TYPE_SHORT, 0x23: mg.MQTT_PROP_TYPE_SHORT,
    0x24: mg.MQTT_PROP_TYPE_BYTE, 0x25: mg.MQTT_PROP_TYPE_BYTE,
    0x26: mg.MQTT_PROP_TYPE_STRING_PAIR, 0x27: mg.MQTT_PROP_TYPE_INT,
    0x28: mg.MQTT_PROP_TYPE_BYTE, 0x29: mg.MQTT_PROP_TYPE_BYTE,
    0x2A: mg.MQTT_PROP_TYPE_BYTE,
}

# Mongoose's own MQTT protocol handler (static mqtt_cb, exported by build_fixes.py);
# _mqtt_pfn runs it, then adds what it lacks.
cdef mg.mg_event_handler_t _mqtt_proto_fn = mg.cym_mqtt_cb


cdef list _mqtt_properties(mg.mg_mqtt_message *mm):
    """MQTT 5 properties of a received packet as dicts {id, iv, key, val}.

    iv is the integer value (0 for string types); key is the user-property name (str) or
    None; val is str for STRING and STRING_PAIR, bytes for BINARY_DATA (correlation and
    authentication data are binary) and None for integer types. Empty for MQTT 3.1.1.
    """
    cdef list out = []
    cdef mg.mg_mqtt_prop prop
    cdef size_t ofs = 0
    if mm.props_size == 0:
        return out
    while True:
        ofs = mg.mg_mqtt_next_prop(mm, &prop, ofs)
        if ofs == 0:
            break
        ptype = _MQTT_PROP_TYPES.get(prop.id)
        if ptype == mg.MQTT_PROP_TYPE_STRING_PAIR:
            key = _decode_mg(prop.key)
            val = _decode_mg(prop.val)
        elif ptype == mg.MQTT_PROP_TYPE_STRING:
            key = None
            val = _decode_mg(prop.val)
        elif ptype == mg.MQTT_PROP_TYPE_BINARY_DATA:
            key = None
            val = _bytes_mg(prop.val)
        else:
            key = None
            val = None
        out.append({"id": prop.id, "iv": prop.iv, "key": key, "val": val})
    return out


cdef inline size_t _varint(const uint8_t *p, size_t avail, uint32_t *value) noexcept nogil:
    # Bytes used by an MQTT variable-byte integer at p, or 0 if truncated/over 4 bytes.
    cdef size_t i
    cdef uint32_t mul = 1
    value[0] = 0
    for i in range(4):
        if i >= avail:
            return 0
        value[0] += (p[i] & 0x7F) * mul
        mul *= 128
        if (p[i] & 0x80) == 0:
            return i + 1
    return 0


cdef void _mqtt_complete(mg.mg_connection *c, mg.mg_mqtt_message *mm) noexcept nogil:
    """Fill in what mg_mqtt_parse() (Mongoose 7.23) leaves out, in place, before the user
    handler sees the message: MQTT 5 properties of packets other than PUBLISH, the v5
    PUBLISH with a payload under 2 bytes (Mongoose then leaves the property length inside
    `data`), and reason codes in `ack` (SUBACK return code; v5 ack/DISCONNECT reasons).
    Idempotent: MG_EV_MQTT_MSG and MG_EV_MQTT_CMD carry the same message."""
    cdef const uint8_t *buf = <const uint8_t *>mm.dgram.buf
    cdef size_t n = mm.dgram.len
    cdef size_t p = 1  # past the command byte
    cdef size_t used, start
    cdef uint32_t remaining, plen
    cdef int cmd = mm.cmd
    cdef bint v5 = c.is_mqtt5 != 0
    if buf == NULL or n < 2 or mm.props_start != 0:
        return
    used = _varint(buf + 1, n - 1, &remaining)
    if used == 0:
        return
    p += used
    start = p  # first byte of the variable header
    if not v5:
        # MQTT 3.1.1 SUBACK: packet id, then one return code per filter (0x80 = refused).
        if cmd == mg.MQTT_CMD_SUBACK and n > start + 2:
            mm.ack = buf[start + 2]
        return
    if cmd == mg.MQTT_CMD_PUBLISH:
        if mm.topic.buf == NULL:
            return
        p = <size_t>(<const uint8_t *>mm.topic.buf - buf) + mm.topic.len
        if mm.qos > 0:
            p += 2
    elif cmd == mg.MQTT_CMD_CONNECT:
        p = start + 10  # protocol name "MQTT" (2+4), level, flags, keepalive
    elif cmd == mg.MQTT_CMD_CONNACK:
        p = start + 2
    elif (cmd == mg.MQTT_CMD_PUBACK or cmd == mg.MQTT_CMD_PUBREC or
          cmd == mg.MQTT_CMD_PUBREL or cmd == mg.MQTT_CMD_PUBCOMP):
        if n < start + 3:
            return  # reason code omitted: success, no properties (MQTT 5 §3.4.2.1)
        mm.ack = buf[start + 2]
        p = start + 3
    elif (cmd == mg.MQTT_CMD_SUBSCRIBE or cmd == mg.MQTT_CMD_SUBACK or
          cmd == mg.MQTT_CMD_UNSUBSCRIBE or cmd == mg.MQTT_CMD_UNSUBACK):
        p = start + 2
    elif cmd == mg.MQTT_CMD_DISCONNECT or cmd == mg.MQTT_CMD_AUTH:
        if n < start + 1:
            return
        mm.ack = buf[start]
        p = start + 1
    else:
        return
    if p >= n:
        return
    used = _varint(buf + p, n - p, &plen)
    if used == 0 or p + used + plen > n:
        return  # truncated properties: leave the message as Mongoose parsed it
    mm.props_start = p + used
    mm.props_size = plen
    if cmd == mg.MQTT_CMD_PUBLISH:
        mm.data.buf = <char *>buf + p + used + plen
        mm.data.len = n - (p + used + plen)
    elif (cmd == mg.MQTT_CMD_SUBACK or cmd == mg.MQTT_CMD_UNSUBACK) and \
            p + used + plen < n:
        mm.ack = buf[p + used + plen]


cdef void _mqtt_pfn(mg.mg_connection *c, int ev, void *ev_data) noexcept nogil:
    # Protocol handler for every MQTT connection: Mongoose's own, plus (1) an MG_EV_ERROR
    # when it drops a connection for a malformed packet (it only logs and closes), (2)
    # broker-side connections switch to MQTT 5 parsing when the client's CONNECT asks for
    # it (Mongoose sets is_mqtt5 only in mg_mqtt_login), (3) _mqtt_complete(). Mongoose
    # calls c->pfn before c->fn for every event, so the message is fixed before the user
    # handler reads it.
    cdef mg.mg_mqtt_message *mm
    cdef mg.mg_mqtt_message probe
    cdef bint was_closing = c.is_closing != 0
    cdef int rc
    if (ev == mg.MG_EV_MQTT_CMD or ev == mg.MG_EV_MQTT_MSG) and ev_data != NULL:
        mm = <mg.mg_mqtt_message *>ev_data
        if mm.cmd == mg.MQTT_CMD_CONNECT and c.is_accepted:
            _mqtt_adopt_version(c, mm)
        _mqtt_complete(c, mm)
    _mqtt_proto_fn(c, ev, ev_data)
    if ev == mg.MG_EV_READ and not c.is_closing:
        _mqtt_check_declared(c)
    if ev == mg.MG_EV_READ and c.is_closing and not was_closing:
        rc = mg.mg_mqtt_parse(c.recv.buf, c.recv.len, 5 if c.is_mqtt5 else 4, &probe)
        if rc == mg.MQTT_MALFORMED:
            # mg_error() marks the connection closing and fires MG_EV_ERROR (64-byte text).
            mg.mg_error(c, "malformed MQTT packet (type %d), connection closed",
                        <int>probe.cmd)


cdef void _mqtt_check_declared(mg.mg_connection *c) noexcept nogil:
    # mqtt_cb has taken every complete packet: what is left in front is one still arriving,
    # whose fixed header says how big it will be. A packet bigger than max_recv_size could
    # never be held, so the connection closes as soon as the header says so, not once that
    # many bytes have come in (issue 33: a PUBLISH declaring 268,435,455 bytes ran 9.5 s of
    # CPU first). The smallest max_recv_size is 1024: below it nothing needs looking up.
    cdef uint32_t remaining
    cdef size_t used, total, limit
    if c.recv.len < 2:
        return
    used = _varint(c.recv.buf + 1, c.recv.len - 1, &remaining)
    if used == 0:
        return  # the length is not all here yet (or malformed: mqtt_cb decides)
    total = 1 + used + remaining
    if total <= c.recv.len or total <= 1024:
        return
    _take_gil_back(<GilSlot *>c.mgr.userdata)
    limit = _recv_limit(c)  # recv_growth.pxi: Manager.max_recv_size
    if limit != 0 and total > limit:
        mg.mg_error(c, "MQTT packet of %lu bytes over max_recv_size (%lu bytes): closing",
                    <unsigned long>total, <unsigned long>limit)


cdef void _mqtt_adopt_version(mg.mg_connection *c, mg.mg_mqtt_message *mm) noexcept nogil:
    # CONNECT variable header: length-prefixed protocol name "MQTT", then the level byte.
    cdef const uint8_t *buf = <const uint8_t *>mm.dgram.buf
    cdef uint32_t remaining
    cdef size_t used, h
    if mm.dgram.len < 2:
        return
    used = _varint(buf + 1, mm.dgram.len - 1, &remaining)
    h = 1 + used
    if used == 0 or h + 7 > mm.dgram.len:
        return
    if buf[h] == 0 and buf[h + 1] == 4 and memcmp(buf + h + 2, b"MQTT", 4) == 0:
        c.is_mqtt5 = 1 if buf[h + 6] == 5 else 0


cdef inline void _mqtt_wrap(mg.mg_connection *c) noexcept:
    _put_in_front(c, _mqtt_proto_fn, _mqtt_pfn)


cdef bytes _mqtt_text(object value, str argname):
    # MQTT UTF-8 strings (client id, user name, topic): length-prefixed, no U+0000.
    if not isinstance(value, str):
        raise TypeError(f"{argname} must be str, not {type(value).__name__}")
    cdef bytes b = (<str>value).encode("utf-8")
    if b"\x00" in b:
        raise ValueError(f"{argname} must not contain NUL characters")
    if len(b) > 65535:
        raise ValueError(
            f"{argname} is {len(b)} bytes in UTF-8; an MQTT string holds at most 65535")
    return b


cdef int _mqtt_qos(object qos, str argname) except -1:
    if isinstance(qos, bool) or not isinstance(qos, int):
        raise TypeError(f"{argname} must be an int (0, 1 or 2), not {type(qos).__name__}")
    if qos < 0 or qos > 2:
        raise ValueError(f"{argname} must be 0, 1 or 2, not {qos}")
    return <int>qos


cdef inline mg.mg_str _mqtt_mgstr(bytes b):
    return mg.mg_str_n(PyBytes_AS_STRING(b), <size_t>PyBytes_GET_SIZE(b))


cdef Connection _mqtt_connect(Manager manager, str url, object handler, object client_id,
                              object username, object password, object clean_session,
                              object keepalive, dict options):
    manager._ensure_open()
    _check_handler(handler, "handler")
    unknown = [k for k in options if k not in _MQTT_CONNECT_OPTIONS]
    if unknown:
        raise TypeError(
            "mqtt_connect() got unexpected keyword argument(s): "
            + ", ".join(repr(k) for k in unknown))
    cdef bytes burl = _utf8_no_nul(url, "url")
    cdef bytes bcid = _mqtt_text(client_id, "client_id")
    cdef bytes buser = _mqtt_text(username, "username")
    # An MQTT password is binary data (§3.1.3.5): str (UTF-8) or bytes-like.
    cdef bytes bpass = _coerce_bytes(password, "password")
    if len(bpass) > 65535:
        raise ValueError(f"password is {len(bpass)} bytes; MQTT allows at most 65535")
    if isinstance(keepalive, bool) or not isinstance(keepalive, int):
        raise TypeError(f"keepalive must be an int, not {type(keepalive).__name__}")
    if keepalive < 0 or keepalive > 65535:
        raise ValueError(f"keepalive must be 0..65535 seconds, not {keepalive}")
    version = options.get("version", 4)
    if isinstance(version, bool) or not isinstance(version, int):
        raise TypeError(f"version must be an int (4 or 5), not {type(version).__name__}")
    if version != 4 and version != 5:
        raise ValueError(f"version must be 4 (MQTT 3.1.1) or 5 (MQTT 5.0), not {version}")
    will_topic = options.get("will_topic")
    cdef bytes bwill_topic = b""
    cdef bytes bwill_msg = b""
    cdef int will_qos = 0
    cdef bint will_retain = False
    if will_topic is not None:
        bwill_topic = _mqtt_text(will_topic, "will_topic")
        if not bwill_topic:
            raise ValueError("will_topic must not be empty")
        bwill_msg = _coerce_bytes(options.get("will_message", b""), "will_message")
        if len(bwill_msg) > 65535:
            raise ValueError(
                f"will_message is {len(bwill_msg)} bytes; MQTT allows at most 65535")
        will_qos = _mqtt_qos(options.get("will_qos", 0), "will_qos")
        will_retain = bool(options.get("will_retain", False))
    elif any(options.get(k) is not None
             for k in ("will_message", "will_qos", "will_retain")):
        # Mongoose writes the QoS and retain bits into CONNECT even without a will, which
        # a broker rejects; refuse rather than send a bad CONNECT.
        raise ValueError("will_message, will_qos and will_retain need will_topic")

    cdef mg.mg_mqtt_opts opts
    memset(&opts, 0, sizeof(opts))
    opts.client_id = _mqtt_mgstr(bcid)
    opts.user = _mqtt_mgstr(buser)
    opts.pass_ = _mqtt_mgstr(bpass)
    opts.topic = _mqtt_mgstr(bwill_topic)
    opts.message = _mqtt_mgstr(bwill_msg)
    opts.qos = <uint8_t>will_qos
    opts.retain = will_retain
    opts.version = <uint8_t>version
    opts.keepalive = <uint16_t>keepalive
    opts.clean = bool(clean_session)

    cdef Connection conn = Connection.__new__(Connection)
    conn._handler = handler
    conn._manager = <void *>manager
    conn._limits = manager._limits
    conn._recv_capped = True
    Py_INCREF(conn)  # the reference c->fn_data will own until MG_EV_CLOSE
    # mg_mqtt_login() copies every string into c->send before returning, so the bytes
    # objects above only need to outlive this call.
    cdef mg.mg_connection *c = mg.mg_mqtt_connect(&manager._mgr, burl, &opts, _on_event,
                                                  <void *>conn)
    if c == NULL:
        Py_DECREF(conn)
        raise RuntimeError(
            f"Failed to connect to {url!r}: check the scheme (mqtt://, mqtts://), host and port")
    if not conn._bound:
        conn._c = c
        conn._bound = True
    _mqtt_wrap(c)
    _raise_pending(manager)
    return conn


cdef Connection _mqtt_listen(Manager manager, str url, object handler):
    manager._ensure_open()
    _check_handler(handler, "handler")
    cdef bytes burl = _utf8_no_nul(url, "url")
    cdef Connection conn = Connection.__new__(Connection)
    conn._handler = handler
    conn._manager = <void *>manager
    conn._limits = manager._limits
    conn._recv_capped = True
    _raise_open_file_limit()
    Py_INCREF(conn)  # the reference c->fn_data will own until MG_EV_CLOSE
    cdef mg.mg_connection *c = mg.mg_mqtt_listen(&manager._mgr, burl, _on_event,
                                                 <void *>conn)
    if c == NULL:
        Py_DECREF(conn)
        raise RuntimeError(
            f"Failed to listen on {url!r}: check the scheme (mqtt://, tcp://), host and port, "
            "and that the address is free")
    if not conn._bound:
        conn._c = c
        conn._bound = True
    # Accepted connections copy the listener's pfn, so they get the wrapper too.
    _mqtt_wrap(c)
    _raise_pending(manager)
    return conn


cdef object _mqtt_pub(Connection conn, str topic, object message, object qos, object retain):
    conn._ensure_open()
    cdef bytes btopic = _mqtt_text(topic, "topic")
    cdef bytes bmsg = _coerce_bytes(message, "message")
    cdef int q = _mqtt_qos(qos, "qos")
    # Mongoose writes the remaining length with at most 4 varint bytes and would emit a
    # corrupt header past the protocol maximum: refuse instead.
    if 2 + len(btopic) + 2 + 1 + len(bmsg) > _MQTT_MAX_REMAINING:
        raise ValueError(
            f"message is {len(bmsg)} bytes; an MQTT packet holds at most "
            f"{_MQTT_MAX_REMAINING} bytes")
    cdef mg.mg_mqtt_opts opts
    memset(&opts, 0, sizeof(opts))  # no properties: on MQTT 5 a zero property length
    opts.topic = _mqtt_mgstr(btopic)
    opts.message = _mqtt_mgstr(bmsg)
    opts.qos = <uint8_t>q
    opts.retain = bool(retain)
    cdef bint was_closing = conn._c.is_closing != 0
    cdef uint16_t packet_id = mg.mg_mqtt_pub(conn._c, &opts)
    if conn._c.is_closing and not was_closing:  # mg_mqtt_pub() failed and called mg_error()
        raise RuntimeError("mqtt_pub failed: out of memory for the send buffer")
    return packet_id


cdef int _mqtt_sub(Connection conn, str topic, object qos) except -1:
    conn._ensure_open()
    cdef bytes btopic = _mqtt_text(topic, "topic")
    cdef int q = _mqtt_qos(qos, "qos")
    cdef mg.mg_mqtt_opts opts
    memset(&opts, 0, sizeof(opts))
    opts.topic = _mqtt_mgstr(btopic)
    opts.qos = <uint8_t>q
    mg.mg_mqtt_sub(conn._c, &opts)
    return 0


cdef int _mqtt_unsub(Connection conn, str topic) except -1:
    conn._ensure_open()
    cdef bytes btopic = _mqtt_text(topic, "topic")
    cdef mg.mg_mqtt_opts opts
    memset(&opts, 0, sizeof(opts))
    opts.topic = _mqtt_mgstr(btopic)
    mg.mg_mqtt_unsub(conn._c, &opts)
    return 0


cdef int _mqtt_ping(Connection conn) except -1:
    conn._ensure_open()
    mg.mg_mqtt_ping(conn._c)
    return 0


cdef int _mqtt_pong(Connection conn) except -1:
    conn._ensure_open()
    mg.mg_mqtt_pong(conn._c)
    return 0


cdef int _mqtt_disconnect(Connection conn) except -1:
    conn._ensure_open()
    cdef mg.mg_mqtt_opts opts
    # Mongoose reads opts->props on MQTT 5 connections: never pass NULL.
    memset(&opts, 0, sizeof(opts))
    mg.mg_mqtt_disconnect(conn._c, &opts)
    return 0
