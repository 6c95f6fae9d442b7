/* HTTP_PARSE_HOOK (perf, upstream: cymongoose-only), vendor/mongoose/inventory.py.
 *
 * http_cb parses every request head again with mg_http_parse() after cymongoose's guard has
 * parsed and validated it: UTF-8 aware character by character, a 4 KiB memset of the
 * message, five case-insensitive compares per header; about 2,300 instructions of a hello
 * request (docs/performance.md). cymongoose fills the message itself for a head its guard
 * validated (cym_http_parse_hook, http_split.pxi), returning what mg_http_parse() would;
 * anything else (a client's response, a head with bytes above 0x7F, duplicate fields
 * Mongoose refuses) still goes through mg_http_parse().
 */

// @hunk definitions
int (*cym_http_parse_hook)(struct mg_connection *c, const char *s, size_t len,
                           struct mg_http_message *hm) = NULL;  /* cymongoose build fix */

// @hunk parse
      int n = cym_http_parse_hook != NULL && ofs == 0  /* cymongoose build fix */
                  ? cym_http_parse_hook(c, buf, c->recv.len, &hm)
                  : mg_http_parse(buf, c->recv.len - ofs, &hm);
