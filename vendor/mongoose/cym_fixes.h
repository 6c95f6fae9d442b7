/* The cym_* interface: what the fixes (vendor/mongoose/inventory.py, C in fixes/) add to
 * mongoose.c, declared once. build_fixes.py includes this header in the patched mongoose.c,
 * right after mongoose.h, so each definition there is checked against it; the core's C
 * helpers (src/cymongoose/includes/cym_extra.h) include it, and includes/mongoose.pxd
 * declares it to Cython with `cdef extern from "cym_fixes.h"`. */
#ifndef CYM_FIXES_H
#define CYM_FIXES_H
#include <stddef.h>
#include <stdint.h>
#include "mongoose.h"

/* EPOLL_INTEREST: set a connection's epoll interest (EPOLLIN unless c->is_full, EPOLLOUT if
 * wr), with no system call when it is already registered (kept in c->prof.len); a no-op
 * without epoll. */
void cym_epoll_set(struct mg_connection *c, int wr);

/* ACCEPT_PAUSE: called from the polling thread (with the GIL released or held) when accept()
 * fails for lack of descriptors or memory and the listeners pause; once per episode. */
extern void (*cym_accept_paused_hook)(struct mg_connection *lsn, int err);

/* PEER_EOF: asked when recv() on a TCP connection returns 0; non-zero keeps the connection
 * open (cymongoose finishes the response it owes). */
extern int (*cym_peer_eof_hook)(struct mg_connection *c);

/* CONN_ERROR_HOOK: called by mg_error() instead of its log line (the text and the errno of
 * the failure), before MG_EV_ERROR; and the last OpenSSL error text of this thread, kept for
 * that call ("" once read). */
extern void (*cym_conn_error_hook)(struct mg_connection *c, const char *text, int err);
extern _Thread_local char cym_tls_reason[256];

/* RECV_GROWTH: asked before a full receive buffer doubles, the most it may grow to (0: no
 * cap); it grows by MG_IO_SIZE at least. */
extern size_t (*cym_recv_cap_hook)(struct mg_connection *c);

/* INTERNALS: Mongoose's static protocol handlers, and its private c->data fields cymongoose
 * reads (checked at compile time in fixes/internals.c). */
extern const mg_event_handler_t cym_http_cb;
extern const mg_event_handler_t cym_static_cb;
extern const mg_event_handler_t cym_mg_ws_cb;
extern const mg_event_handler_t cym_mqtt_cb;
extern const mg_event_handler_t cym_sntp_cb;
extern const mg_event_handler_t cym_dns_cb;
size_t *cym_static_left(struct mg_connection *c);
char *cym_sntp_flag(struct mg_connection *c);

/* QUIET_SKIP: connections whose c->pfn is this hold a struct cym_quiet at the start of
 * c->pfn_data; mg_mgr_poll() may skip them (no MG_EV_POLL) until its `until` while they have
 * no I/O and nothing to send. */
extern mg_event_handler_t cym_quiet_pfn;

/* PARKING: the head of an HttpGuard (c->pfn_data), through which an idle connection leaves
 * mgr->conns for a heap on its deadline, and the head of the GilSlot (mgr->userdata), which
 * holds that heap. src/cymongoose/_mongoose.pxd puts these first in those two objects. */
struct cym_quiet {
  uint64_t until; /* skip (or park) the connection until then; 0: never */
  size_t slot;    /* parked: 1 + its index in the heap; 0: in mgr->conns */
  int park;       /* quiet while waiting for a request: it may leave mgr->conns */
};
struct cym_parking {
  struct mg_connection **heap;
  size_t len, cap;
};
void cym_unpark(struct mg_connection *c);
struct mg_connection *cym_parked_find(struct mg_mgr *mgr, unsigned long id);
struct mg_connection *cym_parked_at(struct mg_mgr *mgr, size_t i); /* NULL past the end */
int cym_parked_wait_ms(struct mg_mgr *mgr, int ms); /* ms capped at the first deadline */

/* HTTP_PARSE_HOOK: when set, http_cb parses a request head with it instead of
 * mg_http_parse() (same contract); cymongoose fills heads its guard validated. */
extern int (*cym_http_parse_hook)(struct mg_connection *c, const char *s, size_t len,
                                  struct mg_http_message *hm);

/* DIRLIST: non-zero while a serve_dir() call that asked for directory listings runs on this
 * thread; otherwise a directory without an index file is a 403. */
extern _Thread_local int cym_dirlist_allowed;

/* STATIC_SERVE: while set (by the core, around one mg_http_serve_dir() call on this thread),
 * mg_http_serve_dir() records here what it would answer instead of answering: a file (its
 * path; found: it exists), a redirect to the directory URL's slash, or a 403 for a directory
 * it may not list. slash: the URL ended in '/'; dir: the path is a directory's index. */
enum { CYM_SERVE_NONE = 0, CYM_SERVE_FILE = 1, CYM_SERVE_REDIRECT = 2, CYM_SERVE_FORBIDDEN = 3 };
struct cym_serve_out {
  int kind;
  int found;
  int slash;
  int dir;
  char path[MG_PATH_MAX];
};
extern _Thread_local struct cym_serve_out *cym_serve_result;
/* Mongoose's guess_content_type(): the MIME type of a path, serve_dir's overrides first. */
struct mg_str cym_guess_content_type(struct mg_str path, const char *extra);

#endif
