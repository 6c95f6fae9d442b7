/* Declarations cymongoose needs that mongoose.h does not export. */
#ifndef CYM_EXTRA_H
#define CYM_EXTRA_H
#include <stdint.h>
#include "mongoose.h"

/* Defined in mongoose.c (src/sntp.c): wall-clock milliseconds at mg_millis() == 0. */
extern uint64_t mg_boot_timestamp_ms;

/* Added by vendor/mongoose/build_fixes.py: the connection's epoll interest, changed only when
   it differs from what is registered (kept in c->prof.len). */
void cym_epoll_set(struct mg_connection *c, int wr);

#endif
