/* A wake-up that one thread sleeps on until another posts it, with no spinning (issue 37).
 *
 * The WSGI server's app threads wait for their turn on one each (wsgi/turn_waits.py). A
 * threading.Lock would do, but on free-threaded CPython a blocked acquire() first spins
 * through 40 sched_yield() calls before it sleeps: with 32 app threads sharing a CPU, most
 * waits spun, and an app that waits on its database cost 1.3x the CPU per request it costs
 * on the GIL build. A condition variable puts the thread to sleep at once. `posted` keeps a
 * post that comes before the wait, so the order of the two does not matter; several posts
 * before a wait wake it once.
 */
#ifndef CYM_WAKE_H
#define CYM_WAKE_H
#include <pthread.h>

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int posted;
} cym_wake;

/* 0, or -1 when the system could not make the mutex or the condition. */
static inline int cym_wake_init(cym_wake *w) {
  w->posted = 0;
  if (pthread_mutex_init(&w->mu, NULL) != 0) return -1;
  if (pthread_cond_init(&w->cv, NULL) != 0) {
    pthread_mutex_destroy(&w->mu);
    return -1;
  }
  return 0;
}

static inline void cym_wake_destroy(cym_wake *w) {
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
}

/* Until posted (returns at once if it already was); consumes the post. A signal does not
 * end the wait: pthread_cond_wait resumes after a handler runs. */
static inline void cym_wake_wait(cym_wake *w) {
  pthread_mutex_lock(&w->mu);
  while (!w->posted) pthread_cond_wait(&w->cv, &w->mu);
  w->posted = 0;
  pthread_mutex_unlock(&w->mu);
}

static inline void cym_wake_post(cym_wake *w) {
  pthread_mutex_lock(&w->mu);
  w->posted = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

#endif
