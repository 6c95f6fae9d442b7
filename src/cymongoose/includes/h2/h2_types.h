/* HTTP/2 (issue 36): the state the engine keeps per connection and per stream. Included by
 * cym_h2.h only when the module is built with libnghttp2.
 *
 * A stream is served by a *stream connection*: a struct mg_connection the engine allocates,
 * with no socket (fd is MG_INVALID_SOCKET) and not in mgr->conns, so Mongoose's loop never
 * touches it. Its request arrives in c->recv as HTTP/1.1 bytes and runs through the same
 * protocol handler (the HTTP guard), limits and user handler as an HTTP/1.1 request; what the
 * handler writes to c->send, an HTTP/1.1 response, becomes HEADERS and DATA frames
 * (h2_response.h). So every writer (reply, http_begin/write/end, serve_file, the WSGI and
 * ASGI servers) works on a stream unchanged. */
#ifndef CYM_H2_TYPES_H
#define CYM_H2_TYPES_H

#include <stdint.h>
#include <nghttp2/nghttp2.h>
#include "mongoose.h"

/* What the core gives a connection that turns to HTTP/2 (cym_h2_start). */
struct cym_h2_limits {
  mg_event_handler_t stream_pfn; /* protocol handler of stream connections: the HTTP guard */
  void **registry;               /* head of the manager's list of sessions (cym_h2_wants_poll) */
  uint32_t max_streams;          /* SETTINGS_MAX_CONCURRENT_STREAMS */
  uint32_t max_header_list;      /* a request's fields, RFC 9113 sizes: 431 past it */
  uint32_t stream_window;        /* receive window per stream (bytes the app has not read) */
  uint64_t max_buffered;         /* request bytes all streams may hold before windows shut */
  uint64_t idle_timeout_ms;      /* no stream open this long: GOAWAY and close (0: never) */
  uint64_t send_timeout_ms;      /* queued output without progress this long: close */
};

enum { /* how the HTTP/1.1 response in a stream's c->send is framed (h2_response.h) */
  CYM_H2_RS_HEAD = 0,    /* waiting for the whole head */
  CYM_H2_RS_LENGTH = 1,  /* Content-Length: resp_left bytes to go */
  CYM_H2_RS_CHUNKED = 2, /* chunked: decoded as it goes */
  CYM_H2_RS_CLOSE = 3,   /* neither: the body ends when the handler ends the connection */
  CYM_H2_RS_NONE = 4,    /* no body (HEAD, 204, 304): whatever is written is dropped */
  CYM_H2_RS_DONE = 5     /* END_STREAM submitted */
};

enum { /* the chunked decoder's place */
  CYM_H2_CK_SIZE = 0,
  CYM_H2_CK_DATA = 1,
  CYM_H2_CK_CRLF = 2,
  CYM_H2_CK_TRAILER = 3
};

/* Frames are written into c->send up to this much; past it, the next MG_EV_WRITE asks for
 * more. */
#define CYM_H2_SEND_HIGH (256 * 1024)

struct cym_h2_session;

struct cym_h2_stream {
  struct cym_h2_stream *next;
  struct cym_h2_session *s;
  struct mg_connection *c; /* the stream connection */
  int32_t id;
  /* The request, as HTTP/1.1 bytes (h2_request.h). */
  struct mg_iobuf pseudo;  /* :method, :path, :authority until the request line is written */
  struct mg_iobuf cookie;  /* cookie fields, joined with "; " (RFC 9113 section 8.2.3) */
  struct mg_iobuf head;    /* the final response head, which its HEADERS frame points into */
  size_t head_size;        /* the fields' size as RFC 9113 counts it (32 per field) */
  size_t recv_added;       /* bytes appended to c->recv since its last MG_EV_READ */
  size_t unconsumed;       /* DATA bytes received and not yet given back as window */
  unsigned head_done : 1;      /* the head is in c->recv */
  unsigned line_done : 1;      /* the request line (and Host) are in c->recv */
  unsigned chunked_req : 1;    /* the body is unknown in length: framed chunked in c->recv */
  unsigned has_length : 1;     /* the request said content-length */
  unsigned has_host : 1;       /* a host field came (no :authority) */
  unsigned too_big : 1;        /* fields past max_header_list: answered 431 */
  unsigned req_ended : 1;      /* END_STREAM received */
  unsigned head_request : 1;   /* HEAD: the response has no body */
  unsigned opened : 1;         /* MG_EV_OPEN delivered */
  unsigned closed : 1;         /* nghttp2 closed the stream: free it */
  unsigned rst_sent : 1;       /* we reset it */
  unsigned deferred : 1;       /* its data source answered DEFERRED: resume on new bytes */
  unsigned resp_submitted : 1; /* the response HEADERS are submitted */
  /* The response (h2_response.h). */
  int resp_state;
  int chunk_state;
  uint64_t resp_left;     /* RS_LENGTH: bytes to go; RS_CHUNKED: the current chunk's */
  size_t send_off;        /* bytes at the front of c->send the data source took */
  size_t send_told;       /* of those, the ones MG_EV_WRITE has reported */
  size_t pending;         /* bytes after send_off a DATA frame will take (NO_COPY) */
};

struct cym_h2_session {
  struct cym_h2_session *next_session; /* the manager's registry */
  void **registry;
  nghttp2_session *ng;
  struct mg_connection *c; /* the TCP (or TLS) connection */
  struct cym_h2_limits lim;
  struct cym_h2_stream *streams;
  size_t nstreams;
  struct cym_h2_stream *spare; /* ended streams kept for the next ones (h2_session.h) */
  struct cym_h2_stream *in_head; /* the stream begun last (h2_stream_of looks there first) */
  unsigned nspare;
  uint64_t idle_since_ms;  /* when the last stream ended (0: streams open) */
  uint64_t send_since_ms;  /* output queued and unwritten since (0: none) */
  /* Floods nghttp2 1.52 lets through (h2_floods.h): a token bucket of resets and empty
   * DATA frames, and the CONTINUATION frames of the head being read. */
  double flood_tokens;
  uint64_t flood_at_ms;
  unsigned continuations;
  int in_pump;             /* cym_h2_pump on the stack: no nested pump */
  int shutting;            /* GOAWAY sent for a stop: close once the streams are done */
  int dead;                /* the session failed or ended: drain and close */
};

#endif
