# WebSocket permessage-deflate (RFC 7692): the handshake's negotiation, then per connection a
# raw-deflate compressor for what we send and a decompressor for what we receive. ws.pxi calls
# in: the 101 answers carry _ws_deflate_response(), the frame guard lets RSV1 through on the
# first frame of a data message once negotiated, dispatch.pxi inflates an MG_EV_WS_MSG with
# RSV1 before any handler sees it (the handler gets the plain message, RSV1 cleared), and
# _ws_send_buffer deflates TEXT/BINARY messages.
#
# Mongoose reassembles a fragmented message before MG_EV_WS_MSG and keeps the first frame's
# flags (ws.pxi), so a compressed message is inflated whole, fragmented or not.
#
# Memory per connection, both streams made on first use (a connection that never sends a
# compressed message has no inflater; one never sent a message of _WSD_MIN_SIZE bytes has
# no deflater), freed at MG_EV_CLOSE (dispatch.pxi _unbind):
# - deflater: window 2^_WSD_SERVER_BITS, memLevel _WSD_MEM_LEVEL; zlib's figure is
#   2^(bits+2) + 2^(memLevel+9) = 16 + 16 KiB, plus about 6 KiB of state;
# - inflater: 2^bits window + about 7 KiB: 4 KiB + 7 KiB when the client accepts our
#   client_max_window_bits (browsers and the websockets library do), 32 KiB + 7 KiB when it
#   did not offer the parameter (it may then use the full window);
# - per message only: the inflated message (up to the message limit), the deflated one.
# The websockets library's server picks the same windows (12 bits) and memLevel 5.


DEF _WSD_SERVER_BITS = 12  # our compressor's window (server_max_window_bits we announce)
DEF _WSD_CLIENT_BITS = 12  # the window we ask the client for (client_max_window_bits)
DEF _WSD_MEM_LEVEL = 5
# zlib level 1: on 16 KiB JSON documents (12-bit window) about 8% more bytes than level 6
# for half the CPU; a server compresses every message it sends (nginx's gzip default is 1).
DEF _WSD_LEVEL = 1
# Messages under this many bytes go out uncompressed (RFC 7692 §6.1 allows it): the frame
# bytes saved do not pay for the call.
DEF _WSD_MIN_SIZE = 128
# Above this many bytes, (de)compression runs without the GIL.
DEF _WSD_NOGIL_SIZE = 32 * 1024
DEF _WSD_STEP = 16 * 1024  # the inflated message grows by at least this much per step
DEF _WS_INVALID_DATA = 1007

cdef const unsigned char *_WSD_TAIL = <const unsigned char *>b"\x00\x00\xff\xff"


cdef struct _WsDeflate:
    z.z_stream inflater
    z.z_stream deflater
    bint inflate_ready
    bint deflate_ready
    int in_bits  # the client's window (client_max_window_bits, 15 when not negotiated)
    int out_bits  # our window (server_max_window_bits)
    bint in_reset  # client_no_context_takeover: a fresh inflater for each message
    bint out_reset  # server_no_context_takeover: a fresh deflater for each message


cdef int _wsd_bits(object value) except -2:
    """A window-bits value as RFC 7692 §7.1.2 writes it: 8..15, digits only, no leading
    zero (a quoted form is unquoted first); -1 when invalid."""
    cdef str v = value
    if len(v) >= 2 and v[0] == '"' and v[len(v) - 1] == '"':
        v = v[1:len(v) - 1]
    if len(v) == 1 and "8" <= v <= "9":
        return int(v)
    if len(v) == 2 and v[0] == "1" and "0" <= v[1] <= "5":
        return int(v)
    return -1


cdef tuple _ws_deflate_choose(str offers):
    """The answer to a Sec-WebSocket-Extensions offer: (response line, in_bits, out_bits,
    in_reset, out_reset) for the first acceptable permessage-deflate offer, or None. An offer
    with an unknown parameter, a duplicate or a bad value is skipped (RFC 7692 §5)."""
    cdef dict params
    cdef list parts
    cdef str name, part, key
    cdef int server_bits, client_bits
    for offer in offers.split(","):
        parts = offer.split(";")
        name = parts[0].strip().lower()
        if name != "permessage-deflate":
            continue
        params = {}
        for part in parts[1:]:
            key, eq, value = part.partition("=")
            key = key.strip().lower()
            params.setdefault(key, [])
            params[key].append(value.strip() if eq else None)
        if not _wsd_params_ok(params):
            continue
        server_bits = _WSD_SERVER_BITS
        if "server_max_window_bits" in params:
            server_bits = min(server_bits, _wsd_bits(params["server_max_window_bits"][0]))
            if server_bits < 9:
                # zlib's raw deflate cannot keep to a 256-byte window (it makes 8 into 9):
                # refuse this offer, as RFC 7692 §7.1.2.1 lets a server do.
                continue
        line = ["permessage-deflate", f"server_max_window_bits={server_bits}"]
        client_bits = 15
        if "client_max_window_bits" in params:
            value = params["client_max_window_bits"][0]
            client_bits = min(_WSD_CLIENT_BITS, 15 if value is None else _wsd_bits(value))
            line.append(f"client_max_window_bits={client_bits}")
        out_reset = "server_no_context_takeover" in params
        in_reset = "client_no_context_takeover" in params
        if out_reset:
            line.append("server_no_context_takeover")
        if in_reset:
            line.append("client_no_context_takeover")
        # zlib inflates a stream made with an 8-bit window in a 9-bit one: a larger window
        # than the sender's always works.
        return ("; ".join(line), max(client_bits, 9), server_bits, in_reset, out_reset)
    return None


cdef bint _wsd_params_ok(dict params):
    cdef list values
    for key, values in params.items():
        if len(values) != 1:
            return False  # a parameter given twice
        value = values[0]
        if key == "server_no_context_takeover" or key == "client_no_context_takeover":
            if value is not None:
                return False
        elif key == "server_max_window_bits":
            if value is None or _wsd_bits(value) < 0:
                return False
        elif key == "client_max_window_bits":
            if value is not None and _wsd_bits(value) < 0:
                return False
        else:
            return False
    return True


cdef bytes _ws_deflate_offer_text(mg.mg_http_message *hm):
    """Every Sec-WebSocket-Extensions line of the request, joined as one list (RFC 9110
    §5.3), or None."""
    cdef list found = []
    cdef int i
    for i in range(mg.MG_MAX_HTTP_HEADERS):
        if hm.headers[i].name.len == 0:
            break
        if _is_named(hm.headers[i].name.buf, <Py_ssize_t>hm.headers[i].name.len,
                     b"sec-websocket-extensions", 24):
            found.append(_bytes_mg(hm.headers[i].value))
    return b", ".join(found) if found else None


cdef bytes _ws_deflate_negotiate(Connection conn, object offer):
    """Negotiate from the offered extensions (str, bytes or None): on success the state is
    set on `conn` and the response's header line returned (CRLF-terminated), else None."""
    if offer is None:
        return None
    if isinstance(offer, (bytes, bytearray, memoryview)):
        offer = bytes(offer).decode("latin-1")
    elif not isinstance(offer, str):
        raise TypeError(f"deflate_offer must be str, bytes or None, not "
                        f"{type(offer).__name__}")
    chosen = _ws_deflate_choose(<str>offer)
    if chosen is None:
        return None
    _ws_deflate_free(conn)
    cdef _WsDeflate *d = <_WsDeflate *>calloc(1, sizeof(_WsDeflate))
    if d == NULL:
        return None  # no memory: the WebSocket goes on uncompressed
    d.in_bits = chosen[1]
    d.out_bits = chosen[2]
    d.in_reset = chosen[3]
    d.out_reset = chosen[4]
    conn._ws_deflate = <void *>d
    return b"Sec-WebSocket-Extensions: " + (<str>chosen[0]).encode("ascii") + b"\r\n"


cdef void _ws_deflate_free(Connection conn) noexcept:
    cdef _WsDeflate *d = <_WsDeflate *>conn._ws_deflate
    if d == NULL:
        return
    conn._ws_deflate = NULL
    if d.inflate_ready:
        z.inflateEnd(&d.inflater)
    if d.deflate_ready:
        z.deflateEnd(&d.deflater)
    free(d)


cdef int _wsd_inflate(_WsDeflate *d, const unsigned char *src, size_t n, size_t limit,
                      char **out, size_t *out_len) noexcept nogil:
    """Inflate one message (its payload, then the 00 00 FF FF tail RFC 7692 §7.2.2 strips)
    into a malloc'd *out. Grows in steps and stops as soon as more than `limit` bytes came
    out, so a bomb costs at most `limit` + one step. Returns 0, 1009 (over the limit), 1007
    (not a deflate stream) or -1 (no memory); *out is NULL unless 0."""
    cdef z.z_stream *zs = &d.inflater
    cdef char *buf = NULL
    cdef char *grown
    cdef size_t cap = 0, used = 0, want
    cdef int r, part, code = 0
    out[0] = NULL
    out_len[0] = 0
    if not d.inflate_ready:
        if z.inflateInit2(zs, -d.in_bits) != z.Z_OK:
            return -1
        d.inflate_ready = True
    for part in range(2):
        if part == 0:
            zs.next_in = <unsigned char *>src
            zs.avail_in = <unsigned int>n
        else:
            zs.next_in = <unsigned char *>_WSD_TAIL
            zs.avail_in = 4
        while True:
            if used == cap:
                if used > limit:
                    code = _WS_TOO_BIG
                    break
                want = cap * 2 if cap else n * 4 + 64
                if want < cap + _WSD_STEP:
                    want = cap + _WSD_STEP
                if want > limit + 1:
                    want = limit + 1  # one byte past the limit tells "too big" (the
                    # limit is at most 1 GiB, ws.pxi: avail_out, an unsigned int, holds it)
                grown = <char *>realloc(buf, want)
                if grown == NULL:
                    code = -1
                    break
                buf = grown
                cap = want
            zs.next_out = <unsigned char *>buf + used
            zs.avail_out = <unsigned int>(cap - used)
            r = z.inflate(zs, z.Z_SYNC_FLUSH)
            used = cap - zs.avail_out
            if used > limit:
                code = _WS_TOO_BIG
                break
            if r == z.Z_STREAM_END:
                # The peer ended its stream (BFINAL): what follows starts a new one.
                z.inflateReset(zs)
                if zs.avail_in == 0:
                    break
                continue
            if r == z.Z_BUF_ERROR:
                if zs.avail_in == 0 and zs.avail_out > 0:
                    break  # all input consumed
                if zs.avail_out == 0:
                    continue  # no room: grow
                code = _WS_INVALID_DATA  # stuck with input and room: never loop on it
                break
            if r != z.Z_OK:
                code = _WS_INVALID_DATA
                break
            if zs.avail_in == 0 and zs.avail_out > 0:
                break
        if code != 0:
            break
    if code != 0:
        free(buf)
        # The stream is broken either way; the connection is failed by the caller.
        z.inflateReset(zs)
        return code
    if d.in_reset:
        z.inflateReset(zs)
    out[0] = buf
    out_len[0] = used
    return 0


cdef int _ws_inflate_message(Connection conn, mg.mg_connection *c,
                             mg.mg_ws_message *wm, char **out) noexcept:
    """Replace a compressed message's payload by its inflated form (in *out, freed by the
    caller after the handlers ran) and clear RSV1. Returns 0, or fails the WebSocket (1009,
    1007) and returns -1: the message is then not delivered."""
    cdef _WsDeflate *d = <_WsDeflate *>conn._ws_deflate
    cdef size_t limit = _ws_limit(c)
    cdef size_t n_out = 0
    cdef int code
    cdef const unsigned char *src = <const unsigned char *>wm.data.buf
    cdef size_t n = wm.data.len
    if d == NULL:
        # Unreachable: the guard refuses RSV1 without the extension.
        _ws_fail(c, _WS_PROTOCOL_ERROR, "reserved bits set without a negotiated extension")
        return -1
    if n >= _WSD_NOGIL_SIZE:
        with nogil:
            code = _wsd_inflate(d, src, n, limit, out, &n_out)
    else:
        code = _wsd_inflate(d, src, n, limit, out, &n_out)
    if code == _WS_TOO_BIG:
        _ws_fail(c, _WS_TOO_BIG, "message too big once inflated")
        return -1
    if code == _WS_INVALID_DATA:
        _ws_fail(c, _WS_INVALID_DATA, "compressed message does not inflate")
        return -1
    if code != 0:
        _ws_fail(c, 1011, "out of memory inflating a message")
        return -1
    wm.data.buf = out[0] if out[0] != NULL else <char *>b""
    wm.data.len = n_out
    wm.flags &= ~0x40
    return 0


cdef int _wsd_deflate(_WsDeflate *d, const char *src, size_t n, char **out,
                      size_t *out_len) noexcept nogil:
    """Deflate one message with a sync flush, the 00 00 FF FF tail stripped (RFC 7692
    §7.2.1), into a malloc'd *out. Returns 0 or -1 (no memory)."""
    cdef z.z_stream *zs = &d.deflater
    cdef size_t cap, used = 0
    cdef char *buf
    cdef char *grown
    cdef int r
    out[0] = NULL
    if not d.deflate_ready:
        if z.deflateInit2(zs, _WSD_LEVEL, z.Z_DEFLATED, -d.out_bits, _WSD_MEM_LEVEL,
                          z.Z_DEFAULT_STRATEGY) != z.Z_OK:
            return -1
        d.deflate_ready = True
    cap = z.deflateBound(zs, n) + 16  # a sync flush adds at most a few bytes to the bound
    buf = <char *>malloc(cap)
    if buf == NULL:
        return -1
    zs.next_in = <unsigned char *>src
    zs.avail_in = <unsigned int>n
    while True:
        zs.next_out = <unsigned char *>buf + used
        zs.avail_out = <unsigned int>(cap - used)
        r = z.deflate(zs, z.Z_SYNC_FLUSH)
        used = cap - zs.avail_out
        if r != z.Z_OK and r != z.Z_BUF_ERROR:
            free(buf)
            z.deflateReset(zs)
            return -1
        if zs.avail_out > 0:
            break  # flushed whole
        grown = <char *>realloc(buf, cap * 2)
        if grown == NULL:
            free(buf)
            z.deflateReset(zs)
            return -1
        buf = grown
        cap *= 2
    if used >= 4 and memcmp(buf + used - 4, _WSD_TAIL, 4) == 0:
        used -= 4
    if d.out_reset:
        z.deflateReset(zs)
    out[0] = buf
    out_len[0] = used
    return 0


cdef int _ws_send_deflated(Connection conn, const char *buf, size_t n, int op) except -1:
    """Send a TEXT/BINARY message compressed (RSV1 set). Returns 1 when sent, 0 when the
    caller should send it as it is (no extension, a small message, no memory)."""
    cdef _WsDeflate *d = <_WsDeflate *>conn._ws_deflate
    cdef char *packed = NULL
    cdef size_t m = 0
    cdef int r
    if d == NULL or n < _WSD_MIN_SIZE or (op != mg.WEBSOCKET_OP_TEXT and
                                          op != mg.WEBSOCKET_OP_BINARY):
        return 0
    if n >= _WSD_NOGIL_SIZE:
        with nogil:
            r = _wsd_deflate(d, buf, n, &packed, &m)
    else:
        r = _wsd_deflate(d, buf, n, &packed, &m)
    if r != 0:
        if d.deflate_ready and not d.out_reset:
            # The peer's context may now differ from ours: no more compressed messages.
            raise MemoryError("ws_send: out of memory compressing a message")
        return 0
    try:
        # RSV1 (0x40) rides on the opcode: Mongoose writes op | FIN as the first byte.
        if mg.mg_ws_send(conn._c, packed, m, op | 0x40) < m + 2:
            conn._c.is_closing = 1
            raise RuntimeError("ws_send failed: out of memory for the send buffer")
    finally:
        free(packed)
    return 1


cdef bint _ws_deflate_on(mg.mg_connection *c) noexcept with gil:
    # For the frame guard: may this connection's data messages carry RSV1?
    if c.fn_data == NULL or c.fn != _on_event:
        return False
    return (<Connection>c.fn_data)._ws_deflate != NULL
