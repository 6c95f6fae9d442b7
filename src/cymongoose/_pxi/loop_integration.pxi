# Driving a Manager from another event loop (asyncio, uvloop) on that loop's own thread:
# Mongoose's epoll descriptor to watch for readability, and how soon poll() has work that no
# descriptor announces (a closing connection, buffered TLS records, the next timer).
#
# The contract with the outer loop: call poll(0) when fileno() is readable, after writing to a
# connection outside a poll (a write reaches the socket, and Mongoose registers interest in
# writability, only during a poll), and again after next_poll_ms() milliseconds.
# Mongoose's epoll set is level-triggered and a paused connection leaves EPOLLIN out
# (vendor/mongoose/build_fixes.py), so watching the descriptor never spins.


cdef int _loop_fileno(Manager manager) except -2:
    if manager._closed:
        return -1
    return manager._mgr.epoll_fd


cdef int _loop_next_poll_ms(Manager manager, int limit_ms) except -2:
    if limit_ms < 0:
        raise ValueError(f"limit_ms must be >= 0, not {limit_ms}")
    if manager._closed:
        return limit_ms
    cdef mg.mg_connection *c = manager._mgr.conns
    while c != NULL:
        # What mg_mgr_poll() would act on at once, with no descriptor becoming ready:
        # closes (and drained connections with nothing left to send), TLS records already
        # read, and the wakeup queue.
        if (c.is_closing or c.rtls.len > 0 or
                (c.is_draining and c.send.len == 0)):
            return 0
        c = c.next
    if manager._wakeup_queue:
        return 0
    return _wait_budget(&manager._mgr, limit_ms)
