/* SENT_NO_WIPE (perf, upstream: cymongoose-only), vendor/mongoose/inventory.py.
 *
 * Mongoose takes the bytes a socket accepted out of c->send with mg_iobuf_del(), which also
 * wipes the vacated tail: every byte sent is written a second time, with zeros. On plain TCP
 * those bytes are on the wire and in the kernel's socket buffer already, so the wipe keeps
 * nothing secret; it was half the user-space instructions of an HTTP/2 download (each byte
 * goes through the connection's send buffer there: issue 36, docs/performance.md). The tail
 * stays this connection's own memory, wiped whole when the buffer is resized or freed
 * (mg_iobuf_resize). Over TLS, c->send holds plaintext the wire never carries: wiped as before.
 */

// @hunk take
      if (c->is_tls) {  /* cymongoose build fix: no wipe of bytes the socket took */
        mg_iobuf_del(&c->send, 0, (size_t) n);
      } else if ((size_t) n >= c->send.len) {
        c->send.len = 0;
      } else {
        memmove(c->send.buf, c->send.buf + n, c->send.len - (size_t) n);
        c->send.len -= (size_t) n;
      }
