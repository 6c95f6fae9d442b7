/* EPOLL_INTEREST (bug, upstream: patch-ready), vendor/mongoose/inventory.py.
 *
 * Mongoose's epoll interest always includes EPOLLIN, so a connection whose reads are paused
 * (c->is_full: a streamed request body the app is not consuming yet) would make the
 * level-triggered epoll_wait() return at once, forever: the loop would spin. Our definition
 * leaves EPOLLIN out while is_full is set; cymongoose re-arms it when it clears the flag.
 *
 * Mongoose also asks for EPOLLOUT before every write and drops it after (two epoll_ctl()
 * system calls per response, as many as the send() and recv() together). A socket's send
 * buffer almost always has room, so we write first and arm EPOLLOUT only after a write fell
 * short; each connection's registered interest is kept in c->prof.len (the profiling
 * buffer, unused unless MG_ENABLE_PROFILE), so an unchanged interest costs no system call.
 * cym_epoll_set() is exported for http_stream.pxi, which pauses and resumes reads; without
 * epoll (MG_ENABLE_EPOLL is set on Linux only, CMakeLists.txt) it is a no-op, poll() asking
 * afresh on every iteration for what can_read()/can_write() allow.
 */

// @hunk definitions
_Static_assert(__builtin_types_compatible_p(__typeof__(((struct mg_connection *) 0)->prof.len),
                                            size_t),
               "c->prof.len is no longer a size_t: EPOLL_INTEREST keeps the interest there");
#if MG_ENABLE_EPOLL  /* cymongoose build fix: epoll interest kept, changed only on a change */
#if MG_ENABLE_PROFILE
#error "cymongoose keeps the epoll interest in c->prof.len: build without MG_ENABLE_PROFILE"
#endif
#define CYM_EPOLLOUT_ARMED(c) (((c)->prof.len & EPOLLOUT) != 0)
void cym_epoll_set(struct mg_connection *c, int wr) {
  struct epoll_event ev = {EPOLLERR | EPOLLHUP, {c}};
  if (!c->is_full) ev.events |= EPOLLIN;
  if (wr) ev.events |= EPOLLOUT;
  if (c->prof.len == (size_t) ev.events) return;
  c->prof.len = (size_t) ev.events;
  epoll_ctl(c->mgr->epoll_fd, EPOLL_CTL_MOD, (int) (size_t) c->fd, &ev);
}
#undef MG_EPOLL_ADD
#define MG_EPOLL_ADD(c)                                                    \
  do {                                                                     \
    struct epoll_event ev = {EPOLLIN | EPOLLERR | EPOLLHUP, {c}};          \
    (c)->prof.len = (size_t) ev.events;                                    \
    epoll_ctl(c->mgr->epoll_fd, EPOLL_CTL_ADD, (int) (size_t) c->fd, &ev); \
  } while (0)
#undef MG_EPOLL_MOD
#define MG_EPOLL_MOD(c, wr) cym_epoll_set((c), (wr))
#else  /* poll() asks for POLLOUT whenever there is something to send: nothing is armed */
#define CYM_EPOLLOUT_ARMED(c) 0
void cym_epoll_set(struct mg_connection *c, int wr) {  /* no epoll (macOS): nothing to set */
  (void) c;
  (void) wr;
}
#endif
