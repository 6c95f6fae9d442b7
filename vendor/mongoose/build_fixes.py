#!/usr/bin/env python3
"""Write the copy of mongoose.c that cymongoose compiles: the pinned file plus our fixes.

The pristine, hash-verified mongoose.c stays untouched beside this script (and in our sdist);
the build (CMakeLists.txt) compiles the output of this script instead. Each fix is our own
code inserted after an anchor line, applied only to the pinned file (its sha256 is checked),
and the script fails loudly if an anchor is missing, so a Mongoose update can never be
half-fixed silently.

    python3 build_fixes.py <pristine mongoose.c> <output mongoose.c>
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PIN = json.loads((HERE / "pin.json").read_text())

# Mongoose 7.23 encodes the ECDSA signature of its TLS 1.3 CertificateVerify with fixed
# 32-byte INTEGERs. When r or s starts with a zero byte (about 1 handshake in 256) that is
# not minimal DER, and OpenSSL-based clients (Python's ssl, curl) reject the handshake with
# "bad signature". tests/protocols/test_tls.py runs enough handshakes to catch it. Our block
# runs right after Mongoose built the signature and re-encodes it minimally from the raw
# 64-byte r||s still in `sig`.
ECDSA_MINIMAL_DER = """\
    {  /* cymongoose build fix: minimal DER INTEGERs in CertificateVerify */
      const uint8_t *r_ = sig, *s_ = sig + 32;
      size_t rl_ = 32, sl_ = 32, p_;
      int rn_, sn_;
      while (rl_ > 1 && r_[0] == 0 && !(r_[1] & 0x80)) r_++, rl_--;
      while (sl_ > 1 && s_[0] == 0 && !(s_[1] & 0x80)) s_++, sl_--;
      rn_ = !!(r_[0] & 0x80);
      sn_ = !!(s_[0] & 0x80);
      verify[9] = (uint8_t) (4 + rl_ + (size_t) rn_ + sl_ + (size_t) sn_);
      verify[10] = 0x02;
      verify[11] = (uint8_t) (rl_ + (size_t) rn_);
      verify[12] = 0;
      memmove(verify + 12 + rn_, r_, rl_);
      p_ = 12 + (size_t) rn_ + rl_;
      verify[p_] = 0x02;
      verify[p_ + 1] = (uint8_t) (sl_ + (size_t) sn_);
      verify[p_ + 2] = 0;
      memmove(verify + p_ + 2 + sn_, s_, sl_);
      sigsz = p_ + 2 + (size_t) sn_ + sl_ - 8;
    }
"""

# mg_bzero() wipes every buffer Mongoose frees or consumes (each byte sent, for one) with a
# volatile byte-at-a-time loop: about 5 instructions per byte, 96% of the user-space
# instructions when serving 100 KiB files (docs/performance.md). memset() plus a compiler
# barrier keeps the guarantee that matters (the stores cannot be elided) at memset speed.
FAST_BZERO = """\
  if (buf != NULL && len > 0) {  /* cymongoose build fix: fast wipe, still not elidable */
    memset((void *) buf, 0, len);
    __asm__ __volatile__("" : : "r"(buf) : "memory");
  }
  if (len > 0) return;
"""

# Mongoose's epoll interest always includes EPOLLIN, so a connection whose reads are paused
# (c->is_full: a streamed request body the app is not consuming yet) would make the
# level-triggered epoll_wait() return at once, forever: the loop would spin. Our definition
# leaves EPOLLIN out while is_full is set; cymongoose re-arms it when it clears the flag.
#
# Mongoose also asks for EPOLLOUT before every write and drops it after (two epoll_ctl()
# system calls per response, as many as the send() and recv() together). A socket's send
# buffer almost always has room, so we write first and arm EPOLLOUT only after a write fell
# short; each connection's registered interest is kept in c->prof.len (the profiling
# buffer, unused unless MG_ENABLE_PROFILE), so an unchanged interest costs no system call.
# cym_epoll_set() is exported for http_stream.pxi, which pauses and resumes reads; without
# epoll (MG_ENABLE_EPOLL is set on Linux only, CMakeLists.txt) it is a no-op, poll() asking
# afresh on every iteration for what can_read()/can_write() allow.
EPOLL_INTEREST = """\
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
#define MG_EPOLL_ADD(c)                                                    \\
  do {                                                                     \\
    struct epoll_event ev = {EPOLLIN | EPOLLERR | EPOLLHUP, {c}};          \\
    (c)->prof.len = (size_t) ev.events;                                    \\
    epoll_ctl(c->mgr->epoll_fd, EPOLL_CTL_ADD, (int) (size_t) c->fd, &ev); \\
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
"""

# Before waiting, a connection with bytes to send is marked writable (and the wait made
# zero) instead of having EPOLLOUT armed; only an armed one waits for the kernel's word.
# A connect still in progress is the exception: writability is how the kernel says the
# handshake ended, and Mongoose takes "writable" as "connected or failed" (connect_conn), so
# marking it ourselves failed every connect that did not complete at once ("socket error":
# any upstream farther than loopback; found by the reverse proxy's connect-timeout test).
WRITE_FIRST = """\
    if (can_write(c) && !CYM_EPOLLOUT_ARMED(c)) {  /* cymongoose build fix: write first */
      if (c->is_connecting) {
        MG_EPOLL_MOD(c, 1);  /* a pending connect: the kernel tells when it is done */
      } else {
        c->is_writable = 1;
        ms = 0;
      }
    }
"""
WRITE_FIRST_AFTER_EVENTS = """\
      if (can_write(c) && !c->is_connecting && !CYM_EPOLLOUT_ARMED(c))
        c->is_writable = 1;  /* cymongoose build fix: write first */
"""
# What the handler queued while reading goes out in the same iteration, not the next.
WRITE_AFTER_READ = """\
      if (!c->is_writable && !c->is_closing && !c->is_connecting && can_write(c) &&
          !CYM_EPOLLOUT_ARMED(c))
        c->is_writable = 1;  /* cymongoose build fix: answer in the same iteration */
"""
# A write that fell short (a full socket buffer): now wait for EPOLLOUT.
ARM_AFTER_SHORT_WRITE = """\
  if (c->send.len > 0 && !c->is_closing) MG_EPOLL_MOD(c, 1);  /* cymongoose build fix */
"""

# Mongoose 7.23 accepts one connection per listener per poll iteration, so a burst of 10,000
# clients needs 10,000 iterations, each walking every connection; and when accept() fails
# (EMFILE: out of file descriptors) it logs and returns, and the level-triggered listener
# wakes the next epoll_wait() at once: the loop spins at 100% CPU logging the same error.
# Ours accepts until the backlog is empty or CYM_ACCEPT_BURST connections (so a storm
# cannot starve established clients), and on a resource error takes the listener out of
# epoll (is_full, see EPOLL_INTEREST) for CYM_ACCEPT_PAUSE_MS, telling cymongoose
# once per episode through cym_accept_paused_hook (it logs). The pause is process-wide,
# like the descriptor table that ran out.
ACCEPT_STATE = """\
#define CYM_ACCEPT_BURST 128     /* cymongoose build fix: accept bursts and EMFILE pause */
#define CYM_ACCEPT_PAUSE_MS 100
void (*cym_accept_paused_hook)(struct mg_connection *lsn, int err) = NULL;
static uint64_t s_cym_accept_resume_ms;  /* 0: accepting */
static _Thread_local int s_cym_accept_stop;
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
"""

ACCEPT_FAILED = """\
  if (fd == MG_INVALID_SOCKET) {  /* cymongoose build fix: quiet EAGAIN, EMFILE pause */
    cym_accept_failed(lsn, errno);
    return;
  }
  if (__atomic_load_n(&s_cym_accept_resume_ms, __ATOMIC_RELAXED) != 0)
    __atomic_store_n(&s_cym_accept_resume_ms, 0, __ATOMIC_RELAXED);  /* episode over */
"""

ACCEPT_BURST = """\
static void cym_accept_burst(struct mg_mgr *mgr, struct mg_connection *lsn) {
  int i;  /* cymongoose build fix: accept until the backlog is empty, bounded */
  s_cym_accept_stop = 0;
  for (i = 0; i < CYM_ACCEPT_BURST && !s_cym_accept_stop && !lsn->is_closing; i++)
    accept_conn(mgr, lsn);
}

"""

# Mongoose 7.23 closes a connection as soon as recv() returns 0, so a client that half-closes
# after its request (shutdown(SHUT_WR), `nc -N`) loses the response not yet written, and
# any response a handler would give later. Ours asks cymongoose first (cym_peer_eof_hook):
# for a guarded HTTP connection it stops reading and closes once what is owed has been sent.
READ_EOF_STATE = """\
int (*cym_peer_eof_hook)(struct mg_connection *c) = NULL;  /* cymongoose build fix */
static _Thread_local int s_cym_read_eof;  /* the last recv() returned 0: orderly EOF */
static int cym_read_eof(struct mg_connection *c) {
  int eof = s_cym_read_eof;
  s_cym_read_eof = 0;
  return eof && !c->is_tls && !c->is_udp && cym_peer_eof_hook != NULL &&
         cym_peer_eof_hook(c);
}
"""

# The Mongoose internals cymongoose reaches, exported by name at the end of the file and
# checked at compile time (src/cymongoose/includes/cym_extra.h declares them): the static
# protocol handlers it runs behind its own (http_cb, static_cb, mg_ws_cb, mqtt_cb, sntp_cb,
# dns_cb) and the two private c->data layouts it reads (static_cb's bytes still to send,
# sntp_cb's expiry). A Mongoose update that renames or retypes a handler fails to compile;
# one that moves a layout fails LAYOUTS below (their defining lines must be there, once).
INTERNALS = """\

/* cymongoose build fix: Mongoose internals cymongoose uses, exported and checked. */
#define CYM_HANDLER(fn)                                                         \\
  _Static_assert(__builtin_types_compatible_p(__typeof__(&fn), mg_event_handler_t), \\
                 #fn " is no longer an mg_event_handler_t");                    \\
  const mg_event_handler_t cym_##fn = fn;
CYM_HANDLER(http_cb)
CYM_HANDLER(static_cb)
CYM_HANDLER(mg_ws_cb)
CYM_HANDLER(mqtt_cb)
CYM_HANDLER(sntp_cb)
CYM_HANDLER(dns_cb)
/* static_cb: the file bytes still to send, in the last aligned size_t of c->data. */
_Static_assert(sizeof(((struct mg_connection *) 0)->data) >= sizeof(size_t),
               "c->data cannot hold static_cb's length");
size_t *cym_static_left(struct mg_connection *c) {
  return (size_t *) &c->data[(sizeof(c->data) - sizeof(size_t)) / sizeof(size_t) *
                             sizeof(size_t)];
}
/* sntp_cb: a uint64_t expiry at the start of c->data; cymongoose keeps a flag after it. */
_Static_assert(sizeof(((struct mg_connection *) 0)->data) > sizeof(uint64_t),
               "c->data has no byte free after sntp_cb's expiry");
char *cym_sntp_flag(struct mg_connection *c) {
  return &c->data[sizeof(uint64_t)];
}
"""

# Lines of mongoose.c that define the c->data layouts INTERNALS relies on: each must occur
# exactly once, or the build stops (the layout may have moved).
LAYOUTS = [
    "    size_t *cl = (size_t *) &c->data[(sizeof(c->data) - sizeof(size_t)) /\n"
    "                                     sizeof(size_t) * sizeof(size_t)];\n",
    "  uint64_t *expiration_time = (uint64_t *) c->data;\n",
]

# Mongoose 7.23 sends MG_EV_POLL to every connection on every iteration: with 10,000 idle
# keep-alive clients, one request costs 10,000 protocol-handler calls. cymongoose's HTTP guard
# (cym_quiet_pfn) marks a connection that needs nothing until a deadline (idle keep-alive,
# nothing buffered, a handler that does not take MG_EV_POLL) with the time in the first
# uint64_t of its c->pfn_data; the loop skips it until then unless it has I/O or is closing.
QUIET_STATE = """\
mg_event_handler_t cym_quiet_pfn = NULL;  /* cymongoose build fix: see QUIET_SKIP */
"""
QUIET_SKIP = """\
    if (c->pfn == cym_quiet_pfn && cym_quiet_pfn != NULL && c->pfn_data != NULL &&
        !c->is_readable && !c->is_writable && !c->is_closing && !c->is_draining &&
        c->send.len == 0 && *(const uint64_t *) c->pfn_data > now)
      continue;  /* cymongoose build fix: quiet until its deadline */
"""

# QUIET_SKIP still walks every connection on every iteration (and so does the iotest before
# the wait): with 15,000 idle keep-alive clients a fresh client's first byte took 3-5 ms
# instead of 0.4 (issue 22). So an idle connection the guard marked parkable leaves
# mgr->conns altogether: the pre-wait walk (which runs no handler, so its link pointer
# stays valid) moves it into a min-heap on its deadline, kept in the Manager's GilSlot
# (mgr->userdata), and the loop's work per iteration follows the connections that have
# something to do. A parked connection comes back to the head of mgr->conns when epoll
# reports it, when its deadline passes (it then gets the MG_EV_POLL that times it out or
# re-parks it), when cymongoose touches it (cym_unpark: any Connection method), when a
# wakeup names it, and before mg_mgr_free(). Both structures are declared again in
# src/cymongoose/includes/cym_extra.h; cymongoose compares cym_park_layout with its own at
# import, so the two cannot drift apart silently.
PARKING = """\
struct cym_quiet {  /* cymongoose build fix: the head of an HttpGuard (c->pfn_data) */
  uint64_t until;   /* skip (or park) the connection until then; 0: never */
  size_t slot;      /* parked: 1 + its index in the heap; 0: in mgr->conns */
  int park;         /* quiet while waiting for a request: it may leave mgr->conns */
};
struct cym_parking {  /* the head of cymongoose's GilSlot (mgr->userdata) */
  struct mg_connection **heap;
  size_t len, cap;
};
const size_t cym_park_layout[4] = {sizeof(struct cym_quiet), offsetof(struct cym_quiet, slot),
                                   offsetof(struct cym_quiet, park), sizeof(struct cym_parking)};
#define CYM_Q(c) ((struct cym_quiet *) (c)->pfn_data)
#define CYM_PARKING(mgr) ((struct cym_parking *) (mgr)->userdata)
static bool cym_parked(const struct mg_connection *c) {
  return c != NULL && c->pfn == cym_quiet_pfn && cym_quiet_pfn != NULL &&
         c->pfn_data != NULL && CYM_Q(c)->slot != 0;
}
static void cym_heap_put(struct cym_parking *p, size_t i, struct mg_connection *c) {
  p->heap[i] = c;
  CYM_Q(c)->slot = i + 1;
}
static void cym_heap_fix(struct cym_parking *p, size_t i) {  /* restore order around i */
  struct mg_connection *c = p->heap[i];
  uint64_t key = CYM_Q(c)->until;
  while (i > 0 && CYM_Q(p->heap[(i - 1) / 2])->until > key) {
    cym_heap_put(p, i, p->heap[(i - 1) / 2]);
    i = (i - 1) / 2;
  }
  for (;;) {
    size_t kid = 2 * i + 1;
    if (kid >= p->len) break;
    if (kid + 1 < p->len && CYM_Q(p->heap[kid + 1])->until < CYM_Q(p->heap[kid])->until) kid++;
    if (CYM_Q(p->heap[kid])->until >= key) break;
    cym_heap_put(p, i, p->heap[kid]);
    i = kid;
  }
  cym_heap_put(p, i, c);
}
static bool cym_may_park(const struct mg_connection *c, uint64_t now) {
  return c->pfn == cym_quiet_pfn && cym_quiet_pfn != NULL && c->pfn_data != NULL &&
         c->mgr->userdata != NULL && CYM_Q(c)->park && CYM_Q(c)->until > now &&
         !c->is_closing && !c->is_draining && !c->is_resp && !c->is_tls &&
         c->send.len == 0 && c->recv.len == 0 && c->rtls.len == 0;
}
static bool cym_park(struct mg_connection *c) {  /* the caller unlinks it on success */
  struct cym_parking *p = CYM_PARKING(c->mgr);
  if (p->len == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 256;
    struct mg_connection **heap =
        (struct mg_connection **) realloc(p->heap, cap * sizeof(*heap));
    if (heap == NULL) return false;  /* stays in the list: skipped as before */
    p->heap = heap, p->cap = cap;
  }
  p->heap[p->len++] = c;
  cym_heap_fix(p, p->len - 1);
  return true;
}
void cym_unpark(struct mg_connection *c) {
  struct cym_parking *p;
  size_t i;
  if (!cym_parked(c)) return;
  p = CYM_PARKING(c->mgr);
  i = CYM_Q(c)->slot - 1;
  CYM_Q(c)->slot = 0;
  if (i < --p->len) {
    cym_heap_put(p, i, p->heap[p->len]);
    cym_heap_fix(p, i);
  }
  LIST_ADD_HEAD(struct mg_connection, &c->mgr->conns, c);
}
static void cym_unpark_due(struct mg_mgr *mgr, uint64_t now) {
  struct cym_parking *p = CYM_PARKING(mgr);
  while (cym_quiet_pfn != NULL && p != NULL && p->len > 0 && CYM_Q(p->heap[0])->until <= now)
    cym_unpark(p->heap[0]);
}
static void cym_unpark_all(struct mg_mgr *mgr) {
  struct cym_parking *p = CYM_PARKING(mgr);
  if (cym_quiet_pfn == NULL || p == NULL) return;
  while (p->len > 0) cym_unpark(p->heap[p->len - 1]);
  free(p->heap);
  p->heap = NULL, p->cap = 0;
}
struct mg_connection *cym_parked_find(struct mg_mgr *mgr, unsigned long id) {
  struct cym_parking *p = CYM_PARKING(mgr);
  size_t i;
  for (i = 0; cym_quiet_pfn != NULL && p != NULL && i < p->len; i++)
    if (p->heap[i]->id == id) return p->heap[i];
  return NULL;
}
struct mg_connection *cym_parked_at(struct mg_mgr *mgr, size_t i) {  /* NULL past the end */
  struct cym_parking *p = CYM_PARKING(mgr);
  return cym_quiet_pfn != NULL && p != NULL && i < p->len ? p->heap[i] : NULL;
}
int cym_parked_wait_ms(struct mg_mgr *mgr, int ms) {  /* ms capped at the first deadline */
  struct cym_parking *p = CYM_PARKING(mgr);
  uint64_t now, until;
  if (cym_quiet_pfn == NULL || p == NULL || p->len == 0) return ms;
  now = mg_millis(), until = CYM_Q(p->heap[0])->until;
  if (until <= now) return 0;
  return ms >= 0 && (uint64_t) ms <= until - now ? ms : (int) (until - now);
}
"""
# The pre-wait walk parks what may wait; what it keeps is the loop's work.
PARK_IN_IOTEST_OLD = """\
#elif MG_ENABLE_EPOLL
  size_t max = 1;
  for (struct mg_connection *c = mgr->conns; c != NULL; c = c->next) {
    c->is_readable = c->is_writable = 0;
"""
PARK_IN_IOTEST = """\
#elif MG_ENABLE_EPOLL
  size_t max = 1;
  uint64_t cym_now = mg_millis();  /* cymongoose build fix: see PARKING */
  struct mg_connection **cym_link = &mgr->conns, *cym_next;
  for (struct mg_connection *c = mgr->conns; c != NULL; c = cym_next) {
    cym_next = c->next;
    c->is_readable = c->is_writable = 0;
    if (cym_may_park(c, cym_now) && cym_park(c)) {
      *cym_link = cym_next;
      continue;
    }
    cym_link = &c->next;
"""
PARKED_EVENTS_OLD = "  struct epoll_event *evs = (struct epoll_event *) alloca(max * sizeof(evs[0]));\n"
PARKED_EVENTS = """\
  if (CYM_PARKING(mgr) != NULL && cym_quiet_pfn != NULL) {  /* cymongoose build fix */
    max += CYM_PARKING(mgr)->len;  /* parked connections' events are asked for too */
    ms = cym_parked_wait_ms(mgr, ms);
  }
""" + PARKED_EVENTS_OLD
UNPARK_ON_EVENT = "    cym_unpark(c);  /* cymongoose build fix: it has I/O, back in the list */\n"
UNPARK_DUE_OLD = """\
  mg_iotest(mgr, ms);
  now = mg_millis();
  mg_timer_poll(&mgr->timers, now);
"""
UNPARK_DUE = UNPARK_DUE_OLD + "  cym_unpark_due(mgr, now);  /* cymongoose build fix: see PARKING */\n"
WAKE_PARKED_OLD = """\
      struct mg_connection *t;
      for (t = c->mgr->conns; t != NULL; t = t->next) {
        if (t->id == *id) {
          struct mg_str data = mg_str_n((char *) c->recv.buf + sizeof(*id),
"""
WAKE_PARKED = """\
      struct mg_connection *t;
      for (t = c->mgr->conns; t != NULL && t->id != *id; t = t->next) (void) 0;
      if (t == NULL) cym_unpark(cym_parked_find(c->mgr, *id));  /* cymongoose build fix */
      for (t = c->mgr->conns; t != NULL; t = t->next) {
        if (t->id == *id) {
          struct mg_str data = mg_str_n((char *) c->recv.buf + sizeof(*id),
"""

# http_cb parses every request head again with mg_http_parse() after cymongoose's guard has
# parsed and validated it: UTF-8 aware character by character, a 4 KiB memset of the
# message, five case-insensitive compares per header; about 2,300 instructions of a hello
# request (docs/performance.md). cymongoose fills the message itself for a head its guard
# validated (cym_http_parse_hook, http_split.pxi), returning what mg_http_parse() would;
# anything else (a client's response, a head with bytes above 0x7F, duplicate fields
# Mongoose refuses) still goes through mg_http_parse().
HTTP_PARSE_HOOK_STATE = """\
int (*cym_http_parse_hook)(struct mg_connection *c, const char *s, size_t len,
                           struct mg_http_message *hm) = NULL;  /* cymongoose build fix */
"""
HTTP_PARSE_OLD = "      int n = mg_http_parse(buf, c->recv.len - ofs, &hm);\n"
HTTP_PARSE = """\
      int n = cym_http_parse_hook != NULL && ofs == 0  /* cymongoose build fix */
                  ? cym_http_parse_hook(c, buf, c->recv.len, &hm)
                  : mg_http_parse(buf, c->recv.len - ofs, &hm);
"""

# Mongoose makes each accepted socket non-blocking and close-on-exec with three fcntl() calls
# after accept(): 3 of the 15.5 system calls of a connection that carries one request
# (tests/benchmarks/profile_callgrind.py). Linux (where MG_ENABLE_EPOLL is set) does both in
# the accept itself. accept4() is declared here: glibc declares it only under _GNU_SOURCE.
ACCEPT4_OLD = "    fd = accept(sock, &usa->sa, len);\n"
ACCEPT4 = """\
#if MG_ENABLE_EPOLL  /* cymongoose build fix: non-blocking and close-on-exec at once */
    fd = accept4(sock, &usa->sa, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
#else
    fd = accept(sock, &usa->sa, len);
#endif
"""
ACCEPT4_DECL = """\
#if MG_ENABLE_EPOLL  /* cymongoose build fix: see ACCEPT4 */
extern int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags);
#endif
"""
ACCEPTED_MODE_OLD = """\
    MG_EPOLL_ADD(c);
    mg_set_non_blocking_mode(FD(c));
    setsockopts(c);
    c->is_accepted = 1;
"""
ACCEPTED_MODE = """\
    MG_EPOLL_ADD(c);
#if !MG_ENABLE_EPOLL  /* cymongoose build fix: accept4() set both already (ACCEPT4) */
    mg_set_non_blocking_mode(FD(c));
#endif
    setsockopts(c);
    c->is_accepted = 1;
"""

# Mongoose 7.23's mg_error() logs "<id> <fd> <text>" at ERROR for every failed connection,
# a client's reset included, and its OpenSSL code logs each line of OpenSSL's error queue at
# ERROR before that: a server's log fills with lines that name no peer and need no action.
# Ours hands the connection, the text and errno to cymongoose (cym_conn_error_hook), which
# logs one line with the peer address at a level that fits (c_log.pxi); the OpenSSL reason
# is kept for that line instead of being logged on its own.
CONN_ERROR_STATE = """\
void (*cym_conn_error_hook)(struct mg_connection *c, const char *text, int err) = NULL;
_Thread_local char cym_tls_reason[256];  /* cymongoose build fix: see CONN_ERROR_HOOK */
""" + """\
static int cym_socket_errno(struct mg_connection *c, const char *text, int err) {
  /* cymongoose build fix: see SOCKET_ERRNO */
  int so = 0;
  socklen_t n = sizeof(so);
  if (strcmp(text, "socket error") != 0) return err;
  if (getsockopt((int) (size_t) c->fd, SOL_SOCKET, SO_ERROR, (char *) &so, &n) == 0)
    return so;
  return 0;
}
"""
CONN_ERROR_OLD = '  MG_ERROR(("%lu %ld %s", c->id, c->fd, buf));\n'
# Mongoose 7.23 says only "socket error" when poll/epoll/select report a socket failed, or
# when a connect completed without a peer: the reason (a refused or unreachable connect, a
# reset) is the socket's pending error, SO_ERROR, never errno, which still holds whatever
# an earlier call left (EINPROGRESS from the non-blocking connect: "Operation now in
# progress" was logged for every refused connection). Ours reads SO_ERROR and names it in
# the text MG_EV_ERROR carries ("socket error: Connection refused"), so every handler, the
# log line and the reverse proxy's 502 say why. A connect() that fails at once ("connect:
# 101") gets its errno's text too.
SOCKET_ERRNO = """\
  cym_errno = cym_socket_errno(c, buf, cym_errno);  /* cymongoose build fix: SOCKET_ERRNO */
  if (cym_errno != 0 && strcmp(buf, "socket error") == 0)
    mg_snprintf(buf, sizeof(buf), "socket error: %s", strerror(cym_errno));
  else if (cym_errno != 0 && strncmp(buf, "connect: ", 9) == 0)
    mg_snprintf(buf, sizeof(buf), "connect: %s", strerror(cym_errno));
"""
CONN_ERROR_HOOK = SOCKET_ERRNO + """\
  if (cym_conn_error_hook != NULL) {  /* cymongoose build fix: one line, with the peer */
    cym_conn_error_hook(c, buf, cym_errno);
  } else {
    MG_ERROR(("%lu %ld %s", c->id, c->fd, buf));
  }
"""
TLS_REASON_OLD = '  MG_ERROR(("%lu %.*s", ((struct mg_connection *) c)->id, n, s));\n'
TLS_REASON_KEPT = """\
  if (cym_conn_error_hook != NULL) {  /* cymongoose build fix: kept for the error line */
    if (n < 0) n = 0;
    if ((size_t) n >= sizeof(cym_tls_reason)) n = (int) sizeof(cym_tls_reason) - 1;
    memcpy(cym_tls_reason, s, (size_t) n);
    cym_tls_reason[n] = 0;
  } else {
    MG_ERROR(("%lu %.*s", ((struct mg_connection *) c)->id, n, s));
  }
"""

# Mongoose 7.23's mg_http_serve_dir() lists every directory without an index file (under
# MG_ENABLE_DIRLIST, which stays on for the listing serve_dir offers), dotfiles included,
# with "Mongoose v.7.23" in the footer, and no option turns it off. cymongoose lists only
# when the call asked (serve_dir(directory_listing=True) sets cym_dirlist_allowed around
# mg_http_serve_dir, for this thread); otherwise the directory gets a 403, as nginx answers
# with autoindex off. A listing never shows a name that starts with a dot, and carries no
# version. tests/core/test_serve_dir_safety.py. Not proposed upstream.
DIRLIST_STATE = """\
_Thread_local int cym_dirlist_allowed = 0;  /* cymongoose build fix: see DIRLIST */
"""
DIRLIST_OLD = "#if MG_ENABLE_DIRLIST\n    listdir(c, hm, opts, path);\n"
DIRLIST = """\
#if MG_ENABLE_DIRLIST
    if (cym_dirlist_allowed) {  /* cymongoose build fix: listed only when asked */
      listdir(c, hm, opts, path);
    } else {
      mg_http_reply(c, 403, "", "Forbidden\\n");
    }
"""
DIRLIST_DOTFILES = ("  if (name[0] == '.') return;  "
                    "/* cymongoose build fix: dotfiles are never listed */\n")
DIRLIST_FOOTER_OLD = """\
            "</table><address>Mongoose v.%s</address></body></html>\\n",
            MG_VERSION);
"""
DIRLIST_FOOTER = """\
            "</table></body></html>\\n");  /* cymongoose build fix: no version */
"""

# Mongoose 7.23 grows a full receive buffer by MG_IO_SIZE (ioalloc), allocating a new one and
# copying what it holds each time: n bytes received whole cost about n^2 / 32 KiB bytes of
# copying and zeroing. One 15 MiB WebSocket message took 3-9 s of CPU, a raw TCP or MQTT
# connection the same (issue 33; cymongoose's HTTP guard already grew request bodies itself,
# http_guard.pxi _grow_recv). Ours doubles it instead, up to the most the connection may hold
# as cymongoose says (cym_recv_cap_hook: max_body_size for a WebSocket message,
# Manager.max_recv_size for raw TCP/UDP and MQTT; 0: no cap), and always by at least
# MG_IO_SIZE, so the check that closes a connection over its limit still sees the excess.
# Test: tests/protocols/test_receive_growth.py (server CPU for one 15 MiB message).
RECV_GROWTH = """\
size_t (*cym_recv_cap_hook)(struct mg_connection *c) = NULL;  /* cymongoose build fix */
static size_t cym_recv_grow(struct mg_connection *c, struct mg_iobuf *io) {
  size_t want = io->size < MG_IO_SIZE ? MG_IO_SIZE : io->size * 2, cap;
  if (io == &c->recv && cym_recv_cap_hook != NULL && want > io->size + MG_IO_SIZE &&
      (cap = cym_recv_cap_hook(c)) > 0 && want > cap)
    want = cap;
  return want < io->size + MG_IO_SIZE ? io->size + MG_IO_SIZE : want;
}
"""
RECV_GROWTH_OLD = "             !mg_iobuf_resize(io, io->size + MG_IO_SIZE)) {\n"
RECV_GROWTH_NEW = ("             !mg_iobuf_resize(io, cym_recv_grow(c, io))) {"
                   "  /* cymongoose build fix */\n")

IOLOG_CLOSE = ("  } else if (n <= 0) {\n"
               "    c->is_closing = 1;  // Termination. Don't call mg_error(): #1529\n")

# (old text, new text): each old text must occur exactly once
REPLACEMENTS = [
    (IOLOG_CLOSE,
     "  } else if (n <= 0 && r && cym_read_eof(c)) {\n"
     "    /* cymongoose build fix: half-closed by the client, cymongoose finishes the reply */\n"
     + IOLOG_CLOSE),
    ("    bool is_resp = c->is_resp;\n    tmp = c->next;\n",
     "    bool is_resp = c->is_resp;\n    tmp = c->next;\n" + QUIET_SKIP),
    ("      if (c->is_readable) accept_conn(mgr, c);\n",
     "      if (c->is_full) cym_accept_resume(c, now);  /* cymongoose build fix */\n"
     "      if (c->is_readable) cym_accept_burst(mgr, c);\n"),
    ("static bool can_read(const struct mg_connection *c) {\n",
     ACCEPT_BURST + "static bool can_read(const struct mg_connection *c) {\n"),
    ("    if (can_write(c)) MG_EPOLL_MOD(c, 1);\n", WRITE_FIRST),
    (CONN_ERROR_OLD, CONN_ERROR_HOOK),
    (PARK_IN_IOTEST_OLD, PARK_IN_IOTEST),
    (PARKED_EVENTS_OLD, PARKED_EVENTS),
    (UNPARK_DUE_OLD, UNPARK_DUE),
    (WAKE_PARKED_OLD, WAKE_PARKED),
    (HTTP_PARSE_OLD, HTTP_PARSE),
    (ACCEPT4_OLD, ACCEPT4),
    (ACCEPTED_MODE_OLD, ACCEPTED_MODE),
    (TLS_REASON_OLD, TLS_REASON_KEPT),
    (DIRLIST_OLD, DIRLIST),
    (DIRLIST_FOOTER_OLD, DIRLIST_FOOTER),
    (RECV_GROWTH_OLD, RECV_GROWTH_NEW),
]

# (anchor line, code inserted after it)
FIXES = [
    ("    sigsz = (size_t) (70 + neg1 + neg2);\n", ECDSA_MINIMAL_DER),
    ("void mg_bzero(volatile unsigned char *buf, size_t len) {\n", FAST_BZERO),
    ('#include "mongoose.h"\n',
     EPOLL_INTEREST + ACCEPT_STATE + READ_EOF_STATE + QUIET_STATE + PARKING
     + HTTP_PARSE_HOOK_STATE + ACCEPT4_DECL + CONN_ERROR_STATE + DIRLIST_STATE
     + RECV_GROWTH),
    ("void mg_error(struct mg_connection *c, const char *fmt, ...) {\n",
     "  int cym_errno = errno;  /* cymongoose build fix: for cym_conn_error_hook */\n"),
    ("    n = recv(FD(c), (char *) buf, len, MSG_NONBLOCKING);\n",
     "    s_cym_read_eof = (n == 0);  /* cymongoose build fix: see READ_EOF_STATE */\n"),
    ("  MG_SOCKET_TYPE fd = raccept(FD(lsn), &usa, &sa_len);\n", ACCEPT_FAILED),
    ("      c->is_writable = can_write(c) && wr ? 1U : 0;\n", WRITE_FIRST_AFTER_EVENTS),
    ("      if (c->is_readable) read_conn(c);\n", WRITE_AFTER_READ),
    ("  iolog(c, buf, n, false);\n", ARM_AFTER_SHORT_WRITE),
    ("    struct mg_connection *c = (struct mg_connection *) evs[i].data.ptr;\n",
     UNPARK_ON_EVENT),
    ("  mgr->timers = NULL;  // Important. Next call to poll won't touch timers\n",
     "  cym_unpark_all(mgr);  /* cymongoose build fix: parked ones are closed too */\n"),
    ('  // MG_DEBUG(("[%s] [%s]", d->dir, name));\n', DIRLIST_DOTFILES),
]


def apply(source: bytes) -> bytes:
    text = source.decode("utf-8")
    for layout in LAYOUTS:
        if text.count(layout) != 1:
            raise SystemExit(f"build_fixes.py: c->data layout changed: {layout.strip()!r}")
    for old, new in REPLACEMENTS:
        if text.count(old) != 1:
            raise SystemExit(f"build_fixes.py: text not found exactly once: {old.strip()!r}")
        text = text.replace(old, new)
    for anchor, block in FIXES:
        if text.count(anchor) != 1:
            raise SystemExit(f"build_fixes.py: anchor not found exactly once: {anchor.strip()!r}")
        text = text.replace(anchor, anchor + block)
    return (text + INTERNALS).encode("utf-8")


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    source = Path(argv[1]).read_bytes()
    digest = hashlib.sha256(source).hexdigest()
    if digest != PIN["sha256"]["mongoose.c"]:
        # A user's own copy (CYMONGOOSE_MONGOOSE_DIR): compile it as it is.
        print(f"build_fixes.py: {argv[1]} is not the pinned file; compiling it unmodified")
        patched = source
    else:
        patched = apply(source)
    out = Path(argv[2])
    if not out.exists() or out.read_bytes() != patched:
        out.write_bytes(patched)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
