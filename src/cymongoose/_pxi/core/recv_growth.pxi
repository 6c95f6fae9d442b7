# How far a connection's receive buffer may grow. Mongoose reads into c->recv and, when it is
# full, makes it bigger; build_fixes.py RECV_GROWTH makes that step a doubling (one copy per
# doubling, not one per 16 KiB: receiving n bytes whole costs O(n), not O(n^2)) and asks
# _recv_cap() how far it may go, so a connection never holds much more than it may keep:
# - guarded HTTP: one maximal request plus what may be pipelined behind it (http_guard.pxi,
#   whose _grow_recv sizes request bodies itself);
# - WebSocket: the connection's max_body_size (ws.pxi: a message, whole or reassembled,
#   and its frame header);
# - raw TCP/UDP and MQTT: Manager.max_recv_size, past which dispatch.pxi closes it.
# Anything else (client connections of the proxy, a handler of the user's) doubles without a
# cap: its own limits apply to what it holds. The hook runs only when a full buffer of 32 KiB
# or more grows, a handful of times per large message.

DEF _WS_MAX_HEADER = 14  # 2 bytes, an 8-byte length and a 4-byte mask key


cdef size_t _recv_cap(mg.mg_connection *c) noexcept nogil:
    cdef HttpGuard *g
    if c.fn != _on_event or c.fn_data == NULL:
        return 0
    if c.pfn == <mg.mg_event_handler_t>_http_guard and c.pfn_data != NULL:
        g = <HttpGuard *>c.pfn_data
        return _pipeline_cap(g.limits)
    # Needs the Connection; the handler that runs right after this read needs the GIL anyway.
    _take_gil_back(<GilSlot *>c.mgr.userdata)
    return _recv_limit(c)


cdef size_t _recv_limit(mg.mg_connection *c) noexcept with gil:
    """The most c->recv may hold unconsumed outside HTTP (0: no limit known here)."""
    cdef Connection conn
    if c.fn != _on_event or c.fn_data == NULL:
        return 0
    conn = <Connection>c.fn_data
    if conn._c != c or conn._manager == NULL:
        return 0
    if conn._recv_capped:
        return (<Manager>conn._manager)._max_recv_size
    if c.pfn == <mg.mg_event_handler_t>_ws_guard:
        return _ws_limit(c) + _WS_MAX_HEADER
    return 0


mg.cym_recv_cap_hook = _recv_cap
