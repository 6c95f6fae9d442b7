/* SOCKET_ERRNO (bug, upstream: cymongoose-only), vendor/mongoose/inventory.py.
 *
 * Mongoose 7.23 says only "socket error" when poll/epoll/select report a socket failed, or
 * when a connect completed without a peer: the reason (a refused or unreachable connect, a
 * reset) is the socket's pending error, SO_ERROR, never errno, which still holds whatever
 * an earlier call left (EINPROGRESS from the non-blocking connect: "Operation now in
 * progress" was logged for every refused connection). Ours reads SO_ERROR and names it in
 * the text MG_EV_ERROR carries ("socket error: Connection refused"), so every handler, the
 * log line and the reverse proxy's 502 say why. A connect() that fails at once ("connect:
 * 101") gets its errno's text too.
 */

// @hunk definitions
static int cym_socket_errno(struct mg_connection *c, const char *text, int err) {
  /* cymongoose build fix: see SOCKET_ERRNO */
  int so = 0;
  socklen_t n = sizeof(so);
  if (strcmp(text, "socket error") != 0) return err;
  if (getsockopt((int) (size_t) c->fd, SOL_SOCKET, SO_ERROR, (char *) &so, &n) == 0)
    return so;
  return 0;
}

// @hunk reason
  cym_errno = cym_socket_errno(c, buf, cym_errno);  /* cymongoose build fix: SOCKET_ERRNO */
  if (cym_errno != 0 && strcmp(buf, "socket error") == 0)
    mg_snprintf(buf, sizeof(buf), "socket error: %s", strerror(cym_errno));
  else if (cym_errno != 0 && strncmp(buf, "connect: ", 9) == 0)
    mg_snprintf(buf, sizeof(buf), "connect: %s", strerror(cym_errno));
