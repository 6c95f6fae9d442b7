/* STATIC_SERVE (integration, upstream: cymongoose-only), vendor/mongoose/inventory.py.
 *
 * Mongoose 7.23's mg_http_serve_file() answers a suffix range (bytes=-3) and several ranges
 * with the whole file, ignores If-Range, sends a .gz variant without Vary, answers POST like
 * GET and sends no Date or Last-Modified; its directory redirect drops the query string.
 * cymongoose keeps Mongoose's URI-to-path mapping (mounts, `..` refused, index files) and
 * answers in the core (src/cymongoose/_pxi/http/http_static.pxi), the same code the --static
 * middlewares call: while a serve_dir() call runs on this thread, cym_serve_result points at
 * its struct, and mg_http_serve_dir() records there what it would have answered (a file, a
 * redirect to the directory's slash, a 403 for a directory it may not list) instead of
 * answering. Without it (cym_serve_result NULL) Mongoose behaves as before.
 * tests/core/test_static_http.py. Not proposed upstream.
 */

// @hunk definitions
_Thread_local struct cym_serve_out *cym_serve_result = NULL;  /* cymongoose: STATIC_SERVE */

// @hunk slash
  if (cym_serve_result != NULL) {  /* cymongoose build fix: a file URL ending in / is 404 */
    cym_serve_result->slash = n > 1 && path[n - 1] == '/';
  }

// @hunk redirect
    if (cym_serve_result != NULL) {  /* cymongoose build fix: the core redirects (query kept) */
      cym_serve_result->kind = CYM_SERVE_REDIRECT;
    } else {
      mg_printf(c,
                "HTTP/1.1 301 Moved\r\n"
                "Location: %.*s/\r\n"
                "Content-Length: 0\r\n"
                "\r\n",
                (int) hm->uri.len, hm->uri.buf);
      c->is_resp = 0;
    }
    flags = -1;

// @hunk index
    if (cym_serve_result != NULL) cym_serve_result->dir = 1;  /* cymongoose: STATIC_SERVE */

// @hunk file
    if (cym_serve_result != NULL) {  /* cymongoose build fix: the core serves the file */
      cym_serve_result->kind = CYM_SERVE_FILE;
      cym_serve_result->found = flags != 0;
      mg_snprintf(cym_serve_result->path, sizeof(cym_serve_result->path), "%s", path);
    } else {
      mg_http_serve_file(c, hm, path, opts);
    }
  }
}

// @hunk exports
/* cymongoose build fix (STATIC_SERVE): Mongoose's MIME table with serve_dir's overrides. */
struct mg_str cym_guess_content_type(struct mg_str path, const char *extra) {
  return guess_content_type(path, extra);
}
