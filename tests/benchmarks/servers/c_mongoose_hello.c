/*
 * The ceiling: the same servers as ours, in C, on the same Mongoose (the pinned mongoose.c with
 * vendor/mongoose/build_fixes.py applied) built with the same flags and defines as our
 * extension (the runner reads them from our build tree). The hello answer
 * is byte-for-byte what cymongoose's conn.reply(200, body, {"Content-Type": ...}) sends, in
 * the same two mg_send() calls, so the difference between the two is the binding alone.
 *
 *   c_mongoose_hello --port N [--static DIR]
 *
 * CONTENDERS = [
 *   {"name": "mongoose-c", "label": "Mongoose in C (ceiling)", "kind": "hello",
 *    "env": "system", "build": "mongoose-c", "tools": ["gcc"],
 *    "command": ["{exe}", "--port", "{port}"], "quick": True,
 *    "phases": ["hello", "connections"],
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
static const char *s_root = NULL;
static volatile sig_atomic_t s_stop = 0;

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

int main(int argc, char *argv[]) {
  const char *port = "8765";
  char url[64];
  struct mg_mgr mgr;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--port") == 0) {
      port = argv[i + 1];
    } else if (strcmp(argv[i], "--static") == 0) {
      s_root = argv[i + 1];
    } else {
      fprintf(stderr, "usage: %s [--port N] [--static DIR]\n", argv[0]);
      return 2;
    }
  }
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  mg_log_set(MG_LL_NONE);  // as our module does at import
  mg_mgr_init(&mgr);
  snprintf(url, sizeof(url), "http://127.0.0.1:%s", port);
  if (mg_http_listen(&mgr, url, handler, NULL) == NULL) {
    fprintf(stderr, "cannot listen on %s\n", url);
    return 1;
  }
  while (s_stop == 0) mg_mgr_poll(&mgr, 100);  // Manager.run()'s poll interval
  mg_mgr_free(&mgr);
  return 0;
}
