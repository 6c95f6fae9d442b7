/* A mutex that exists only where the GIL does not (free-threaded CPython, issue 37).
 *
 * Some per-object state is changed by two threads in a few C statements that call no Python
 * code (the WSGI flow-control counts). With a GIL those statements already run whole; a
 * PyThread lock per object would cost an allocation per request on Python 3.10-3.12, where
 * cython.pymutex falls back to one. So: PyMutex (a zero-initialized byte, no allocation)
 * under Py_GIL_DISABLED, and nothing at all elsewhere. Never hold one across a call into
 * Python: with the GIL, nothing would then keep the section whole.
 */
#ifndef CYM_FT_LOCK_H
#define CYM_FT_LOCK_H
#include <Python.h>

#ifdef Py_GIL_DISABLED
typedef PyMutex cym_ft_mutex;
static inline void cym_ft_lock(cym_ft_mutex *m) { PyMutex_Lock(m); }
static inline void cym_ft_unlock(cym_ft_mutex *m) { PyMutex_Unlock(m); }
#else
typedef struct { char unused; } cym_ft_mutex;
static inline void cym_ft_lock(cym_ft_mutex *m) { (void) m; }
static inline void cym_ft_unlock(cym_ft_mutex *m) { (void) m; }
#endif

#endif
