# A wake-up for threads that wait their turn (includes/cym_wake.h says why it is not a
# threading.Lock): cymongoose.wsgi's turns put their app threads to sleep on one each.


@cython.final
cdef class ThreadWake:
    """One thread sleeps in wait() until another calls post(); a post made before the wait
    is kept, and several posts wake one wait. wait() releases the GIL and is not ended by a
    signal: a thread that must run signal handlers (the main one) waits another way."""

    cdef mg.cym_wake _wake
    cdef bint _made

    def __cinit__(self):
        if mg.cym_wake_init(&self._wake) != 0:
            raise OSError("ThreadWake: the system could not make a mutex and a condition")
        self._made = True

    def __dealloc__(self):
        # A waiting thread holds a reference in wait(): nothing waits by now.
        if self._made:
            mg.cym_wake_destroy(&self._wake)

    def wait(self) -> None:
        with nogil:
            mg.cym_wake_wait(&self._wake)

    def post(self) -> None:
        with nogil:
            mg.cym_wake_post(&self._wake)
