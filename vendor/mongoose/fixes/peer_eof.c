/* PEER_EOF (bug, upstream: cymongoose-only), vendor/mongoose/inventory.py.
 *
 * Mongoose 7.23 closes a connection as soon as recv() returns 0, so a client that half-closes
 * after its request (shutdown(SHUT_WR), `nc -N`) loses the response not yet written, and
 * any response a handler would give later. Ours asks cymongoose first (cym_peer_eof_hook):
 * for a guarded HTTP connection it stops reading and closes once what is owed has been sent.
 */

// @hunk definitions
int (*cym_peer_eof_hook)(struct mg_connection *c) = NULL;  /* cymongoose build fix */
static _Thread_local int s_cym_read_eof;  /* the last recv() returned 0: orderly EOF */
static int cym_read_eof(struct mg_connection *c) {
  int eof = s_cym_read_eof;
  s_cym_read_eof = 0;
  return eof && !c->is_tls && !c->is_udp && cym_peer_eof_hook != NULL &&
         cym_peer_eof_hook(c);
}

// @hunk recv
    s_cym_read_eof = (n == 0);  /* cymongoose build fix: see PEER_EOF */

// @hunk read_conn
  } else if (n <= 0 && r && cym_read_eof(c)) {
    /* cymongoose build fix: half-closed by the client, cymongoose finishes the reply */
