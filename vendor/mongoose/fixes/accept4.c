/* ACCEPT4 (perf, upstream: cymongoose-only), vendor/mongoose/inventory.py.
 *
 * Mongoose makes each accepted socket non-blocking and close-on-exec with three fcntl() calls
 * after accept(): 3 of the 15.5 system calls of a connection that carries one request
 * (tests/benchmarks/profile_callgrind.py). Linux (where MG_ENABLE_EPOLL is set) does both in
 * the accept itself. accept4() is declared here: glibc declares it only under _GNU_SOURCE.
 */

// @hunk definitions
#if MG_ENABLE_EPOLL  /* cymongoose build fix: see ACCEPT4 */
extern int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags);
#endif

// @hunk accept
#if MG_ENABLE_EPOLL  /* cymongoose build fix: non-blocking and close-on-exec at once */
    fd = accept4(sock, &usa->sa, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
#else
    fd = accept(sock, &usa->sa, len);
#endif

// @hunk accepted
    MG_EPOLL_ADD(c);
#if !MG_ENABLE_EPOLL  /* cymongoose build fix: accept4() set both already (ACCEPT4) */
    mg_set_non_blocking_mode(FD(c));
#endif
    setsockopts(c);
    c->is_accepted = 1;
