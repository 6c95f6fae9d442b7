/* QUIET_SKIP (perf, upstream: cymongoose-only), vendor/mongoose/inventory.py.
 *
 * Mongoose 7.23 sends MG_EV_POLL to every connection on every iteration: with 10,000 idle
 * keep-alive clients, one request costs 10,000 protocol-handler calls. cymongoose's HTTP guard
 * (cym_quiet_pfn) marks a connection that needs nothing until a deadline (idle keep-alive, or
 * a response its app still owes; nothing buffered, a handler that does not take MG_EV_POLL)
 * with the time in the first uint64_t of its c->pfn_data; the loop skips it until then unless
 * it has I/O, bytes to send, or is closing or draining.
 */

// @hunk definitions
mg_event_handler_t cym_quiet_pfn = NULL;  /* cymongoose build fix: see QUIET_SKIP */

// @hunk skip
    if (c->pfn == cym_quiet_pfn && cym_quiet_pfn != NULL && c->pfn_data != NULL &&
        !c->is_readable && !c->is_writable && !c->is_closing && !c->is_draining &&
        c->send.len == 0 && *(const uint64_t *) c->pfn_data > now)
      continue;  /* cymongoose build fix: quiet until its deadline */
