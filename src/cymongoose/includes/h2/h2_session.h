/* HTTP/2 (issue 36): one nghttp2 session per connection, driven from the connection's
 * protocol handler (cym_h2_handler) with no Python call per frame: bytes read go through
 * nghttp2_session_mem_recv(), frames leave through nghttp2_session_mem_send() into c->send,
 * which Mongoose writes. Each request stream gets a stream connection (h2_types.h) whose
 * events the session delivers: MG_EV_OPEN, then MG_EV_READ as its request arrives,
 * MG_EV_POLL on every poll of the connection, MG_EV_WRITE as its output leaves, and
 * MG_EV_CLOSE when the stream ends (or is reset, or the connection closes).
 *
 * Request bodies take window only as the handlers take them (NO_AUTO_WINDOW_UPDATE): a
 * stream's window is given back while its connection is not paused (c->is_full, set by the
 * guard while a streamed body waits unread) and the streams' buffers together stay under
 * their budget. */
#ifndef CYM_H2_SESSION_H
#define CYM_H2_SESSION_H

#include "h2_floods.h"
#include "h2_request.h"
#include "h2_response.h"

/* Bytes the streams of one connection may hold unread in all before their windows stay
 * shut (a client may open 100 streams: each holding a whole buffered body is 100 times the
 * HTTP/1.1 bound). */
#define CYM_H2_BUFFER_BUDGET(s) ((size_t) (s)->lim.max_buffered)

#define CYM_H2_STREAM_ALIGN 1024

static struct cym_h2_stream *h2_stream_of(struct cym_h2_session *s, int32_t id) {
  struct cym_h2_stream *st = s->in_head;
  /* Most frames are the latest stream's: no map lookup for them. */
  if (st != NULL && st->id == id && !st->closed) return st;
  return (struct cym_h2_stream *) nghttp2_session_get_stream_user_data(s->ng, id);
}

/* Ended streams a session keeps for its next requests, with their stream connections and
 * buffers: requests on one connection come one after another (or a few at once), and
 * allocating, zeroing and wiping a stream connection and its buffers was a sixth of
 * what a small request cost. Buffers stay with the connection they served, so no client's
 * bytes reach another's. Under AddressSanitizer none is kept: a stream connection used
 * after its MG_EV_CLOSE must stay a use-after-free it can report. */
#if defined(__SANITIZE_ADDRESS__)
#define CYM_H2_SPARE_STREAMS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CYM_H2_SPARE_STREAMS 0
#endif
#endif
#ifndef CYM_H2_SPARE_STREAMS
#define CYM_H2_SPARE_STREAMS 8
#endif
/* A buffer that grew past this (a large body) is freed rather than kept. */
#define CYM_H2_SPARE_BUFFER (16 * 1024)

/* The stream connection of a new stream: a spare one's memory (c, with its buffers), or
 * new. Either way as mg_alloc_conn() makes one, with a new id. */
static struct mg_connection *h2_stream_conn(struct cym_h2_session *s, struct mg_connection *c) {
  struct mg_connection *p = s->c;
  if (c == NULL) {
    c = mg_alloc_conn(p->mgr);
    if (c == NULL) return NULL;
    /* Its buffers are sized by what it holds, not MG_IO_SIZE (16 KiB allocated, zeroed and
     * wiped per request for a 27-byte answer). */
    c->recv.align = c->send.align = CYM_H2_STREAM_ALIGN;
  } else {
    struct mg_iobuf recv = c->recv, send = c->send;
    memset(c, 0, sizeof(*c) + p->mgr->extraconnsize);
    c->mgr = p->mgr;
    c->rtls.align = MG_IO_SIZE;
    c->id = ++p->mgr->nextid;
    c->recv = recv;
    c->send = send;
  }
  c->fd = (void *) (size_t) -1; /* MG_INVALID_SOCKET: it has no socket of its own */
  c->loc = p->loc;
  c->rem = p->rem;
  c->is_accepted = 1;
  c->fn = p->fn;
  c->fn_data = p->fn_data; /* the core gives it its own object at MG_EV_OPEN */
  c->pfn = s->lim.stream_pfn;
  c->pfn_data = NULL;
  return c;
}

static struct cym_h2_stream *h2_stream_new(struct cym_h2_session *s) {
  struct cym_h2_stream *st = s->spare;
  if (st != NULL) {
    struct mg_connection *c = st->c;
    struct mg_iobuf pseudo = st->pseudo, cookie = st->cookie, head = st->head;
    s->spare = st->next;
    s->nspare--;
    memset(st, 0, sizeof(*st));
    st->pseudo = pseudo;
    st->cookie = cookie;
    st->head = head;
    st->c = h2_stream_conn(s, c);
    return st;
  }
  st = (struct cym_h2_stream *) calloc(1, sizeof(*st));
  if (st == NULL) return NULL;
  st->c = h2_stream_conn(s, NULL);
  if (st->c == NULL) {
    free(st);
    return NULL;
  }
  return st;
}

static void h2_iobuf_keep(struct mg_iobuf *io) {
  if (io->size > CYM_H2_SPARE_BUFFER) mg_iobuf_free(io);
  io->len = 0;
}

static int h2_on_begin_headers(nghttp2_session *ng, const nghttp2_frame *frame, void *ud) {
  struct cym_h2_session *s = (struct cym_h2_session *) ud;
  struct cym_h2_stream *st;
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
    return 0;
  st = h2_stream_new(s);
  if (st == NULL) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  st->s = s;
  st->id = frame->hd.stream_id;
  st->next = s->streams;
  s->streams = st;
  s->nstreams++;
  s->idle_since_ms = 0;
  nghttp2_session_set_stream_user_data(ng, st->id, st);
  s->in_head = st;
  return 0;
}

static int h2_on_header(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name,
                        size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                        void *ud) {
  struct cym_h2_session *s = (struct cym_h2_session *) ud;
  struct cym_h2_stream *st = h2_stream_of(s, frame->hd.stream_id);
  (void) ng, (void) flags;
  if (st == NULL || st->head_done) return 0; /* trailers: not passed on */
  if (h2_req_field(st, name, namelen, value, valuelen, s->lim.max_header_list))
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  return 0;
}

/* The head went past max_header_list: answered here, the way the guard answers an HTTP/1.1
 * head past max_header_size, and no handler sees it. */
static void h2_refuse_head(struct cym_h2_stream *st) {
  static const char answer[] =
      "HTTP/1.1 431 Request Header Fields Too Large\r\n"
      "Content-Type: text/plain; charset=utf-8\r\nContent-Length: 32\r\n\r\n"
      "Request Header Fields Too Large\n";
  st->head_done = 1;
  st->c->recv.len = 0;
  mg_iobuf_add(&st->c->send, 0, answer, sizeof(answer) - 1);
}

static int h2_on_frame_recv(nghttp2_session *ng, const nghttp2_frame *frame, void *ud) {
  struct cym_h2_session *s = (struct cym_h2_session *) ud;
  struct cym_h2_stream *st;
  int end = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  (void) ng;
  h2_flood_check(s, frame);
  if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
  st = h2_stream_of(s, frame->hd.stream_id);
  if (st == NULL) return 0;
  if (frame->hd.type == NGHTTP2_HEADERS && !st->head_done) {
    if (st->too_big) {
      h2_refuse_head(st);
      return 0;
    }
    return h2_req_head_end(st, end) ? NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE : 0;
  }
  if (end && !st->too_big && h2_req_end(st)) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  if (end) st->req_ended = 1;
  return 0;
}

static int h2_on_data(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                      size_t len, void *ud) {
  struct cym_h2_session *s = (struct cym_h2_session *) ud;
  struct cym_h2_stream *st = h2_stream_of(s, id);
  (void) flags;
  if (st == NULL || st->too_big || st->rst_sent || st->c->is_closing) {
    nghttp2_session_consume(ng, id, len); /* dropped: its window comes back at once */
    return 0;
  }
  if (h2_req_data(st, data, len)) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  st->unconsumed += len;
  return 0;
}

static int h2_on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *ud) {
  struct cym_h2_session *s = (struct cym_h2_session *) ud;
  struct cym_h2_stream *st = h2_stream_of(s, id);
  (void) ng, (void) code;
  if (st != NULL) st->closed = 1; /* freed by the pump, outside nghttp2's calls */
  return 0;
}

static int h2_on_frame_send(nghttp2_session *ng, const nghttp2_frame *frame, void *ud) {
  struct cym_h2_session *s = (struct cym_h2_session *) ud;
  struct cym_h2_stream *st;
  if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM) ||
      (frame->hd.type != NGHTTP2_DATA && frame->hd.type != NGHTTP2_HEADERS))
    return 0;
  st = h2_stream_of(s, frame->hd.stream_id);
  /* RFC 9113 section 8.1: a response sent whole before the request ended may be followed
   * by RST_STREAM with NO_ERROR, so the client stops sending the rest. */
  if (st != NULL && !st->req_ended && !st->rst_sent) {
    st->rst_sent = 1;
    nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_NO_ERROR);
  }
  return 0;
}

static void h2_stream_release(struct cym_h2_stream *st) {
  struct mg_connection *c = st->c;
  mg_iobuf_free(&c->recv);
  mg_iobuf_free(&c->send);
  mg_iobuf_free(&st->pseudo);
  mg_iobuf_free(&st->cookie);
  mg_iobuf_free(&st->head);
  memset(c, 0, sizeof(*c));
  mg_free(c);
  free(st);
}

/* A stream is over: its handler hears MG_EV_CLOSE (if it heard MG_EV_OPEN); with `tell`
 * (the session goes on) it may be kept as a spare. */
static void h2_stream_free(struct cym_h2_session *s, struct cym_h2_stream *st, int tell) {
  struct cym_h2_stream **link = &s->streams;
  struct mg_connection *c = st->c;
  if (s->in_head == st) s->in_head = NULL;
  while (*link != st) link = &(*link)->next;
  *link = st->next;
  if (--s->nstreams == 0) s->idle_since_ms = mg_millis();
  if (st->opened && tell) {
    uint64_t now = mg_millis();
    /* The guard counts the request's end on a poll; the handler needs no poll for it. */
    if (c->pfn != NULL) c->pfn(c, MG_EV_POLL, &now);
    mg_call(c, MG_EV_CLOSE, NULL);
  } else if (st->opened) {
    mg_call(c, MG_EV_CLOSE, NULL);
  }
  if (tell && s->nspare < CYM_H2_SPARE_STREAMS) {
    h2_iobuf_keep(&c->recv);
    h2_iobuf_keep(&c->send);
    h2_iobuf_keep(&st->pseudo);
    h2_iobuf_keep(&st->cookie);
    h2_iobuf_keep(&st->head);
    st->next = s->spare;
    s->spare = st;
    s->nspare++;
    return;
  }
  h2_stream_release(st);
}

/* Frames out, into the connection's c->send, while it is under CYM_H2_SEND_HIGH. Then each
 * stream's output the data sources took is cut from its c->send. */
static void h2_flush(struct cym_h2_session *s) {
  struct mg_connection *c = s->c;
  while (!s->dead && c->send.len < CYM_H2_SEND_HIGH) {
    const uint8_t *data = NULL;
    ssize_t n = nghttp2_session_mem_send(s->ng, &data);
    if (n < 0) {
      s->dead = 1;
      break;
    }
    if (n == 0) break;
    if (h2_add(&c->send, data, (size_t) n)) s->dead = 1;
  }
}

/* What the data source took leaves the front of c->send: all of it at once when that is
 * everything (the usual case, no copy), else once it is at least CYM_H2_CUT_MIN and no
 * less than what remains, so each byte is moved a bounded number of times. Cutting after
 * every flush moved the rest of a 64 MiB reply() forward once per 256 KiB sent. */
#define CYM_H2_CUT_MIN (64 * 1024)
static void h2_send_cut(struct cym_h2_stream *st) {
  struct mg_iobuf *io = &st->c->send;
  if (st->send_off >= io->len) {
    io->len = 0;
  } else if (st->send_off >= CYM_H2_CUT_MIN && st->send_off >= io->len - st->send_off) {
    mg_iobuf_del(io, 0, st->send_off);
  } else {
    return;
  }
  st->send_off = 0;
}

/* Deliver what is due to the streams, give windows back, submit their output, send. */
static void h2_pump(struct cym_h2_session *s) {
  struct cym_h2_stream *st, *next;
  int round;
  size_t buffered = 0;
  if (s->in_pump || s->ng == NULL) return;
  s->in_pump = 1;
  for (round = 0; round < 64; round++) {
    int busy = 0;
    for (st = s->streams; st != NULL; st = st->next) {
      struct mg_connection *c = st->c;
      if (st->closed) continue;
      if (st->head_done && !st->opened && !st->too_big && !st->rst_sent) {
        st->opened = 1;
        mg_call(c, MG_EV_OPEN, NULL);
      }
      if (st->opened && st->recv_added && !c->is_closing) {
        long n = (long) st->recv_added;
        st->recv_added = 0;
        mg_call(c, MG_EV_READ, &n);
        busy = 1;
      }
      h2_resp_advance(st);
      if ((c->is_closing || (c->is_draining && h2_unsent(st) == 0)) && !st->rst_sent &&
          st->resp_state != CYM_H2_RS_DONE && st->resp_state != CYM_H2_RS_NONE &&
          st->resp_state != CYM_H2_RS_CLOSE)
        /* Ended with its response unfinished (or unbegun): over HTTP/1.1 the connection
         * would close; here only the stream goes. */
        h2_reset(st, NGHTTP2_INTERNAL_ERROR);
    }
    buffered = 0;
    for (st = s->streams; st != NULL; st = st->next) buffered += st->c->recv.len;
    for (st = s->streams; st != NULL; st = st->next) {
      if (st->unconsumed && !st->closed && !st->c->is_full &&
          buffered < CYM_H2_BUFFER_BUDGET(s)) {
        nghttp2_session_consume(s->ng, st->id, st->unconsumed);
        st->unconsumed = 0;
      }
    }
    h2_flush(s);
    for (st = s->streams; st != NULL; st = st->next) {
      if (st->send_off > st->send_told) {
        long n = (long) (st->send_off - st->send_told);
        h2_send_cut(st);
        st->send_told = st->send_off;
        if (st->opened && !st->closed && st->resp_state != CYM_H2_RS_DONE) {
          mg_call(st->c, MG_EV_WRITE, &n); /* refills: the file sender, the servers */
          busy = 1;
        }
      }
    }
    if (!busy) break;
  }
  for (st = s->streams; st != NULL; st = next) {
    next = st->next;
    if (st->closed) h2_stream_free(s, st, 1);
  }
  if (s->shutting && s->nstreams == 0) s->dead = 1; /* the stop's last stream is done */
  if (!s->dead && nghttp2_session_want_read(s->ng) == 0 &&
      nghttp2_session_want_write(s->ng) == 0)
    s->dead = 1; /* GOAWAY both ways, or a fatal error: nothing more can happen */
  if (s->dead) s->c->is_draining = 1;
  s->in_pump = 0;
}

static void h2_session_free(struct cym_h2_session *s) {
  struct cym_h2_session **link = (struct cym_h2_session **) s->registry;
  while (link != NULL && *link != NULL && *link != s) link = &(*link)->next_session;
  if (link != NULL && *link == s) *link = s->next_session;
  if (s->ng != NULL) nghttp2_session_del(s->ng); /* first: its calls may still see streams */
  s->ng = NULL;
  while (s->streams != NULL) h2_stream_free(s, s->streams, 0);
  while (s->spare != NULL) {
    struct cym_h2_stream *st = s->spare;
    s->spare = st->next;
    h2_stream_release(st);
  }
  free(s);
}

static void h2_check_clock(struct cym_h2_session *s, uint64_t now) {
  struct mg_connection *c = s->c;
  if (c->send.len == 0 || s->lim.send_timeout_ms == 0) {
    s->send_since_ms = 0;
  } else if (s->send_since_ms == 0) {
    s->send_since_ms = now;
  } else if (now - s->send_since_ms >= s->lim.send_timeout_ms) {
    c->is_closing = 1; /* the client does not read: what is queued for it goes */
    return;
  }
  if (s->nstreams == 0 && s->lim.idle_timeout_ms && s->idle_since_ms &&
      now - s->idle_since_ms >= s->lim.idle_timeout_ms && !s->dead) {
    nghttp2_session_terminate_session(s->ng, NGHTTP2_NO_ERROR); /* GOAWAY, then close */
    s->idle_since_ms = 0;
  }
}

/* The protocol handler of a connection that speaks HTTP/2. */
static void cym_h2_handler(struct mg_connection *c, int ev, void *ev_data) {
  struct cym_h2_session *s = (struct cym_h2_session *) c->pfn_data;
  struct cym_h2_stream *st;
  if (s == NULL) return;
  if (ev == MG_EV_CLOSE) {
    c->pfn_data = NULL;
    h2_session_free(s);
    return;
  }
  if (ev == MG_EV_READ && c->recv.len > 0) {
    ssize_t n = s->dead ? (ssize_t) c->recv.len
                        : nghttp2_session_mem_recv(s->ng, c->recv.buf, c->recv.len);
    if (n < 0) { /* a bad preface, a flood: GOAWAY, then close */
      nghttp2_session_terminate_session(s->ng, h2_flood_error((int) n, s)
                                                   ? NGHTTP2_ENHANCE_YOUR_CALM
                                                   : NGHTTP2_PROTOCOL_ERROR);
      s->dead = 0;
      h2_flush(s);
      s->dead = 1;
      c->recv.len = 0;
    } else {
      mg_iobuf_del(&c->recv, 0, (size_t) n);
    }
  } else if (ev == MG_EV_WRITE) {
    s->send_since_ms = 0;
  } else if (ev == MG_EV_POLL) {
    uint64_t now = *(uint64_t *) ev_data;
    h2_check_clock(s, now);
    for (st = s->streams; st != NULL; st = st->next)
      if (st->opened && !st->closed) mg_call(st->c, MG_EV_POLL, ev_data);
  } else {
    return;
  }
  h2_pump(s);
}

#endif
