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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mongoose.h"

#define MAX_SAMPLES 4000000

static char s_msg[65536];
static size_t s_size = 32;
static unsigned long s_echoes = 0, s_bad = 0, s_open = 0, s_closed = 0;
static uint64_t *s_lat = NULL;
static size_t s_nlat = 0;
static int s_measuring = 0;
static double s_interval_ms = 0;  // per connection, with --rate; 0: send on each echo

struct conn_state {
  uint64_t sent_ms;
  double next_ms;  // with --rate: when this connection sends next
  int waiting;     // a message is out and its echo not back
};

static void send_one(struct mg_connection *c) {
  struct conn_state *st = (struct conn_state *) c->data;
  st->sent_ms = mg_millis();
  st->waiting = 1;
  mg_ws_send(c, s_msg, s_size, WEBSOCKET_OP_TEXT);
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
    if (wm->data.len != s_size || memcmp(wm->data.buf, s_msg, s_size) != 0) s_bad++;
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
  }
  if (rate > 0) s_interval_ms = conns * 1000.0 / rate;
  if (url == NULL || s_size == 0 || s_size > sizeof(s_msg)) {
    fprintf(stderr, "usage: %s --url ws://... [--connections N] [--seconds S] [--size B]\n",
            argv[0]);
    return 2;
  }
  for (size_t i = 0; i < s_size; i++) s_msg[i] = (char) ('a' + i % 26);
  s_lat = (uint64_t *) malloc(MAX_SAMPLES * sizeof(uint64_t));
  mg_log_set(MG_LL_NONE);
  mg_mgr_init(&mgr);
  for (int i = 0; i < conns; i++) mg_ws_connect(&mgr, url, handler, NULL, NULL);
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
