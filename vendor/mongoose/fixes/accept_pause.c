/* ACCEPT_PAUSE (bug, upstream: patch-ready), vendor/mongoose/inventory.py.
 *
 * When accept() fails (EMFILE: out of file descriptors) Mongoose 7.23 logs and returns, and
 * the level-triggered listener wakes the next epoll_wait() at once: the loop spins at 100%
 * CPU logging the same error. Ours takes the listener out of epoll (is_full, see
 * EPOLL_INTEREST) for CYM_ACCEPT_PAUSE_MS on a resource error, telling cymongoose once per
 * episode through cym_accept_paused_hook (it logs), and stays quiet on EAGAIN and on a client
 * that left before its accept. The pause is process-wide, like the descriptor table that ran
 * out. upstream/0002-accept-pause-and-is-full.patch is the same fix for upstream.
 */

// @hunk definitions
#define CYM_ACCEPT_PAUSE_MS 100  /* cymongoose build fix: EMFILE pause */
void (*cym_accept_paused_hook)(struct mg_connection *lsn, int err) = NULL;
static uint64_t s_cym_accept_resume_ms;  /* 0: accepting */
static void cym_accept_failed(struct mg_connection *lsn, int err) {
  s_cym_accept_stop = 1;
  if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
    uint64_t was = __atomic_exchange_n(&s_cym_accept_resume_ms,
                                       mg_millis() + CYM_ACCEPT_PAUSE_MS, __ATOMIC_RELAXED);
    lsn->is_full = 1;
    MG_EPOLL_MOD(lsn, 0);
    if (was == 0 && cym_accept_paused_hook != NULL) cym_accept_paused_hook(lsn, err);
  } else if (err != EAGAIN && err != EWOULDBLOCK && err != ECONNABORTED && err != EPROTO) {
    MG_ERROR(("%lu accept failed, errno %d", lsn->id, err));
  }
}
static void cym_accept_resume(struct mg_connection *lsn, uint64_t now) {
  uint64_t until = __atomic_load_n(&s_cym_accept_resume_ms, __ATOMIC_RELAXED);
  if (until != 0 && now < until) return;
  lsn->is_full = 0;
  MG_EPOLL_MOD(lsn, 0);
}

// @hunk failed
  if (fd == MG_INVALID_SOCKET) {  /* cymongoose build fix: quiet EAGAIN, EMFILE pause */
    cym_accept_failed(lsn, errno);
    return;
  }
  if (__atomic_load_n(&s_cym_accept_resume_ms, __ATOMIC_RELAXED) != 0)
    __atomic_store_n(&s_cym_accept_resume_ms, 0, __ATOMIC_RELAXED);  /* episode over */

// @hunk resume
      if (c->is_full) cym_accept_resume(c, now);  /* cymongoose build fix */
