/* Atomic loads, stores and read-modify-writes for the few C fields that more than one thread
 * touches (free-threaded CPython, issue 37): typed inline wrappers over the compiler's
 * __atomic builtins (gcc and clang), so Cython code can call them without the GIL.
 *
 * Which ordering where:
 * - relaxed: a value one thread writes and others only read for what it says (a counter,
 *   a flag such as Timer._cancelled). No ordering against other memory is needed, and on
 *   x86-64 and aarch64 a relaxed load or store is the plain instruction: the loop's counting
 *   costs what it did under the GIL.
 * - seq_cst: the two-sided "set my flag, then look at yours" hand-overs (the wakeup flag
 *   against the wakeup queue). Both sides need the total order, or each can miss the other.
 * - seq_cst compare-and-set: claiming something once (poll()'s claim on its Manager, a
 *   ProxyTable's Manager, the WSGI deadline word).
 *
 * The wrappers take pointers so one name serves every field of that type.
 */
#ifndef CYM_ATOMIC_H
#define CYM_ATOMIC_H
#include <stdint.h>

/* int (bint fields are C ints) */
static inline int cym_load_int(const int *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
static inline void cym_store_int(int *p, int v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
static inline int cym_load_int_sc(const int *p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
static inline void cym_store_int_sc(int *p, int v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }
static inline int cym_exchange_int_sc(int *p, int v) {
  return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);
}
/* 1 when *p held `expected` and now holds `desired`; 0 (and *p untouched) otherwise. */
static inline int cym_cas_int(int *p, int expected, int desired) {
  return __atomic_compare_exchange_n(p, &expected, desired, 0, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST);
}

/* uint64_t (the metrics counters) */
static inline uint64_t cym_load_u64(const uint64_t *p) {
  return __atomic_load_n(p, __ATOMIC_RELAXED);
}
/* One writer (the Manager's loop thread): a relaxed load and store, not a locked add. */
static inline void cym_bump_u64(uint64_t *p, uint64_t d) {
  __atomic_store_n(p, __atomic_load_n(p, __ATOMIC_RELAXED) + d, __ATOMIC_RELAXED);
}
/* Several writers (app threads, Manager.add_metric): a real atomic add. */
static inline uint64_t cym_add_u64(uint64_t *p, uint64_t d) {
  return __atomic_add_fetch(p, d, __ATOMIC_RELAXED);
}

/* double (Metrics.duration_sum: one writer, readers elsewhere) */
static inline double cym_load_double(const double *p) {
  double v;
  __atomic_load(p, &v, __ATOMIC_RELAXED);
  return v;
}
static inline void cym_store_double(double *p, double v) {
  __atomic_store(p, &v, __ATOMIC_RELAXED);
}

#endif
