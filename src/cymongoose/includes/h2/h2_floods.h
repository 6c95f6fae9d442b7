/* HTTP/2 (issue 36): the floods a client can send that cost the server more than the
 * client, refused with GOAWAY ENHANCE_YOUR_CALM. Debian's libnghttp2 1.52 predates
 * upstream's own answers to two of them (rapid reset, 1.57; CONTINUATION, 1.61), so these
 * checks are ours, whatever the library:
 * - Rapid Reset (CVE-2023-44487): a request opened and reset at once, over and over; each
 *   costs a stream and maybe a handler call, and the reset frees its slot under the
 *   concurrency limit. Resets, and DATA frames that carry nothing and end nothing
 *   (CVE-2019-9518), spend tokens of a bucket of CYM_H2_FLOOD_BURST refilled at
 *   CYM_H2_FLOOD_RATE a second (nghttp2 1.57's numbers for resets).
 * - CONTINUATION flood (CVE-2024-27316, CVE-2024-28182): a head spread over endless
 *   CONTINUATION frames, which the HPACK decoder must read through; more than
 *   CYM_H2_MAX_CONTINUATIONS for one head ends the connection. nghttp2 1.61 (and
 *   Debian's 1.52 since its security update) stops at 8 itself; ours is the backstop.
 * HPACK bombs (a header list far larger than its frames) are cut by max_header_list
 * (h2_request.h), SETTINGS and PING floods by nghttp2's limit on queued replies. */
#ifndef CYM_H2_FLOODS_H
#define CYM_H2_FLOODS_H

#include "h2_types.h"

#define CYM_H2_FLOOD_BURST 1000.0
#define CYM_H2_FLOOD_RATE 33.0
#define CYM_H2_MAX_CONTINUATIONS 16

/* One reset or empty DATA frame from the client: 0, or -1 past the budget (the session
 * is being ended). */
static int h2_flood_spend(struct cym_h2_session *s) {
  uint64_t now = mg_millis();
  if (s->flood_at_ms == 0) s->flood_tokens = CYM_H2_FLOOD_BURST;
  s->flood_tokens += (double) (now - s->flood_at_ms) * CYM_H2_FLOOD_RATE / 1000.0;
  if (s->flood_tokens > CYM_H2_FLOOD_BURST) s->flood_tokens = CYM_H2_FLOOD_BURST;
  s->flood_at_ms = now;
  s->flood_tokens -= 1.0;
  if (s->flood_tokens >= 0) return 0;
  nghttp2_session_terminate_session(s->ng, NGHTTP2_ENHANCE_YOUR_CALM);
  return -1;
}

static int h2_on_begin_frame(nghttp2_session *ng, const nghttp2_frame_hd *hd, void *ud) {
  struct cym_h2_session *s = (struct cym_h2_session *) ud;
  (void) ng;
  if (hd->type == NGHTTP2_HEADERS) {
    s->continuations = 0;
  } else if (hd->type == NGHTTP2_CONTINUATION &&
             ++s->continuations > CYM_H2_MAX_CONTINUATIONS) {
    /* A fatal error: nghttp2 stops reading this connection at once. */
    s->dead = 1;
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  return 0;
}

/* nghttp2 1.61's NGHTTP2_ERR_TOO_MANY_CONTINUATIONS (Debian's 1.52 has the fix as a
 * patch, and the code), named here so that older headers compile. */
#define CYM_H2_ERR_TOO_MANY_CONTINUATIONS (-905)

/* Whether nghttp2_session_mem_recv() failed on a flood (its own checks or ours). */
static int h2_flood_error(int rv, const struct cym_h2_session *s) {
  return rv == NGHTTP2_ERR_FLOODED || rv == CYM_H2_ERR_TOO_MANY_CONTINUATIONS ||
         s->continuations > CYM_H2_MAX_CONTINUATIONS;
}

/* From on_frame_recv: the frames the bucket counts. */
static void h2_flood_check(struct cym_h2_session *s, const nghttp2_frame *frame) {
  if (frame->hd.type == NGHTTP2_RST_STREAM ||
      (frame->hd.type == NGHTTP2_DATA && frame->hd.length == 0 &&
       !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM)))
    h2_flood_spend(s);
}

#endif
