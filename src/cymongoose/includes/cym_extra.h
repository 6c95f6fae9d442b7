/* Declarations cymongoose needs that mongoose.h does not export. */
#ifndef CYM_EXTRA_H
#define CYM_EXTRA_H
#include <stdint.h>
#include "mongoose.h"

/* Defined in mongoose.c (src/sntp.c): wall-clock milliseconds at mg_millis() == 0. */
extern uint64_t mg_boot_timestamp_ms;

/* Added by vendor/mongoose/build_fixes.py: the connection's epoll interest, changed only when
   it differs from what is registered (kept in c->prof.len); a no-op without epoll. */
void cym_epoll_set(struct mg_connection *c, int wr);

/* Defined by vendor/mongoose/build_fixes.py: called (with the GIL released or held, from
   the polling thread) when accept() fails for lack of descriptors or memory and the
   listeners pause; once per episode. */
extern void (*cym_accept_paused_hook)(struct mg_connection *lsn, int err);

/* Defined by vendor/mongoose/build_fixes.py: asked when recv() on a TCP connection returns 0;
   non-zero keeps the connection open (cymongoose finishes the response it owes). */
extern int (*cym_peer_eof_hook)(struct mg_connection *c);

/* Defined by vendor/mongoose/build_fixes.py: called by mg_error() instead of its log line
   (the text and the errno of the failure), before MG_EV_ERROR; and the last OpenSSL error
   text of this thread, kept for that call ("" once read). */
extern void (*cym_conn_error_hook)(struct mg_connection *c, const char *text, int err);
extern _Thread_local char cym_tls_reason[256];

/* Defined by vendor/mongoose/build_fixes.py (RECV_GROWTH): asked before a full receive buffer
   doubles, the most it may grow to (0: no cap); it grows by MG_IO_SIZE at least. */
extern size_t (*cym_recv_cap_hook)(struct mg_connection *c);

/* Defined by vendor/mongoose/build_fixes.py (INTERNALS), checked there at compile time:
   Mongoose's static protocol handlers, and its private c->data fields cymongoose reads. */
extern const mg_event_handler_t cym_http_cb;
extern const mg_event_handler_t cym_static_cb;
extern const mg_event_handler_t cym_mg_ws_cb;
extern const mg_event_handler_t cym_mqtt_cb;
extern const mg_event_handler_t cym_sntp_cb;
extern const mg_event_handler_t cym_dns_cb;
size_t *cym_static_left(struct mg_connection *c);
char *cym_sntp_flag(struct mg_connection *c);

/* Defined by vendor/mongoose/build_fixes.py (QUIET_SKIP): connections whose c->pfn is this
   hold, in the first uint64_t of c->pfn_data, a time until which mg_mgr_poll() may skip
   them (no MG_EV_POLL) while they have no I/O and nothing to send. */
extern mg_event_handler_t cym_quiet_pfn;

/* Defined by vendor/mongoose/build_fixes.py (PARKING), where their layout is exported as
   cym_park_layout (checked against these at import): the head of an HttpGuard, through
   which an idle connection leaves mgr->conns for a heap on its deadline, and the head of the
   GilSlot (mgr->userdata), which holds that heap. */
struct cym_quiet {
  uint64_t until;
  size_t slot;
  int park;
};
struct cym_parking {
  struct mg_connection **heap;
  size_t len, cap;
};
extern const size_t cym_park_layout[4];
void cym_unpark(struct mg_connection *c);
struct mg_connection *cym_parked_find(struct mg_mgr *mgr, unsigned long id);
struct mg_connection *cym_parked_at(struct mg_mgr *mgr, size_t i);
int cym_parked_wait_ms(struct mg_mgr *mgr, int ms);

/* Defined by vendor/mongoose/build_fixes.py: when set, http_cb parses a request head with it
   instead of mg_http_parse() (same contract); cymongoose fills heads its guard validated. */
extern int (*cym_http_parse_hook)(struct mg_connection *c, const char *s, size_t len,
                                  struct mg_http_message *hm);
/* Defined by vendor/mongoose/build_fixes.py (DIRLIST): non-zero while a serve_dir() call
   that asked for directory listings runs on this thread; otherwise a directory without an
   index file is a 403. */
extern _Thread_local int cym_dirlist_allowed;
static inline int cym_park_layout_ok(void) {
  return cym_park_layout[0] == sizeof(struct cym_quiet) &&
         cym_park_layout[1] == offsetof(struct cym_quiet, slot) &&
         cym_park_layout[2] == offsetof(struct cym_quiet, park) &&
         cym_park_layout[3] == sizeof(struct cym_parking);
}

#endif
