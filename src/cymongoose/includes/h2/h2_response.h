/* HTTP/2 (issue 36): a stream's response, read from its connection's c->send, where the
 * handlers wrote an HTTP/1.1 response, and turned into HEADERS and DATA frames.
 *
 * The head becomes one nghttp2_submit_response(): names lower-cased, the fields HTTP/2
 * forbids (RFC 9113 section 8.2.2: Connection and what it names, Keep-Alive,
 * Proxy-Connection, Transfer-Encoding, Upgrade) left out; interim 1xx heads become
 * non-final HEADERS. The body is read straight out of c->send by the stream's data source
 * as nghttp2 writes DATA frames, chunked framing decoded on the way, so c->send drains only
 * as fast as the client's window opens: the handlers' back-pressure (they wait while
 * c->send is full) holds on a stream as on a socket. */
#ifndef CYM_H2_RESPONSE_H
#define CYM_H2_RESPONSE_H

#include <stdlib.h>
#include "h2_types.h"

#ifndef CYM_H2_BODY_BUFFER
#define CYM_H2_BODY_BUFFER (64 * 1024)
#endif

/* A response head longer than this is not one (the handlers write far less). */
#define CYM_H2_MAX_RESPONSE_HEAD (1024 * 1024)

static int h2_ieq(const uint8_t *p, size_t n, const char *word) {
  size_t i, wn = strlen(word);
  if (n != wn) return 0;
  for (i = 0; i < n; i++) {
    uint8_t ch = p[i];
    if (ch >= 'A' && ch <= 'Z') ch = (uint8_t) (ch + 32);
    if (ch != (uint8_t) word[i]) return 0;
  }
  return 1;
}

/* Where the head in b[:n] ends (after its CRLF CRLF), or 0 when it is not whole yet;
 * *lines: the line feeds before that end (a bound on the fields). */
static size_t h2_head_end_lines(const uint8_t *b, size_t n, size_t *lines) {
  const uint8_t *p = b, *end = b + n;
  size_t k = 0;
  while ((p = (const uint8_t *) memchr(p, '\n', (size_t) (end - p))) != NULL) {
    k++;
    p++;
    if (end - p >= 2 && p - b >= 2 && p[-2] == '\r' && p[0] == '\r' && p[1] == '\n') {
      *lines = k + 1;
      return (size_t) (p + 2 - b);
    }
  }
  *lines = k;
  return 0;
}

static size_t h2_head_end(const uint8_t *b, size_t n) {
  size_t lines;
  return h2_head_end_lines(b, n, &lines);
}

/* RFC 9113 section 8.2.2's connection-specific fields, by length first (most fields are
 * none of them). */
static int h2_hop_by_hop(const uint8_t *name, size_t n) {
  switch (n) {
    case 7: return h2_ieq(name, n, "upgrade");
    case 10: return h2_ieq(name, n, "connection") || h2_ieq(name, n, "keep-alive");
    case 16: return h2_ieq(name, n, "proxy-connection");
    case 17: return h2_ieq(name, n, "transfer-encoding");
    default: return 0;
  }
}

/* Reset the stream (the handler's output cannot be framed, or it ended it early). */
static void h2_reset(struct cym_h2_stream *st, uint32_t code) {
  if (st->rst_sent || st->closed) return;
  st->rst_sent = 1;
  st->resp_state = CYM_H2_RS_DONE;
  nghttp2_submit_rst_stream(st->s->ng, NGHTTP2_FLAG_NONE, st->id, code);
}

static ssize_t h2_body_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
                            uint32_t *flags, nghttp2_data_source *source, void *user_data);

/* Field lines b[:n] ("Name: value\r\n", up to the empty line) as nghttp2 name-value pairs,
 * names lower-cased in place, connection-specific fields left out (*chunked set when one
 * was Transfer-Encoding), *length_at the index of the last Content-Length (-1: none). How
 * many, or -1. */
static long h2_fields(uint8_t *b, size_t n, nghttp2_nv *nva, size_t cap, int *chunked,
                      long *length_at, uint8_t nv_flags) {
  size_t i = 0, k = 0;
  while (i + 2 <= n) {
    size_t s = i, e, colon, vs, ve, j;
    const uint8_t *lf = (const uint8_t *) memchr(b + i, '\n', n - i), *sep;
    if (lf == NULL) break;
    i = (size_t) (lf - b);
    e = i > s && b[i - 1] == '\r' ? i - 1 : i;
    i++;
    if (e == s) break; /* the empty line */
    sep = (const uint8_t *) memchr(b + s, ':', e - s);
    colon = sep != NULL ? (size_t) (sep - b) : e;
    if (colon == e || colon == s) continue; /* not a field: dropped */
    if (h2_hop_by_hop(b + s, colon - s)) {
      if (colon - s == 17) *chunked = 1; /* transfer-encoding */
      continue;
    }
    for (vs = colon + 1; vs < e && (b[vs] == ' ' || b[vs] == '\t'); vs++) {
    }
    for (ve = e; ve > vs && (b[ve - 1] == ' ' || b[ve - 1] == '\t'); ve--) {
    }
    for (j = s; j < colon; j++)
      if (b[j] >= 'A' && b[j] <= 'Z') b[j] = (uint8_t) (b[j] + 32);
    if (k == cap) return -1;
    if (colon - s == 14 && memcmp(b + s, "content-length", 14) == 0) *length_at = (long) k;
    nva[k].name = b + s;
    nva[k].namelen = colon - s;
    nva[k].value = b + vs;
    nva[k].valuelen = ve - vs;
    nva[k].flags = nv_flags;
    k++;
  }
  return (long) k;
}

/* 0: submitted, 1: no fields (the stream ends as usual), -1: failed. */
static int h2_submit_trailers(struct cym_h2_stream *st, uint8_t *b, size_t n) {
  size_t i, lines = 0;
  int chunked = 0;
  long k, length_at = -1;
  nghttp2_nv *nva;
  int rv;
  for (i = 0; i < n; i++) lines += b[i] == '\n';
  nva = (nghttp2_nv *) calloc(lines + 1, sizeof(*nva));
  if (nva == NULL) return -1;
  k = h2_fields(b, n, nva, lines + 1, &chunked, &length_at, NGHTTP2_NV_FLAG_NONE);
  rv = k < 0 ? -1 : k == 0 ? 1 : nghttp2_submit_trailer(st->s->ng, st->id, nva, (size_t) k);
  free(nva);
  return rv;
}

/* Submit the head at the front of c->send. 1: submitted (or an interim one: call again),
 * 0: not whole yet, -1: not a response (the stream was reset). */
static int h2_resp_head(struct cym_h2_stream *st) {
  struct mg_connection *c = st->c;
  uint8_t *b = c->send.buf;
  size_t nfields, he = h2_head_end_lines(b, c->send.len, &nfields), i, k;
  int status, chunked = 0, has_length = 0;
  long fields, length_at = -1;
  uint64_t length = 0;
  /* Room for the fields of most heads, so most need no allocation. */
  nghttp2_nv local[24], *nva = local;
  nghttp2_data_provider body;
  uint8_t nv_flags = NGHTTP2_NV_FLAG_NONE;
  if (he == 0) {
    if (c->send.len > CYM_H2_MAX_RESPONSE_HEAD) return h2_reset(st, NGHTTP2_INTERNAL_ERROR), -1;
    return 0;
  }
  if (he < 16 || memcmp(b, "HTTP/1.", 7) != 0 || b[8] != ' ' || b[9] < '1' || b[9] > '5' ||
      b[10] < '0' || b[10] > '9' || b[11] < '0' || b[11] > '9')
    return h2_reset(st, NGHTTP2_INTERNAL_ERROR), -1;
  status = (b[9] - '0') * 100 + (b[10] - '0') * 10 + (b[11] - '0');
  if (status == 101) return h2_reset(st, NGHTTP2_INTERNAL_ERROR), -1; /* no upgrade here */
  if (status >= 200) {
    /* The final head is kept in st->head, untouched until the stream is over, so its
     * HEADERS frame can point into it (NO_COPY): nghttp2 would otherwise copy and
     * lower-case every field again. An interim head may be followed by the final one
     * before either is sent: nghttp2 copies those. */
    st->head.len = 0;
    if (h2_add(&st->head, b, he)) return h2_reset(st, NGHTTP2_INTERNAL_ERROR), -1;
    b = st->head.buf;
    nv_flags = NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE;
  }
  if (nfields + 1 > sizeof(local) / sizeof(local[0])) {
    nva = (nghttp2_nv *) calloc(nfields + 1, sizeof(*nva));
    if (nva == NULL) return h2_reset(st, NGHTTP2_INTERNAL_ERROR), -1;
  }
  nva[0].name = (uint8_t *) ":status";
  nva[0].namelen = 7;
  nva[0].value = b + 9;
  nva[0].valuelen = 3;
  nva[0].flags = nv_flags;
  i = 0;
  while (b[i] != '\n') i++;
  fields = h2_fields(b + i + 1, he - i - 1, nva + 1, nfields, &chunked, &length_at, nv_flags);
  if (fields < 0) {
    if (nva != local) free(nva);
    return h2_reset(st, NGHTTP2_INTERNAL_ERROR), -1;
  }
  k = 1 + (size_t) fields;
  if (length_at >= 0) {
    const nghttp2_nv *f = &nva[1 + length_at];
    size_t j;
    has_length = 1;
    for (j = 0; j < f->valuelen && f->value[j] >= '0' && f->value[j] <= '9'; j++)
      length = length * 10 + f->value[j] - '0';
  }
  if (chunked && has_length) { /* RFC 9112 section 6.3: the chunking decides */
    size_t w = 1;
    for (i = 1; i < k; i++)
      if (!h2_ieq(nva[i].name, nva[i].namelen, "content-length")) nva[w++] = nva[i];
    k = w;
  }
  if (status < 200) {
    nghttp2_submit_headers(st->s->ng, NGHTTP2_FLAG_NONE, st->id, NULL, nva, k, NULL);
    if (nva != local) free(nva);
    mg_iobuf_del(&c->send, 0, he);
    return 1;
  }
  body.source.ptr = st;
  body.read_callback = h2_body_read;
  if (st->head_request || status == 204 || status == 304 || (!chunked && has_length && !length)) {
    st->resp_state = st->head_request || status == 204 || status == 304 ? CYM_H2_RS_NONE
                                                                        : CYM_H2_RS_DONE;
    nghttp2_submit_response(st->s->ng, st->id, nva, k, NULL);
  } else {
    st->resp_state = chunked ? CYM_H2_RS_CHUNKED : has_length ? CYM_H2_RS_LENGTH : CYM_H2_RS_CLOSE;
    st->chunk_state = CYM_H2_CK_SIZE;
    st->resp_left = chunked ? 0 : length;
    /* A large body: room for a large piece of it. Mongoose's file sender reads as much as
     * the buffer holds, so a 16 KiB buffer meant a read(2) per 16 KiB frame. */
    if (!chunked && length > CYM_H2_BODY_BUFFER && c->send.size < CYM_H2_BODY_BUFFER)
      mg_iobuf_resize(&c->send, CYM_H2_BODY_BUFFER);
    nghttp2_submit_response(st->s->ng, st->id, nva, k, &body);
  }
  st->resp_submitted = 1;
  if (nva != local) free(nva);
  mg_iobuf_del(&c->send, 0, he);
  return 1;
}

/* The stream's data source: the body bytes at c->send[send_off:], decoded. */
static ssize_t h2_body_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
                            uint32_t *flags, nghttp2_data_source *source, void *user_data) {
  struct cym_h2_stream *st = (struct cym_h2_stream *) source->ptr;
  struct mg_connection *c = st->c;
  size_t out = 0, avail, n, j;
  const uint8_t *b;
  (void) ng, (void) id, (void) user_data;
  if (st->resp_state == CYM_H2_RS_LENGTH || st->resp_state == CYM_H2_RS_CLOSE) {
    /* A body in one piece: its DATA frames are written by h2_send_data, straight from
     * c->send into the connection's buffer, not copied into nghttp2's first. */
    avail = c->send.len - st->send_off - st->pending;
    n = length < avail ? length : avail;
    if (st->resp_state == CYM_H2_RS_LENGTH && n > st->resp_left) n = (size_t) st->resp_left;
    if (n > 0) {
      *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
      st->pending += n;
      out = n;
    }
    if (st->resp_state == CYM_H2_RS_LENGTH) {
      st->resp_left -= n;
      if (st->resp_left == 0) goto eof;
    } else if (n == avail && (c->is_draining || c->is_closing)) {
      goto eof;
    }
  }
  while (st->resp_state == CYM_H2_RS_CHUNKED) {
    avail = c->send.len - st->send_off;
    b = c->send.buf + st->send_off;
    if (st->chunk_state == CYM_H2_CK_DATA) {
      n = length - out < avail ? length - out : avail;
      if (n > st->resp_left) n = (size_t) st->resp_left;
      if (n == 0) break;
      memcpy(buf + out, b, n);
      out += n, st->send_off += n, st->resp_left -= n;
      if (st->resp_left == 0) st->chunk_state = CYM_H2_CK_CRLF;
      continue;
    }
    if (st->chunk_state == CYM_H2_CK_CRLF) {
      if (avail < 2) break;
      if (b[0] != '\r' || b[1] != '\n') return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
      st->send_off += 2;
      st->chunk_state = CYM_H2_CK_SIZE;
      continue;
    }
    for (j = 0; j < avail && b[j] != '\n'; j++) {
    }
    if (j == avail) {
      if (avail > 4096) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
      break;
    }
    if (st->chunk_state == CYM_H2_CK_SIZE) {
      uint64_t size = 0;
      size_t d;
      for (d = 0; d < j; d++) {
        uint8_t ch = b[d];
        int v = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
        if (v < 0) break;
        if (size >> 60) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        size = size * 16 + (uint64_t) v;
      }
      if (d == 0) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
      st->send_off += j + 1;
      st->resp_left = size;
      st->chunk_state = size ? CYM_H2_CK_DATA : CYM_H2_CK_TRAILER;
      continue;
    }
    /* CK_TRAILER: the trailer section, whole, becomes a HEADERS frame that ends the
     * stream (the DATA frames then do not). */
    if (j == 0 || (j == 1 && b[0] == '\r')) {
      st->send_off += j + 1;
      goto eof;
    }
    {
      size_t end = h2_head_end(b, avail);
      int rv;
      if (end == 0) {
        if (avail > CYM_H2_MAX_RESPONSE_HEAD) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        break;
      }
      rv = h2_submit_trailers(st, c->send.buf + st->send_off, end);
      st->send_off += end;
      if (rv < 0) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
      if (rv == 0) *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
      goto eof;
    }
  }
  if (out == 0) {
    st->deferred = 1;
    return NGHTTP2_ERR_DEFERRED;
  }
  return (ssize_t) out;
eof:
  *flags |= NGHTTP2_DATA_FLAG_EOF;
  st->resp_state = CYM_H2_RS_DONE;
  return (ssize_t) out;
}

/* nghttp2 sends a DATA frame h2_body_read gave as NO_COPY: its head, then its bytes from
 * c->send, into the connection's send buffer. */
static int h2_send_data(nghttp2_session *ng, nghttp2_frame *frame, const uint8_t *framehd,
                        size_t length, nghttp2_data_source *source, void *user_data) {
  struct cym_h2_stream *st = (struct cym_h2_stream *) source->ptr;
  struct mg_iobuf *out = &((struct cym_h2_session *) user_data)->c->send;
  const struct mg_iobuf *in = &st->c->send;
  (void) ng, (void) frame;
  if (out->len >= CYM_H2_SEND_HIGH) return NGHTTP2_ERR_WOULDBLOCK; /* after a write */
  if (st->pending != length || in->len - st->send_off < length)
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* its bytes were dropped: reset */
  if (out->len + 9 + length > out->size && h2_grow(out, 9 + length))
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  memcpy(out->buf + out->len, framehd, 9);
  memcpy(out->buf + out->len + 9, in->buf + st->send_off, length);
  out->len += 9 + length;
  st->send_off += length;
  st->pending = 0;
  return 0;
}

/* Bytes the handlers wrote to c->send that no frame has taken yet. */
static inline size_t h2_unsent(const struct cym_h2_stream *st) {
  return st->c->send.len - st->send_off - st->pending;
}

/* After the handlers ran: submit a new head, resume a data source that waited for bytes,
 * drop what a body-less response was given. */
static void h2_resp_advance(struct cym_h2_stream *st) {
  struct mg_connection *c = st->c;
  if (st->closed || st->rst_sent) {
    c->send.len = st->send_off = st->send_told = st->pending = 0;
    return;
  }
  while (st->resp_state == CYM_H2_RS_HEAD && c->send.len > 0)
    if (h2_resp_head(st) <= 0) break;
  if (st->resp_state == CYM_H2_RS_NONE || st->resp_state == CYM_H2_RS_DONE) {
    /* a HEAD response's body, or bytes after the end: not sent (once the last frame has
     * taken its own) */
    if (st->pending == 0) c->send.len = st->send_off = st->send_told = 0;
  } else if (st->deferred && (h2_unsent(st) > 0 || c->is_draining || c->is_closing)) {
    st->deferred = 0;
    nghttp2_session_resume_data(st->s->ng, st->id);
  }
}

#endif
