/* What cymongoose takes from Linux beyond POSIX, and inert stand-ins where it is missing
 * (macOS), so that the same Cython code compiles everywhere. The server is Linux-first:
 * macOS wheels are built and tested only by the hosted CI (.github/workflows/wheels.yml).
 *
 * epoll: Mongoose waits with epoll where MG_ENABLE_EPOLL is on (CMakeLists.txt sets it on
 * Linux only); elsewhere it waits with poll() and mgr->epoll_fd stays -1. Every epoll call
 * in cymongoose is behind a check of epoll_fd (manager.pxi _ready_soon, http_stream.pxi,
 * loop_integration.pxi), so the stand-ins below are never reached.
 *
 * sendfile: Linux's sendfile(2) sends file bytes to a socket without copying them through
 * user space. The stand-in fails with EAGAIN, which its callers (http.pxi _sendfile_body,
 * http_response.pxi _pump_file) take as "the socket is full": they send the file through
 * the connection's send buffer instead, as they always do on TLS connections.
 * -DCYM_HAVE_SENDFILE=0 selects the stand-in on Linux too (how that path is checked there).
 */
#ifndef CYM_OS_H
#define CYM_OS_H
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "mongoose.h"

#if MG_ENABLE_EPOLL
#include <sys/epoll.h>
#else
typedef union epoll_data {
  void *ptr;
  int fd;
  uint32_t u32;
  uint64_t u64;
} epoll_data_t;
struct epoll_event {
  uint32_t events;
  epoll_data_t data;
};
enum { EPOLLIN = 0x001, EPOLLOUT = 0x004, EPOLLERR = 0x008, EPOLLHUP = 0x010 };
enum { EPOLL_CTL_MOD = 3 };
static inline int epoll_wait(int epfd, struct epoll_event *events, int maxevents,
                             int timeout) {
  (void) epfd, (void) events, (void) maxevents, (void) timeout;
  errno = ENOSYS;
  return -1;
}
static inline int epoll_ctl(int epfd, int op, int fd, struct epoll_event *event) {
  (void) epfd, (void) op, (void) fd, (void) event;
  errno = ENOSYS;
  return -1;
}
#endif

#ifndef CYM_HAVE_SENDFILE
#if defined(__linux__)
#define CYM_HAVE_SENDFILE 1
#else
#define CYM_HAVE_SENDFILE 0
#endif
#endif

/* Freed heap back to the system (manager.pxi _heap_release_due): glibc's malloc keeps
 * it for reuse, which after a burst of connections can hold RSS well above its level before
 * the burst. Other C libraries (musl, macOS) give large blocks back on free; nothing to do. */
#if defined(__GLIBC__)
#include <malloc.h>
static inline int cym_release_free_heap(void) { return malloc_trim(0); }
#else
static inline int cym_release_free_heap(void) { return 0; }
#endif

/* What the WSGI loop owner reads around the apps it runs inline (wsgi_exchange.pxi
 * run_batch): the calling thread's CPU time and its voluntary context switches (two system
 * calls), with the monotonic clock. Wall time the thread spent off its CPU after sleeping on
 * its own (a socket read, a lock) is an app waiting: the server then runs apps on several
 * threads. Linux counts switches per thread (RUSAGE_THREAD; pyconfig.h defines _GNU_SOURCE);
 * elsewhere the CPU time reads as the wall time, and apps are only handed off after a stall. */
#include <time.h>
#include <sys/resource.h>
typedef struct {
  int64_t wall_ns;
  int64_t cpu_ns;
  int64_t sleeps;
} cym_thread_usage;
static inline int64_t cym_monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}
static inline void cym_thread_usage_now(cym_thread_usage *u) {
  u->wall_ns = cym_monotonic_ns();
#if defined(RUSAGE_THREAD) && defined(CLOCK_THREAD_CPUTIME_ID)
  /* The CPU time from the thread's clock: getrusage()'s user and system times are split
   * from it by ticks and can run ahead of the wall clock over a millisecond. */
  struct rusage ru;
  struct timespec ts;
  if (getrusage(RUSAGE_THREAD, &ru) == 0 && clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) {
    u->cpu_ns = (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
    u->sleeps = ru.ru_nvcsw;
    return;
  }
#endif
  u->cpu_ns = u->wall_ns; /* no per-thread figures: never reads as waiting */
  u->sleeps = 0;
}

#if CYM_HAVE_SENDFILE
#include <sys/sendfile.h>
#define cym_sendfile sendfile
#else
static inline ssize_t cym_sendfile(int out_fd, int in_fd, long *offset, size_t count) {
  (void) out_fd, (void) in_fd, (void) offset, (void) count;
  errno = EAGAIN;
  return -1;
}
#endif

/* Static mounts (http_static_mounts.pxi): open `path` under the directory `dirfd` only if
   its resolution stays beneath it (Linux openat2(2), RESOLVE_BENEATH: `..` and symlinks that
   lead out fail with EXDEV, absolute symlinks too). Elsewhere, and on kernels before 5.6,
   ENOSYS: the caller then resolves the path with realpath(3) and checks it. */
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__linux__) && defined(SYS_openat2) && defined(__has_include)
#if __has_include(<linux/openat2.h>)
#define CYM_HAVE_OPENAT2 1
#endif
#endif
#if defined(CYM_HAVE_OPENAT2)
#include <linux/openat2.h>
static inline int cym_open_beneath(int dirfd, const char *path, int flags) {
  struct open_how how = {0};
  how.flags = (uint64_t) flags;
  how.resolve = RESOLVE_BENEATH;
  return (int) syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}
#else
static inline int cym_open_beneath(int dirfd, const char *path, int flags) {
  (void) dirfd, (void) path, (void) flags;
  errno = ENOSYS;
  return -1;
}
#endif

#endif
