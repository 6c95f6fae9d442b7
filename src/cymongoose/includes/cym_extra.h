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

#endif
