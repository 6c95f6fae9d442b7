/* RECV_GROWTH (perf, upstream: cymongoose-only), vendor/mongoose/inventory.py.
 *
 * Mongoose 7.23 grows a full receive buffer by MG_IO_SIZE (ioalloc), allocating a new one and
 * copying what it holds each time: n bytes received whole cost about n^2 / 32 KiB bytes of
 * copying and zeroing. One 15 MiB WebSocket message took 3-9 s of CPU, a raw TCP or MQTT
 * connection the same (issue 33; cymongoose's HTTP guard already grew request bodies itself,
 * http_guard.pxi _grow_recv). Ours doubles it instead, up to the most the connection may hold
 * as cymongoose says (cym_recv_cap_hook: max_body_size for a WebSocket message,
 * Manager.max_recv_size for raw TCP/UDP and MQTT; 0: no cap), and always by at least
 * MG_IO_SIZE, so the check that closes a connection over its limit still sees the excess.
 * Test: tests/protocols/test_receive_growth.py (server CPU for one 15 MiB message).
 */

// @hunk definitions
size_t (*cym_recv_cap_hook)(struct mg_connection *c) = NULL;  /* cymongoose build fix */
static size_t cym_recv_grow(struct mg_connection *c, struct mg_iobuf *io) {
  size_t want = io->size < MG_IO_SIZE ? MG_IO_SIZE : io->size * 2, cap;
  if (io == &c->recv && cym_recv_cap_hook != NULL && want > io->size + MG_IO_SIZE &&
      (cap = cym_recv_cap_hook(c)) > 0 && want > cap)
    want = cap;
  return want < io->size + MG_IO_SIZE ? io->size + MG_IO_SIZE : want;
}

// @hunk grow
             !mg_iobuf_resize(io, cym_recv_grow(c, io))) {  /* cymongoose build fix */
