/* INTERNALS (integration, upstream: cymongoose-only), vendor/mongoose/inventory.py.
 *
 * The Mongoose internals cymongoose reaches, exported by name at the end of the file and
 * checked at compile time (vendor/mongoose/cym_fixes.h declares them): the static protocol
 * handlers it runs behind its own (http_cb, static_cb, mg_ws_cb, mqtt_cb, sntp_cb, dns_cb)
 * and the two private c->data layouts it reads (static_cb's bytes still to send, sntp_cb's
 * expiry). A Mongoose update that renames or retypes a handler fails to compile; one that
 * moves a layout stops build_fixes.py: the lines of mongoose.c that define those layouts are
 * this fix's `checks` in inventory.py and must occur exactly once.
 */

// @hunk exports
/* cymongoose build fix: Mongoose internals cymongoose uses, exported and checked. */
#define CYM_HANDLER(fn)                                                         \
  _Static_assert(__builtin_types_compatible_p(__typeof__(&fn), mg_event_handler_t), \
                 #fn " is no longer an mg_event_handler_t");                    \
  const mg_event_handler_t cym_##fn = fn;
CYM_HANDLER(http_cb)
CYM_HANDLER(static_cb)
CYM_HANDLER(mg_ws_cb)
CYM_HANDLER(mqtt_cb)
CYM_HANDLER(sntp_cb)
CYM_HANDLER(dns_cb)
/* static_cb: the file bytes still to send, in the last aligned size_t of c->data. */
_Static_assert(sizeof(((struct mg_connection *) 0)->data) >= sizeof(size_t),
               "c->data cannot hold static_cb's length");
size_t *cym_static_left(struct mg_connection *c) {
  return (size_t *) &c->data[(sizeof(c->data) - sizeof(size_t)) / sizeof(size_t) *
                             sizeof(size_t)];
}
/* sntp_cb: a uint64_t expiry at the start of c->data; cymongoose keeps a flag after it. */
_Static_assert(sizeof(((struct mg_connection *) 0)->data) > sizeof(uint64_t),
               "c->data has no byte free after sntp_cb's expiry");
char *cym_sntp_flag(struct mg_connection *c) {
  return &c->data[sizeof(uint64_t)];
}
