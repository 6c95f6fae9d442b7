# The part of zlib's API (zlib.h, 1.2.x and later) the core uses: raw deflate streams for
# WebSocket permessage-deflate (ws_deflate.pxi). CMake links ZLIB::ZLIB into the module.

cdef extern from "zlib.h" nogil:
    ctypedef struct z_stream:
        unsigned char *next_in  # z_const in zlib.h: empty unless ZLIB_CONST
        unsigned int avail_in
        unsigned long total_in
        unsigned char *next_out
        unsigned int avail_out
        unsigned long total_out
        const char *msg
        void *zalloc
        void *zfree
        void *opaque

    int Z_OK
    int Z_STREAM_END
    int Z_NEED_DICT
    int Z_BUF_ERROR
    int Z_NO_FLUSH
    int Z_SYNC_FLUSH
    int Z_DEFLATED
    int Z_DEFAULT_STRATEGY

    int deflateInit2(z_stream *strm, int level, int method, int windowBits, int memLevel,
                     int strategy)
    int deflate(z_stream *strm, int flush)
    int deflateReset(z_stream *strm)
    int deflateEnd(z_stream *strm)
    unsigned long deflateBound(z_stream *strm, unsigned long sourceLen)
    int inflateInit2(z_stream *strm, int windowBits)
    int inflate(z_stream *strm, int flush)
    int inflateReset(z_stream *strm)
    int inflateEnd(z_stream *strm)
