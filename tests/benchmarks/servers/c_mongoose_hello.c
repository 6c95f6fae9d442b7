/*
 * The ceiling: the same servers as ours, in C, on the same Mongoose (the pinned mongoose.c with
 * vendor/mongoose/build_fixes.py applied) built with the same flags and defines as our
 * extension (the runner reads them from our build tree). The hello answer
 * is byte-for-byte what cymongoose's conn.reply(200, body, {"Content-Type": ...}) sends, in
 * the same two mg_send() calls, so the difference between the two is the binding alone.
 *
 *   c_mongoose_hello --port N [--static DIR] [--stats-port M]
 *
 * --stats-port makes it the backend of the proxy phase (benchkit/backend.py): GET /100k
 * answers 102,400 bytes ('a' + i % 26), and GET / on port M answers the connections the
 * main port accepted, how many are open, the most open at once since the previous such
 * read, and the requests served. That mode has a handler of its own, so the ceiling's
 * handler stays what it was.
 *
 * CONTENDERS = [
 *   {"name": "mongoose-c", "label": "Mongoose in C (ceiling)", "kind": "hello",
 *    "env": "system", "build": "mongoose-c", "tools": ["gcc"],
 *    "command": ["{exe}", "--port", "{port}"], "quick": True,
 *    "phases": ["hello", "connections", "close"],
 *    "notes": "pure C, same Mongoose build and the same response bytes as ours"},
 *   {"name": "mongoose-c-static", "label": "Mongoose in C serve_dir", "kind": "static",
 *    "env": "system", "build": "mongoose-c", "tools": ["gcc"],
 *    "command": ["{exe}", "--port", "{port}", "--static", "{static_dir}"], "quick": True,
 *    "notes": "pure C mg_http_serve_dir(): what the binding's serve_dir can reach"},
 * ]
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mongoose.h"

static const char HEAD[] =
    "HTTP/1.1 200 OK\r\n"
    "Content-Type: application/json\r\n"
    "Content-Length: 27\r\n\r\n";
static const char BODY[] = "{\"message\":\"Hello, World!\"}";
static const char BIG_HEAD[] =
    "HTTP/1.1 200 OK\r\n"
    "Content-Type: application/octet-stream\r\n"
    "Content-Length: 102400\r\n\r\n";
static char s_big[102400];
static const char *s_root = NULL;
static volatile sig_atomic_t s_stop = 0;
// The backend's counters: one process, one thread, so plain integers.
static unsigned long s_accepted = 0, s_requests = 0;
static long s_open = 0, s_peak = 0;

static void on_signal(int signo) {
  s_stop = signo;
}

static void handler(struct mg_connection *c, int ev, void *ev_data) {
  if (ev != MG_EV_HTTP_MSG) return;
  if (s_root != NULL) {
    struct mg_http_serve_opts opts;
    memset(&opts, 0, sizeof(opts));
    opts.root_dir = s_root;
    mg_http_serve_dir(c, (struct mg_http_message *) ev_data, &opts);
    return;
  }
  mg_send(c, HEAD, sizeof(HEAD) - 1);
  mg_send(c, BODY, sizeof(BODY) - 1);
  c->is_resp = 0;  // response complete, as our reply() does
}

// The proxy phase's backend: counts what a proxy in front of it does to it, and adds the
// 100 KiB answer. Accepted connections inherit the listener's handler, so only the main
// port's connections reach this one.
static void backend_handler(struct mg_connection *c, int ev, void *ev_data) {
  if (ev == MG_EV_ACCEPT) {
    s_accepted++;
    if (++s_open > s_peak) s_peak = s_open;
  } else if (ev == MG_EV_CLOSE && c->is_accepted) {
    s_open--;
  } else if (ev == MG_EV_HTTP_MSG) {
    struct mg_http_message *hm = (struct mg_http_message *) ev_data;
    s_requests++;
    if (mg_strcmp(hm->uri, mg_str("/100k")) == 0) {
      mg_send(c, BIG_HEAD, sizeof(BIG_HEAD) - 1);
      mg_send(c, s_big, sizeof(s_big));
      c->is_resp = 0;
      return;
    }
  }
  handler(c, ev, ev_data);
}

// Reading the counters starts a new peak window: the runner reads them before and after
// each measured run, so the peak it gets is that run's.
static void stats_handler(struct mg_connection *c, int ev, void *ev_data) {
  (void) ev_data;
  if (ev != MG_EV_HTTP_MSG) return;
  mg_http_reply(c, 200, "Content-Type: application/json\r\n",
                "{\"accepted\":%lu,\"open\":%ld,\"peak\":%ld,\"requests\":%lu}",
                s_accepted, s_open, s_peak, s_requests);
  s_peak = s_open;
}

int main(int argc, char *argv[]) {
  const char *port = "8765", *stats_port = NULL;
  char url[64];
  struct mg_mgr mgr;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--port") == 0) {
      port = argv[i + 1];
    } else if (strcmp(argv[i], "--static") == 0) {
      s_root = argv[i + 1];
    } else if (strcmp(argv[i], "--stats-port") == 0) {
      stats_port = argv[i + 1];
    } else {
      fprintf(stderr, "usage: %s [--port N] [--static DIR] [--stats-port M]\n", argv[0]);
      return 2;
    }
  }
  for (size_t i = 0; i < sizeof(s_big); i++) s_big[i] = (char) ('a' + i % 26);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  mg_log_set(MG_LL_NONE);  // as our module does at import
  mg_mgr_init(&mgr);
  snprintf(url, sizeof(url), "http://127.0.0.1:%s", port);
  if (mg_http_listen(&mgr, url, stats_port ? backend_handler : handler, NULL) == NULL) {
    fprintf(stderr, "cannot listen on %s\n", url);
    return 1;
  }
  if (stats_port != NULL) {
    snprintf(url, sizeof(url), "http://127.0.0.1:%s", stats_port);
    if (mg_http_listen(&mgr, url, stats_handler, NULL) == NULL) {
      fprintf(stderr, "cannot listen on %s\n", url);
      return 1;
    }
  }
  while (s_stop == 0) mg_mgr_poll(&mgr, 100);  // Manager.run()'s poll interval
  mg_mgr_free(&mgr);
  return 0;
}
