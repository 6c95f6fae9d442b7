/* CONN_ERROR_HOOK (integration, upstream: cymongoose-only), vendor/mongoose/inventory.py.
 *
 * Mongoose 7.23's mg_error() logs "<id> <fd> <text>" at ERROR for every failed connection,
 * a client's reset included, and its OpenSSL code logs each line of OpenSSL's error queue at
 * ERROR before that: a server's log fills with lines that name no peer and need no action.
 * Ours hands the connection, the text and errno to cymongoose (cym_conn_error_hook), which
 * logs one line with the peer address at a level that fits (c_log.pxi); the OpenSSL reason
 * is kept for that line instead of being logged on its own.
 */

// @hunk definitions
void (*cym_conn_error_hook)(struct mg_connection *c, const char *text, int err) = NULL;
_Thread_local char cym_tls_reason[256];  /* cymongoose build fix: see CONN_ERROR_HOOK */

// @hunk errno
  int cym_errno = errno;  /* cymongoose build fix: for cym_conn_error_hook */

// @hunk hook
  if (cym_conn_error_hook != NULL) {  /* cymongoose build fix: one line, with the peer */
    cym_conn_error_hook(c, buf, cym_errno);
  } else {
    MG_ERROR(("%lu %ld %s", c->id, c->fd, buf));
  }

// @hunk tls_reason
  if (cym_conn_error_hook != NULL) {  /* cymongoose build fix: kept for the error line */
    if (n < 0) n = 0;
    if ((size_t) n >= sizeof(cym_tls_reason)) n = (int) sizeof(cym_tls_reason) - 1;
    memcpy(cym_tls_reason, s, (size_t) n);
    cym_tls_reason[n] = 0;
  } else {
    MG_ERROR(("%lu %.*s", ((struct mg_connection *) c)->id, n, s));
  }
