/* Response compression (issue 39): gzip through zlib and zstd through libzstd, behind one
 * small interface the core calls without the GIL (http_compress.pxi). Two uses:
 *  - a whole body known up front (http_respond, reply): one call, cym_compress_whole(),
 *    on an encoder the Manager keeps and resets, so a response allocates no encoder state;
 *  - a streamed body (http_begin/http_write/http_end, files): an encoder of its own for the
 *    response, fed piece by piece; each piece is flushed, so what the app writes reaches the
 *    client at once (an SSE event is never held back waiting for more).
 * Output goes to a growable buffer the caller owns (struct cym_out); on failure nothing is
 * half-written into the caller's send buffer.
 * Built without libzstd (-DCYMONGOOSE_ZSTD=OFF) the zstd calls exist and refuse. */
#ifndef CYM_COMPRESS_H
#define CYM_COMPRESS_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#if defined(CYM_HAVE_ZSTD) && CYM_HAVE_ZSTD
#include <zstd.h>
#define CYM_ZSTD_BUILT 1
#else
#define CYM_ZSTD_BUILT 0
#endif

enum { CYM_CODING_GZIP = 1, CYM_CODING_BR = 2, CYM_CODING_ZSTD = 4 };
/* cym_encode()'s modes: keep what does not fill a block (a file read piece by piece),
 * flush everything so far (an app's write), or end the body. */
enum { CYM_KEEP = 0, CYM_FLUSH = 1, CYM_END = 2 };

/* A streamed response's gzip window: 2^(13+2) + 2^(7+9) = 96 KiB of deflate state, a
 * quarter of zlib's default, so a thousand open event streams cost ~100 MB, not 260 MB.
 * The ratio it costs on text is about 1% (measured in docs/performance.md). Whole bodies use
 * the full window: their encoders are the Manager's, one per loop. */
#define CYM_GZIP_STREAM_WBITS 13
#define CYM_GZIP_STREAM_MEMLEVEL 7
/* A streamed response's zstd state: a 64 KiB window and 2^13-entry match tables, about
 * 330 KiB at level 3 against 1.3 MiB with the level's own (ZSTD_estimateCStreamSize);
 * whole bodies use the level's own tables, bounded by the body's size. */
#define CYM_ZSTD_STREAM_WLOG 16
#define CYM_ZSTD_STREAM_TABLES 13

struct cym_out {
  unsigned char *buf;
  size_t len, size;
};

static inline void cym_out_free(struct cym_out *o) {
  free(o->buf);
  o->buf = NULL;
  o->len = o->size = 0;
}

/* Room for `more` bytes after len; geometric growth. 0, or -1 (no memory). */
static inline int cym_out_reserve(struct cym_out *o, size_t more) {
  size_t want = o->len + more, size = o->size ? o->size : 4096;
  unsigned char *p;
  if (want < o->len) return -1;
  if (want <= o->size) return 0;
  while (size < want) {
    if (size > ((size_t) -1) / 2) return -1;
    size *= 2;
  }
  p = (unsigned char *) realloc(o->buf, size);
  if (p == NULL) return -1;
  o->buf = p;
  o->size = size;
  return 0;
}

struct cym_encoder {
  int coding;  /* CYM_CODING_GZIP or CYM_CODING_ZSTD; 0 while unused */
  int level;
  int ready;   /* the state below is initialised */
  z_stream z;
#if CYM_ZSTD_BUILT
  ZSTD_CCtx *zc;
#endif
};

static inline void cym_encoder_free(struct cym_encoder *e) {
  if (e->ready && e->coding == CYM_CODING_GZIP) deflateEnd(&e->z);
#if CYM_ZSTD_BUILT
  if (e->coding == CYM_CODING_ZSTD && e->zc != NULL) ZSTD_freeCCtx(e->zc);
  e->zc = NULL;
#endif
  e->ready = 0;
  e->coding = 0;
}

/* Make e ready for a new body of `coding` at `level`; `stream`: the smaller streamed-response
 * window. An encoder already set for the same coding is reset, not rebuilt. 0, or -1. */
static inline int cym_encoder_start(struct cym_encoder *e, int coding, int level, int stream) {
  if (e->ready && e->coding == coding && e->level == level) {
    if (coding == CYM_CODING_GZIP) return deflateReset(&e->z) == Z_OK ? 0 : -1;
#if CYM_ZSTD_BUILT
    return ZSTD_CCtx_reset(e->zc, ZSTD_reset_session_only) == 0 ? 0 : -1;
#endif
  }
  cym_encoder_free(e);
  e->coding = coding;
  e->level = level;
  if (coding == CYM_CODING_GZIP) {
    memset(&e->z, 0, sizeof(e->z));
    /* 16 + wbits: a gzip header and trailer around the deflate stream. */
    if (deflateInit2(&e->z, level, Z_DEFLATED, 16 + (stream ? CYM_GZIP_STREAM_WBITS : 15),
                     stream ? CYM_GZIP_STREAM_MEMLEVEL : 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      e->coding = 0;
      return -1;
    }
    e->ready = 1;
    return 0;
  }
#if CYM_ZSTD_BUILT
  if (coding == CYM_CODING_ZSTD) {
    e->zc = ZSTD_createCCtx();
    if (e->zc == NULL ||
        ZSTD_isError(ZSTD_CCtx_setParameter(e->zc, ZSTD_c_compressionLevel, level)) ||
        (stream && (ZSTD_isError(ZSTD_CCtx_setParameter(e->zc, ZSTD_c_windowLog,
                                                        CYM_ZSTD_STREAM_WLOG)) ||
                    ZSTD_isError(ZSTD_CCtx_setParameter(e->zc, ZSTD_c_hashLog,
                                                        CYM_ZSTD_STREAM_TABLES)) ||
                    ZSTD_isError(ZSTD_CCtx_setParameter(e->zc, ZSTD_c_chainLog,
                                                        CYM_ZSTD_STREAM_TABLES))))) {
      cym_encoder_free(e);
      return -1;
    }
    e->ready = 1;
    return 0;
  }
#endif
  e->coding = 0;
  return -1;
}

/* Compress in[0:n] onto o, then keep, flush or end (CYM_KEEP, CYM_FLUSH, CYM_END). After a
 * flush the client can decode everything given so far. 0, or -1. */
static inline int cym_encode(struct cym_encoder *e, const void *in, size_t n, int mode,
                             struct cym_out *o) {
  if (!e->ready) return -1;
  if (e->coding == CYM_CODING_GZIP) {
    int r, flush = mode == CYM_END ? Z_FINISH : mode == CYM_FLUSH ? Z_SYNC_FLUSH : Z_NO_FLUSH;
    e->z.next_in = (Bytef *) in;
    e->z.avail_in = (uInt) n;
    if ((size_t) e->z.avail_in != n) return -1; /* over 4 GiB in one call */
    for (;;) {
      size_t room;
      if (cym_out_reserve(o, deflateBound(&e->z, e->z.avail_in) + 64) != 0) return -1;
      room = o->size - o->len;
      if (room > 0x7fffffffu) room = 0x7fffffffu;
      e->z.next_out = o->buf + o->len;
      e->z.avail_out = (uInt) room;
      r = deflate(&e->z, flush);
      o->len += room - e->z.avail_out;
      if (r == Z_STREAM_END) return 0;
      if (r != Z_OK && r != Z_BUF_ERROR) return -1;
      /* Done once the input is taken and deflate stopped with room to spare (with less,
       * a flush may have more to write). */
      if (mode != CYM_END && e->z.avail_in == 0 && e->z.avail_out != 0) return 0;
    }
  }
#if CYM_ZSTD_BUILT
  if (e->coding == CYM_CODING_ZSTD) {
    ZSTD_inBuffer ib = {in, n, 0};
    ZSTD_EndDirective how = mode == CYM_END ? ZSTD_e_end
                            : mode == CYM_FLUSH ? ZSTD_e_flush : ZSTD_e_continue;
    for (;;) {
      size_t left;
      ZSTD_outBuffer ob;
      if (cym_out_reserve(o, ZSTD_compressBound(n - ib.pos) + 64) != 0) return -1;
      ob.dst = o->buf + o->len;
      ob.size = o->size - o->len;
      ob.pos = 0;
      left = ZSTD_compressStream2(e->zc, &ob, &ib, how);
      o->len += ob.pos;
      if (ZSTD_isError(left)) return -1;
      if (ib.pos == n && (left == 0 || how == ZSTD_e_continue)) return 0;
    }
  }
#endif
  return -1;
}

static inline const char *cym_zlib_version(void) { return zlibVersion(); }
static inline const char *cym_zstd_version(void) {
#if CYM_ZSTD_BUILT
  return ZSTD_versionString();
#else
  return NULL;
#endif
}

#endif
