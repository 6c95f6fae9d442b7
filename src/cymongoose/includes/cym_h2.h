/* HTTP/2 (issue 36): the engine is libnghttp2, a sans-I/O library the core drives in C.
 * Built without it (-DCYMONGOOSE_HTTP2=OFF), the calls below still exist and say so, so the
 * Cython side compiles the same either way. */
#ifndef CYM_H2_H
#define CYM_H2_H

#include <stddef.h>
#include <string.h>

#if defined(CYM_HAVE_NGHTTP2) && CYM_HAVE_NGHTTP2
#include <nghttp2/nghttp2.h>
#define CYM_H2_BUILT 1
/* The linked library's version ("1.52.0"): the one running, which may be newer than the
 * headers the module was compiled against. */
static inline const char *cym_h2_library_version(void) {
  nghttp2_info *info = nghttp2_version(0);
  return info != NULL ? info->version_str : NULL;
}
#else
#define CYM_H2_BUILT 0
static inline const char *cym_h2_library_version(void) { return NULL; }
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
