/* HTTP/2 (issue 36): a stream's request, written into its connection's c->recv as the
 * HTTP/1.1 request the guard and the handlers already read. nghttp2 has checked the fields
 * (RFC 9113 section 8.2: lower-case names, no connection-specific fields, pseudo-fields
 * first and well formed); the guard checks the rest as it does for HTTP/1.1.
 *
 * The request line says HTTP/2.0, which the guard takes only on a stream connection; it is
 * what handlers, WSGI's SERVER_PROTOCOL, ASGI's http_version and the access log show. A
 * body of unknown length (no content-length, no END_STREAM on the HEADERS) is framed chunked,
 * so the guard's body rules (max_body_size, the progress clock) hold as they do for HTTP/1.1.
 */
#ifndef CYM_H2_REQUEST_H
#define CYM_H2_REQUEST_H

#include <stdio.h>
#include "h2_types.h"

/* RFC 9113 section 6.5.2: a field's size is its name, its value and 32 bytes. */
#define CYM_H2_FIELD_OVERHEAD 32

/* Append, growing the buffer geometrically (mg_iobuf_add resizes to the exact length on
 * every call: a 16 MiB body arriving in 16 KiB frames would be copied a thousand times). */
static int h2_grow(struct mg_iobuf *io, size_t n) {
  size_t want = io->size >= 1024 ? io->size * 2 : 1024;
  while (want < io->len + n) want *= 2;
  return mg_iobuf_resize(io, want) ? 0 : -1;
}

static inline int h2_add(struct mg_iobuf *io, const void *p, size_t n) {
  if (n == 0) return 0;
  if (io->len + n > io->size && h2_grow(io, n)) return -1;
  memcpy(io->buf + io->len, p, n);
  io->len += n;
  return 0;
}

static int h2_adds(struct mg_iobuf *io, const char *s) { return h2_add(io, s, strlen(s)); }

/* The pseudo-fields wait in st->pseudo as [tag][4-byte length][value] until the request line
 * can be written (all of them come before any other field). */
static int h2_pseudo_put(struct cym_h2_stream *st, char tag, const uint8_t *v, size_t n) {
  uint32_t len = (uint32_t) n;
  if (h2_add(&st->pseudo, &tag, 1) || h2_add(&st->pseudo, &len, 4)) return -1;
  return h2_add(&st->pseudo, v, n);
}

static const uint8_t *h2_pseudo_get(const struct cym_h2_stream *st, char tag, size_t *n) {
  size_t i = 0;
  while (i + 5 <= st->pseudo.len) {
    uint32_t len;
    memcpy(&len, st->pseudo.buf + i + 1, 4);
    if ((char) st->pseudo.buf[i] == tag) {
      *n = len;
      return st->pseudo.buf + i + 5;
    }
    i += 5 + len;
  }
  *n = 0;
  return NULL;
}

static int h2_write_request_line(struct cym_h2_stream *st) {
  struct mg_iobuf *r = &st->c->recv;
  size_t mn, pn, an;
  const uint8_t *m = h2_pseudo_get(st, 'm', &mn), *p = h2_pseudo_get(st, 'p', &pn);
  const uint8_t *a = h2_pseudo_get(st, 'a', &an);
  st->line_done = 1;
  if (m == NULL) return -1; /* nghttp2 requires :method; never reached */
  if (p == NULL) p = a, pn = an; /* CONNECT: the target is the authority */
  if (p == NULL) return -1;
  st->head_request = mn == 4 && memcmp(m, "HEAD", 4) == 0;
  if (h2_add(r, m, mn) || h2_add(r, " ", 1) || h2_add(r, p, pn) ||
      h2_adds(r, " HTTP/2.0\r\n"))
    return -1;
  if (a != NULL) { /* RFC 9113 section 8.3.1: :authority stands for Host */
    if (h2_adds(r, "Host: ") || h2_add(r, a, an) || h2_adds(r, "\r\n")) return -1;
  }
  st->pseudo.len = 0; /* its memory stays for the stream's next use (h2_session.h) */
  return 0;
}

/* One field of the request head. 0, or -1 when out of memory. */
static int h2_req_field(struct cym_h2_stream *st, const uint8_t *name, size_t nlen,
                        const uint8_t *value, size_t vlen, size_t limit) {
  struct mg_iobuf *r = &st->c->recv;
  st->head_size += nlen + vlen + CYM_H2_FIELD_OVERHEAD;
  if (st->head_size > limit) st->too_big = 1;
  if (st->too_big) return 0; /* answered 431 at the end of the head: nothing more kept */
  if (nlen > 0 && name[0] == ':') {
    char tag = nlen == 7 && memcmp(name, ":method", 7) == 0      ? 'm'
               : nlen == 5 && memcmp(name, ":path", 5) == 0        ? 'p'
               : nlen == 10 && memcmp(name, ":authority", 10) == 0 ? 'a'
                                                                   : 0;
    return tag ? h2_pseudo_put(st, tag, value, vlen) : 0; /* :scheme: the connection's */
  }
  if (!st->line_done && h2_write_request_line(st)) return -1;
  if (nlen == 6 && memcmp(name, "cookie", 6) == 0) {
    if (st->cookie.len && h2_adds(&st->cookie, "; ")) return -1;
    return h2_add(&st->cookie, value, vlen);
  }
  if (nlen == 4 && memcmp(name, "host", 4) == 0) {
    size_t an;
    if (h2_pseudo_get(st, 'a', &an) != NULL || st->has_host) return 0;
    st->has_host = 1;
  }
  if (nlen == 14 && memcmp(name, "content-length", 14) == 0) st->has_length = 1;
  if (h2_add(r, name, nlen) || h2_adds(r, ": ") || h2_add(r, value, vlen) ||
      h2_adds(r, "\r\n"))
    return -1;
  return 0;
}

/* The head is complete (END_HEADERS); end_stream: no body follows. */
static int h2_req_head_end(struct cym_h2_stream *st, int end_stream) {
  struct mg_iobuf *r = &st->c->recv;
  if (!st->line_done && h2_write_request_line(st)) return -1;
  if (st->cookie.len) {
    if (h2_adds(r, "Cookie: ") || h2_add(r, st->cookie.buf, st->cookie.len) ||
        h2_adds(r, "\r\n"))
      return -1;
    st->cookie.len = 0;
  }
  if (!end_stream && !st->has_length) {
    st->chunked_req = 1;
    if (h2_adds(r, "Transfer-Encoding: chunked\r\n")) return -1;
  }
  if (h2_adds(r, "\r\n")) return -1;
  st->head_done = 1;
  st->req_ended = end_stream ? 1 : 0;
  st->recv_added += r->len;
  return 0;
}

static int h2_req_data(struct cym_h2_stream *st, const uint8_t *data, size_t len) {
  struct mg_iobuf *r = &st->c->recv;
  size_t before = r->len;
  if (st->chunked_req) {
    char size[24];
    int n = snprintf(size, sizeof(size), "%zx\r\n", len);
    if (len == 0) return 0;
    if (h2_add(r, size, (size_t) n) || h2_add(r, data, len) || h2_adds(r, "\r\n")) return -1;
  } else if (h2_add(r, data, len)) {
    return -1;
  }
  st->recv_added += r->len - before;
  return 0;
}

/* END_STREAM after a body (DATA, or trailers, which are not passed on). */
static int h2_req_end(struct cym_h2_stream *st) {
  if (st->req_ended) return 0;
  st->req_ended = 1;
  if (st->chunked_req && st->head_done) {
    if (h2_adds(&st->c->recv, "0\r\n\r\n")) return -1;
    st->recv_added += 5;
  }
  return 0;
}

#endif
