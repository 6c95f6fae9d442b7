/* ACCEPT_BURST (perf, upstream: cymongoose-only), vendor/mongoose/inventory.py.
 *
 * Mongoose 7.23 accepts one connection per listener per poll iteration, so a burst of 10,000
 * clients needs 10,000 iterations, each walking every connection. Ours accepts until the
 * backlog is empty or CYM_ACCEPT_BURST connections (so a storm cannot starve established
 * clients); ACCEPT_PAUSE's cym_accept_failed() ends a burst early.
 */

// @hunk definitions
#define CYM_ACCEPT_BURST 128  /* cymongoose build fix: accept bursts */
/* set when the backlog is empty or accept() failed (ACCEPT_PAUSE) */
static _Thread_local int s_cym_accept_stop;

// @hunk burst
static void cym_accept_burst(struct mg_mgr *mgr, struct mg_connection *lsn) {
  int i;  /* cymongoose build fix: accept until the backlog is empty, bounded */
  s_cym_accept_stop = 0;
  for (i = 0; i < CYM_ACCEPT_BURST && !s_cym_accept_stop && !lsn->is_closing; i++)
    accept_conn(mgr, lsn);
}


// @hunk call
      if (c->is_readable) cym_accept_burst(mgr, c);  /* cymongoose build fix */
