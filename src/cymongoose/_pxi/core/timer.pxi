# Timer: Python callables on Mongoose's timer list; cancellation is thread-safe and lazy.

from cpython.mem cimport PyMem_Free, PyMem_Malloc


@cython.final
cdef class Timer:
    """A callback scheduled on a Manager by Manager.timer_add()."""

    def __cinit__(self):
        self._box = NULL
        self._manager = NULL
        self._active = False
        self._cancelled = False

    def cancel(self):
        # Only flags (atomic stores: cancel() may run on any thread): the poll thread unlinks
        # and frees the timer at the start of its next poll(); until then _fire_timer checks
        # them. Without the GIL a firing the loop had begun (past that check) when cancel()
        # was called still runs; none begins after cancel() returns.
        mg.cym_store_int(<int *>&self._cancelled, 1)
        mg.cym_store_int(<int *>&self._active, 0)

    @property
    def active(self):
        return _timer_live(self)

    def __repr__(self):
        state = "active" if self.active else "inactive"
        return f"<Timer {state} repeat={bool(self._repeat)}>"


cdef inline bint _timer_live(Timer timer) noexcept:
    # Relaxed atomic loads: the flags are stored by cancel() from any thread.
    return (mg.cym_load_int(<int *>&timer._active)
            and not mg.cym_load_int(<int *>&timer._cancelled))


cdef Timer _timer_add(Manager manager, int milliseconds, object callback, bint repeat,
                      bint run_now):
    manager._ensure_open()
    if not callable(callback):
        raise TypeError(f"callback must be callable, not {type(callback).__name__}")
    if milliseconds < 0:
        raise ValueError("milliseconds must be >= 0")
    cdef TimerBox *box = <TimerBox *>PyMem_Malloc(sizeof(TimerBox))
    if box == NULL:
        raise MemoryError()
    memset(box, 0, sizeof(TimerBox))
    cdef Timer timer = Timer.__new__(Timer)
    timer._box = box
    timer._callback = callback
    timer._repeat = repeat
    mg.cym_store_int(<int *>&timer._active, 1)
    timer._manager = <void *>manager
    box.gil = &manager._gil
    box.owner = <void *>timer  # borrowed: manager._timers holds the reference
    cdef unsigned flags = mg.MG_TIMER_REPEAT if repeat else mg.MG_TIMER_ONCE
    if run_now:
        flags |= mg.MG_TIMER_RUN_NOW
    manager._timers.add(timer)
    mg.mg_timer_init(&manager._mgr.timers, &box.timer, <uint64_t>milliseconds, flags,
                     _on_timer, <void *>box)
    return timer


cdef void _timer_detach(Timer timer) noexcept:
    # Caller has unlinked the box from the manager's list (or dropped the whole list).
    if timer._box != NULL:
        PyMem_Free(timer._box)
        timer._box = NULL
    mg.cym_store_int(<int *>&timer._active, 0)
    timer._manager = NULL


ctypedef void (*_gil_held_timer_t)(TimerBox *box) noexcept nogil
# Through void *, as _dispatch_gil_held (dispatch.pxi) and for the same reason.
cdef _gil_held_timer_t _fire_timer_gil_held = <_gil_held_timer_t><void *>_fire_timer


cdef void _on_timer(void *arg) noexcept nogil:
    cdef TimerBox *box = <TimerBox *>arg
    _take_gil_back(box.gil)
    _fire_timer_gil_held(box)  # GIL held from here on: see _dispatch_gil_held


cdef void _fire_timer(TimerBox *box) noexcept:
    cdef Timer timer = <Timer>box.owner
    cdef Manager manager
    if box.gil.finalizing or not _timer_live(timer):
        return
    manager = <Manager>timer._manager
    if manager._stop_dispatch:
        return
    if not timer._repeat:
        mg.cym_store_int(<int *>&timer._active, 0)  # reaped at the next poll()
    try:
        timer._callback()
    except BaseException as exc:
        _route_exception(manager, exc)
