/* HTTP/2 (issue 36): the engine is libnghttp2, a sans-I/O library the core drives in C.
 * Built without it (-DCYMONGOOSE_HTTP2=OFF), the calls below still exist and say so, so the
 * Cython side compiles the same either way. */
#ifndef CYM_H2_H
#define CYM_H2_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "mongoose.h"

#if defined(CYM_HAVE_NGHTTP2) && CYM_HAVE_NGHTTP2
#include <nghttp2/nghttp2.h>
#define CYM_H2_BUILT 1
/* The linked library's version ("1.52.0"): the one running, which may be newer than the
 * headers the module was compiled against. */
static inline const char *cym_h2_library_version(void) {
  nghttp2_info *info = nghttp2_version(0);
  return info != NULL ? info->version_str : NULL;
}
#include "h2/h2_session.h"

/* Turn c, an accepted connection whose first bytes are the preface (or that chose h2 by
 * ALPN), into an HTTP/2 connection: its protocol handler becomes cym_h2_handler, with the
 * session in c->pfn_data. The server's SETTINGS are queued. 0, or -1 (no memory). */
static int cym_h2_start(struct mg_connection *c, const struct cym_h2_limits *lim) {
  struct cym_h2_session *s = (struct cym_h2_session *) calloc(1, sizeof(*s));
  nghttp2_session_callbacks *cb = NULL;
  nghttp2_option *opt = NULL;
  nghttp2_settings_entry iv[3];
  int rv = -1;
  if (s == NULL) return -1;
  s->c = c;
  s->lim = *lim;
  s->registry = lim->registry;
  s->idle_since_ms = mg_millis();
  if (nghttp2_session_callbacks_new(&cb) != 0 || nghttp2_option_new(&opt) != 0) goto out;
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, h2_on_begin_headers);
  nghttp2_session_callbacks_set_on_begin_frame_callback(cb, h2_on_begin_frame);
  nghttp2_session_callbacks_set_on_header_callback(cb, h2_on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, h2_on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, h2_on_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, h2_on_stream_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, h2_on_frame_send);
  nghttp2_session_callbacks_set_send_data_callback(cb, h2_send_data);
  nghttp2_option_set_no_auto_window_update(opt, 1);
#ifdef CYM_NGHTTP2_RESET_LIMIT
  /* Twice the core's burst (h2_floods.h): the library's limit, refilled by whole seconds,
   * raced the core's and sometimes answered a rapid reset first, with INTERNAL_ERROR. It is
   * left in place as a backstop, never to trip before the core's. */
  nghttp2_option_set_stream_reset_rate_limit(opt, 2 * (uint64_t) CYM_H2_FLOOD_BURST,
                                             (uint64_t) CYM_H2_FLOOD_RATE);
#endif
  if (nghttp2_session_server_new2(&s->ng, cb, s, opt) != 0) goto out;
  iv[0].settings_id = NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS;
  iv[0].value = lim->max_streams;
  iv[1].settings_id = NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE;
  iv[1].value = lim->stream_window;
  iv[2].settings_id = NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE;
  iv[2].value = lim->max_header_list;
  if (nghttp2_submit_settings(s->ng, NGHTTP2_FLAG_NONE, iv, 3) != 0) goto out;
  /* The connection's window: the streams' budget, not the 64 KiB default. */
  nghttp2_session_set_local_window_size(s->ng, NGHTTP2_FLAG_NONE, 0,
                                        lim->max_buffered > (1u << 30) ? (int32_t) (1u << 30)
                                                                       : (int32_t) lim->max_buffered);
  if (s->registry != NULL) {
    s->next_session = (struct cym_h2_session *) *s->registry;
    *s->registry = s;
  }
  c->pfn = cym_h2_handler;
  c->pfn_data = s;
  rv = 0;
out:
  if (cb != NULL) nghttp2_session_callbacks_del(cb);
  if (opt != NULL) nghttp2_option_del(opt);
  if (rv != 0) {
    if (s->ng != NULL) nghttp2_session_del(s->ng);
    free(s);
  }
  return rv;
}

/* Whether a session of the manager has work the next poll must not wait for: a stream
 * whose handler wrote since (outside the connection's own events: a WSGI thread's answer,
 * an ASGI send), input to deliver, window to give back, a stream to end. */
static int cym_h2_wants_poll(void *registry) {
  struct cym_h2_session *s;
  struct cym_h2_stream *st;
  for (s = (struct cym_h2_session *) registry; s != NULL; s = s->next_session) {
    for (st = s->streams; st != NULL; st = st->next) {
      struct mg_connection *c = st->c;
      if (st->closed || st->recv_added || c->is_closing ||
          (st->head_done && !st->opened) || (st->unconsumed && !c->is_full) ||
          (h2_unsent(st) > 0 && (st->resp_state == CYM_H2_RS_HEAD || st->deferred ||
                               st->resp_state >= CYM_H2_RS_NONE)) ||
          (st->deferred && c->is_draining))
        return 1;
    }
  }
  return 0;
}

/* The stream connections of the manager's sessions, up to `cap` of them into `out`; how
 * many there are in all. */
static size_t cym_h2_streams(void *registry, struct mg_connection **out, size_t cap) {
  struct cym_h2_session *s;
  struct cym_h2_stream *st;
  size_t n = 0;
  for (s = (struct cym_h2_session *) registry; s != NULL; s = s->next_session)
    for (st = s->streams; st != NULL; st = st->next) {
      if (!st->opened || st->closed) continue; /* not one a handler has seen */
      if (n < cap) out[n] = st->c;
      n++;
    }
  return n;
}

/* The connection the stream connection c travels on, or NULL. */
static struct mg_connection *cym_h2_parent(void *registry, const struct mg_connection *c) {
  struct cym_h2_session *s;
  struct cym_h2_stream *st;
  for (s = (struct cym_h2_session *) registry; s != NULL; s = s->next_session)
    for (st = s->streams; st != NULL; st = st->next)
      if (st->c == c) return s->c;
  return NULL;
}

/* The stream connection with this id, or NULL. */
static struct mg_connection *cym_h2_find(void *registry, unsigned long id) {
  struct cym_h2_session *s;
  struct cym_h2_stream *st;
  for (s = (struct cym_h2_session *) registry; s != NULL; s = s->next_session)
    for (st = s->streams; st != NULL; st = st->next)
      if (st->c->id == id && st->opened && !st->closed) return st->c;
  return NULL;
}

/* A graceful end (a server's stop, Connection.close()): GOAWAY with the last stream
 * taken, so the client opens no more and retries what it sent later elsewhere; the
 * streams in flight finish, then the connection closes. 0, or -1 when c is not HTTP/2. */
static int cym_h2_shutdown(struct mg_connection *c) {
  struct cym_h2_session *s = (struct cym_h2_session *) c->pfn_data;
  if (c->pfn != cym_h2_handler || s == NULL) return -1;
  if (!s->shutting && !s->dead) {
    s->shutting = 1;
    nghttp2_submit_goaway(s->ng, NGHTTP2_FLAG_NONE,
                          nghttp2_session_get_last_proc_stream_id(s->ng), NGHTTP2_NO_ERROR,
                          NULL, 0);
    h2_pump(s);
  }
  return 0;
}

/* A stream connection: no socket of its own, so no sendfile(2), shutdown(2) or epoll. */
static inline int cym_h2_is_stream(const struct mg_connection *c) {
  return c->is_accepted && (size_t) c->fd == (size_t) -1;
}

static inline mg_event_handler_t cym_h2_handler_fn(void) { return cym_h2_handler; }

/* A connection that speaks HTTP/2: its bytes are frames, for the session only. */
static inline int cym_h2_is_session(const struct mg_connection *c) {
  return c->pfn == cym_h2_handler && c->pfn_data != NULL;
}
#else
#define CYM_H2_BUILT 0
struct cym_h2_limits {
  mg_event_handler_t stream_pfn;
  void **registry;
  uint32_t max_streams, max_header_list, stream_window;
  uint64_t max_buffered, idle_timeout_ms, send_timeout_ms;
};
static inline const char *cym_h2_library_version(void) { return NULL; }
static inline int cym_h2_start(struct mg_connection *c, const struct cym_h2_limits *lim) {
  (void) c, (void) lim;
  return -1;
}
static inline int cym_h2_wants_poll(void *registry) { return (void) registry, 0; }
static inline size_t cym_h2_streams(void *registry, struct mg_connection **out, size_t cap) {
  return (void) registry, (void) out, (void) cap, 0;
}
static inline struct mg_connection *cym_h2_find(void *registry, unsigned long id) {
  return (void) registry, (void) id, NULL;
}
static inline int cym_h2_shutdown(struct mg_connection *c) { return (void) c, -1; }
static inline struct mg_connection *cym_h2_parent(void *registry,
                                                  const struct mg_connection *c) {
  return (void) registry, (void) c, NULL;
}
static inline int cym_h2_is_stream(const struct mg_connection *c) { return (void) c, 0; }
static inline mg_event_handler_t cym_h2_handler_fn(void) { return NULL; }
static inline int cym_h2_is_session(const struct mg_connection *c) { return (void) c, 0; }
#endif

/* What the first bytes of a plain-HTTP connection say (RFC 9113 section 3.4: a client with
 * prior knowledge opens with this 24-byte preface, which no HTTP/1.1 request can begin with,
 * "PRI" being no method our parser takes). */
#define CYM_H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define CYM_H2_PREFACE_LEN 24
enum {
  CYM_H2_NOT_PREFACE = 0, /* HTTP/1.1 (or garbage): the HTTP/1.1 guard decides */
  CYM_H2_PARTIAL = 1,     /* a prefix of the preface so far: wait for more bytes */
  CYM_H2_IS_PREFACE = 2   /* the whole preface: this connection speaks HTTP/2 */
};

static inline int cym_h2_preface_state(const unsigned char *buf, size_t len) {
  size_t n = len < CYM_H2_PREFACE_LEN ? len : CYM_H2_PREFACE_LEN;
  if (memcmp(buf, CYM_H2_PREFACE, n) != 0) return CYM_H2_NOT_PREFACE;
  return n == CYM_H2_PREFACE_LEN ? CYM_H2_IS_PREFACE : CYM_H2_PARTIAL;
}

#endif
