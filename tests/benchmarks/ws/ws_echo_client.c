/*
 * WebSocket echo load generator for tests/benchmarks/ws_echo.py, in C on Mongoose (built by
 * the runner with our Mongoose build flags), so that the client is never the bottleneck of a
 * Python server. N connections each send a text message, wait for its echo, check it and
 * send the next, for D seconds; then one JSON line: echoes, mismatches, connections open,
 * and the latency percentiles of the echoes. With --rate R (messages per second over all
 * connections) each connection sends on a fixed schedule instead of right after its echo:
 * the fixed-rate load of the soak (tests/reliability/soak.py).
 *
 *   ws_echo_client --url ws://127.0.0.1:PORT/ws --connections 50 --seconds 5 --size 32
 *
 * With --deflate 1 the message is a JSON document of --size bytes and the client offers
 * permessage-deflate (RFC 7692) with client_no_context_takeover, so that every message it
 * sends is the same compressed payload, made once: the client's cost stays small and the
 * server's (inflating and deflating each message) is what is measured. An echo counts when it
 * comes back with RSV1 set (compressed) and inflates to the message; the inflater keeps the
 * server's context (context takeover, the servers' default).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "mongoose.h"

#define MAX_SAMPLES 4000000

static char s_msg[65536];
static size_t s_size = 32;
static unsigned long s_echoes = 0, s_bad = 0, s_open = 0, s_closed = 0;
static uint64_t *s_lat = NULL;
static size_t s_nlat = 0;
static int s_measuring = 0;
static double s_interval_ms = 0;  // per connection, with --rate; 0: send on each echo
static int s_deflate = 0;
static unsigned char s_packed[65536 + 1024];  // the message, compressed once (--deflate)
static size_t s_packed_len = 0;
static char s_inflated[65536 + 64];

struct conn_state {
  uint64_t sent_ms;
  double next_ms;  // with --rate: when this connection sends next
  int waiting;     // a message is out and its echo not back
};
// c->data holds struct conn_state (MG_DATA_SIZE is 32 bytes): the --deflate inflater of each
// connection lives here, indexed by c->id.
static z_stream *s_inflaters = NULL;
static unsigned long s_nconns = 0;

static int echo_ok(struct mg_connection *c, struct mg_ws_message *wm) {
  if (!s_deflate)
    return wm->data.len == s_size && memcmp(wm->data.buf, s_msg, s_size) == 0;
  if (!(wm->flags & 0x40) || c->id == 0 || c->id > s_nconns) return 0;
  z_stream *z = &s_inflaters[c->id - 1];
  static const unsigned char tail[4] = {0, 0, 0xff, 0xff};
  size_t out = 0;
  for (int part = 0; part < 2; part++) {
    z->next_in = part ? (unsigned char *) tail : (unsigned char *) wm->data.buf;
    z->avail_in = part ? 4 : (unsigned) wm->data.len;
    z->next_out = (unsigned char *) s_inflated + out;
    z->avail_out = (unsigned) (sizeof(s_inflated) - out);
    int r = inflate(z, Z_SYNC_FLUSH);
    out = sizeof(s_inflated) - z->avail_out;
    if (r != Z_OK && r != Z_BUF_ERROR) return 0;
  }
  return out == s_size && memcmp(s_inflated, s_msg, s_size) == 0;
}

static void make_json(void) {
  // A JSON array of records, padded with spaces to exactly s_size bytes.
  size_t n = 0;
  int i = 0;
  n += (size_t) snprintf(s_msg + n, s_size - n, "[");
  while (n + 96 < s_size) {
    n += (size_t) snprintf(s_msg + n, s_size - n,
                           "%s{\"id\":%d,\"name\":\"item %d\",\"tags\":[\"alpha\",\"beta\"],"
                           "\"score\":%d}", i ? "," : "", i, i, (i * 7919) % 1000);
    i++;
  }
  s_msg[n++] = ']';
  while (n < s_size) s_msg[n++] = ' ';
}

static void pack_message(void) {
  z_stream z;
  memset(&z, 0, sizeof(z));
  deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
  z.next_in = (unsigned char *) s_msg;
  z.avail_in = (unsigned) s_size;
  z.next_out = s_packed;
  z.avail_out = sizeof(s_packed);
  deflate(&z, Z_SYNC_FLUSH);
  s_packed_len = sizeof(s_packed) - z.avail_out - 4;  // RFC 7692 7.2.1: strip 00 00 ff ff
  deflateEnd(&z);
}

static void send_one(struct mg_connection *c) {
  struct conn_state *st = (struct conn_state *) c->data;
  st->sent_ms = mg_millis();
  st->waiting = 1;
  if (s_deflate) {
    mg_ws_send(c, s_packed, s_packed_len, WEBSOCKET_OP_TEXT | 0x40);  // RSV1: compressed
  } else {
    mg_ws_send(c, s_msg, s_size, WEBSOCKET_OP_TEXT);
  }
}

// With --rate: each connection whose echo is back sends when its turn comes; a connection
// that fell behind by more than a turn starts its schedule again rather than bursting.
static void send_due(struct mg_mgr *mgr) {
  double now = (double) mg_millis();
  for (struct mg_connection *c = mgr->conns; c != NULL; c = c->next) {
    struct conn_state *st = (struct conn_state *) c->data;
    if (!c->is_websocket || c->is_closing || st->waiting || now < st->next_ms) continue;
    st->next_ms = now - st->next_ms > s_interval_ms ? now + s_interval_ms
                                                     : st->next_ms + s_interval_ms;
    send_one(c);
  }
}

static void handler(struct mg_connection *c, int ev, void *ev_data) {
  if (ev == MG_EV_WS_OPEN) {
    s_open++;
    if (s_interval_ms > 0) {
      ((struct conn_state *) c->data)->next_ms = (double) mg_millis();
    } else {
      send_one(c);
    }
  } else if (ev == MG_EV_WS_MSG) {
    struct mg_ws_message *wm = (struct mg_ws_message *) ev_data;
    struct conn_state *st = (struct conn_state *) c->data;
    if (!echo_ok(c, wm)) s_bad++;
    if (s_measuring) {
      s_echoes++;
      if (s_nlat < MAX_SAMPLES) s_lat[s_nlat++] = mg_millis() - st->sent_ms;
    }
    st->waiting = 0;
    if (s_interval_ms <= 0) send_one(c);
  } else if (ev == MG_EV_CLOSE && c->is_websocket) {
    s_closed++;
  } else if (ev == MG_EV_ERROR) {
    fprintf(stderr, "error: %s\n", (char *) ev_data);
  }
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
  return x < y ? -1 : x > y;
}

int main(int argc, char *argv[]) {
  const char *url = NULL;
  int conns = 50;
  double seconds = 5, warmup = 1, rate = 0;
  struct mg_mgr mgr;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--url") == 0) url = argv[i + 1];
    else if (strcmp(argv[i], "--connections") == 0) conns = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--seconds") == 0) seconds = atof(argv[i + 1]);
    else if (strcmp(argv[i], "--warmup") == 0) warmup = atof(argv[i + 1]);
    else if (strcmp(argv[i], "--size") == 0) s_size = (size_t) atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--rate") == 0) rate = atof(argv[i + 1]);
    else if (strcmp(argv[i], "--deflate") == 0) s_deflate = atoi(argv[i + 1]);
  }
  if (rate > 0) s_interval_ms = conns * 1000.0 / rate;
  if (url == NULL || s_size == 0 || s_size > sizeof(s_msg)) {
    fprintf(stderr, "usage: %s --url ws://... [--connections N] [--seconds S] [--size B]\n",
            argv[0]);
    return 2;
  }
  if (s_deflate) {
    make_json();
    pack_message();
  } else {
    for (size_t i = 0; i < s_size; i++) s_msg[i] = (char) ('a' + i % 26);
  }
  s_lat = (uint64_t *) malloc(MAX_SAMPLES * sizeof(uint64_t));
  mg_log_set(MG_LL_NONE);
  mg_mgr_init(&mgr);
  if (s_deflate) {
    // Connection ids start at 1 and count up in this process: one inflater per id.
    s_nconns = (unsigned long) conns + 1;
    s_inflaters = (z_stream *) calloc(s_nconns, sizeof(z_stream));
    for (unsigned long i = 0; i < s_nconns; i++) inflateInit2(&s_inflaters[i], -15);
  }
  for (int i = 0; i < conns; i++) {
    if (s_deflate) {
      mg_ws_connect(&mgr, url, handler, NULL, "%s",
                    "Sec-WebSocket-Extensions: permessage-deflate; "
                    "client_no_context_takeover; client_max_window_bits\r\n");
    } else {
      mg_ws_connect(&mgr, url, handler, NULL, NULL);
    }
  }
  uint64_t start = mg_millis();
  uint64_t warm_end = start + (uint64_t) (warmup * 1000);
  uint64_t end = warm_end + (uint64_t) (seconds * 1000);
  uint64_t measured_from = 0;
  for (;;) {
    uint64_t now = mg_millis();
    if (!s_measuring && now >= warm_end) s_measuring = 1, measured_from = now;
    if (now >= end) break;
    mg_mgr_poll(&mgr, s_interval_ms > 0 ? 1 : 50);
    if (s_interval_ms > 0) send_due(&mgr);
  }
  double elapsed = (double) (mg_millis() - measured_from) / 1000.0;
  qsort(s_lat, s_nlat, sizeof(uint64_t), cmp_u64);
  uint64_t p50 = s_nlat ? s_lat[s_nlat / 2] : 0;
  uint64_t p99 = s_nlat ? s_lat[(s_nlat * 99) / 100] : 0;
  printf("{\"echoes\": %lu, \"seconds\": %.3f, \"per_s\": %.1f, \"mismatches\": %lu, "
         "\"opened\": %lu, \"closed_early\": %lu, \"p50_ms\": %llu, \"p99_ms\": %llu}\n",
         s_echoes, elapsed, elapsed > 0 ? s_echoes / elapsed : 0.0, s_bad, s_open, s_closed,
         (unsigned long long) p50, (unsigned long long) p99);
  mg_mgr_free(&mgr);
  free(s_lat);
  return s_open == (unsigned long) conns && s_bad == 0 ? 0 : 1;
}
