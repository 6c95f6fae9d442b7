/* PARKING (perf, upstream: cymongoose-only), vendor/mongoose/inventory.py.
 *
 * QUIET_SKIP still walks every connection on every iteration (and so does the iotest before
 * the wait): with 15,000 idle keep-alive clients a fresh client's first byte took 3-5 ms
 * instead of 0.4 (issue 22). So an idle connection the guard marked parkable leaves
 * mgr->conns altogether: the pre-wait walk (which runs no handler, so its link pointer
 * stays valid) moves it into a min-heap on its deadline, kept in the Manager's GilSlot
 * (mgr->userdata), and the loop's work per iteration follows the connections that have
 * something to do. A parked connection comes back to the head of mgr->conns when epoll
 * reports it, when its deadline passes (it then gets the MG_EV_POLL that times it out or
 * re-parks it), when cymongoose touches it (cym_unpark: any Connection method), when a
 * wakeup names it, and before mg_mgr_free(). Both structures (struct cym_quiet, struct
 * cym_parking) are defined once, in vendor/mongoose/cym_fixes.h, for mongoose.c and the core.
 */

// @hunk definitions
_Static_assert(__builtin_types_compatible_p(__typeof__(((struct mg_connection *) 0)->pfn_data),
                                            void *),
               "c->pfn_data is no longer a void *: PARKING keeps a struct cym_quiet there");
_Static_assert(__builtin_types_compatible_p(__typeof__(((struct mg_mgr *) 0)->userdata), void *),
               "mgr->userdata is no longer a void *: PARKING keeps a struct cym_parking there");
#define CYM_Q(c) ((struct cym_quiet *) (c)->pfn_data)
#define CYM_PARKING(mgr) ((struct cym_parking *) (mgr)->userdata)
static bool cym_parked(const struct mg_connection *c) {
  return c != NULL && c->pfn == cym_quiet_pfn && cym_quiet_pfn != NULL &&
         c->pfn_data != NULL && CYM_Q(c)->slot != 0;
}
static void cym_heap_put(struct cym_parking *p, size_t i, struct mg_connection *c) {
  p->heap[i] = c;
  CYM_Q(c)->slot = i + 1;
}
static void cym_heap_fix(struct cym_parking *p, size_t i) {  /* restore order around i */
  struct mg_connection *c = p->heap[i];
  uint64_t key = CYM_Q(c)->until;
  while (i > 0 && CYM_Q(p->heap[(i - 1) / 2])->until > key) {
    cym_heap_put(p, i, p->heap[(i - 1) / 2]);
    i = (i - 1) / 2;
  }
  for (;;) {
    size_t kid = 2 * i + 1;
    if (kid >= p->len) break;
    if (kid + 1 < p->len && CYM_Q(p->heap[kid + 1])->until < CYM_Q(p->heap[kid])->until) kid++;
    if (CYM_Q(p->heap[kid])->until >= key) break;
    cym_heap_put(p, i, p->heap[kid]);
    i = kid;
  }
  cym_heap_put(p, i, c);
}
static bool cym_may_park(const struct mg_connection *c, uint64_t now) {
  return c->pfn == cym_quiet_pfn && cym_quiet_pfn != NULL && c->pfn_data != NULL &&
         c->mgr->userdata != NULL && CYM_Q(c)->park && CYM_Q(c)->until > now &&
         !c->is_closing && !c->is_draining && !c->is_resp && !c->is_tls &&
         c->send.len == 0 && c->recv.len == 0 && c->rtls.len == 0;
}
static bool cym_park(struct mg_connection *c) {  /* the caller unlinks it on success */
  struct cym_parking *p = CYM_PARKING(c->mgr);
  if (p->len == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 256;
    struct mg_connection **heap =
        (struct mg_connection **) realloc(p->heap, cap * sizeof(*heap));
    if (heap == NULL) return false;  /* stays in the list: skipped as before */
    p->heap = heap, p->cap = cap;
  }
  p->heap[p->len++] = c;
  cym_heap_fix(p, p->len - 1);
  return true;
}
void cym_unpark(struct mg_connection *c) {
  struct cym_parking *p;
  size_t i;
  if (!cym_parked(c)) return;
  p = CYM_PARKING(c->mgr);
  i = CYM_Q(c)->slot - 1;
  CYM_Q(c)->slot = 0;
  if (i < --p->len) {
    cym_heap_put(p, i, p->heap[p->len]);
    cym_heap_fix(p, i);
  }
  LIST_ADD_HEAD(struct mg_connection, &c->mgr->conns, c);
}
static void cym_unpark_due(struct mg_mgr *mgr, uint64_t now) {
  struct cym_parking *p = CYM_PARKING(mgr);
  while (cym_quiet_pfn != NULL && p != NULL && p->len > 0 && CYM_Q(p->heap[0])->until <= now)
    cym_unpark(p->heap[0]);
}
static void cym_unpark_all(struct mg_mgr *mgr) {
  struct cym_parking *p = CYM_PARKING(mgr);
  if (cym_quiet_pfn == NULL || p == NULL) return;
  while (p->len > 0) cym_unpark(p->heap[p->len - 1]);
  free(p->heap);
  p->heap = NULL, p->cap = 0;
}
struct mg_connection *cym_parked_find(struct mg_mgr *mgr, unsigned long id) {
  struct cym_parking *p = CYM_PARKING(mgr);
  size_t i;
  for (i = 0; cym_quiet_pfn != NULL && p != NULL && i < p->len; i++)
    if (p->heap[i]->id == id) return p->heap[i];
  return NULL;
}
struct mg_connection *cym_parked_at(struct mg_mgr *mgr, size_t i) {  /* NULL past the end */
  struct cym_parking *p = CYM_PARKING(mgr);
  return cym_quiet_pfn != NULL && p != NULL && i < p->len ? p->heap[i] : NULL;
}
int cym_parked_wait_ms(struct mg_mgr *mgr, int ms) {  /* ms capped at the first deadline */
  struct cym_parking *p = CYM_PARKING(mgr);
  uint64_t now, until;
  if (cym_quiet_pfn == NULL || p == NULL || p->len == 0) return ms;
  now = mg_millis(), until = CYM_Q(p->heap[0])->until;
  if (until <= now) return 0;
  return ms >= 0 && (uint64_t) ms <= until - now ? ms : (int) (until - now);
}

// @hunk iotest
#elif MG_ENABLE_EPOLL
  size_t max = 1;
  uint64_t cym_now = mg_millis();  /* cymongoose build fix: see PARKING */
  struct mg_connection **cym_link = &mgr->conns, *cym_next;
  for (struct mg_connection *c = mgr->conns; c != NULL; c = cym_next) {
    cym_next = c->next;
    c->is_readable = c->is_writable = 0;
    if (cym_may_park(c, cym_now) && cym_park(c)) {
      *cym_link = cym_next;
      continue;
    }
    cym_link = &c->next;

// @hunk events
  if (CYM_PARKING(mgr) != NULL && cym_quiet_pfn != NULL) {  /* cymongoose build fix */
    max += CYM_PARKING(mgr)->len;  /* parked connections' events are asked for too */
    ms = cym_parked_wait_ms(mgr, ms);
  }

// @hunk unpark_on_event
    cym_unpark(c);  /* cymongoose build fix: it has I/O, back in the list */

// @hunk unpark_due
  cym_unpark_due(mgr, now);  /* cymongoose build fix: see PARKING */

// @hunk wakeup
      struct mg_connection *t;
      for (t = c->mgr->conns; t != NULL && t->id != *id; t = t->next) (void) 0;
      if (t == NULL) cym_unpark(cym_parked_find(c->mgr, *id));  /* cymongoose build fix */
      for (t = c->mgr->conns; t != NULL; t = t->next) {
        if (t->id == *id) {
          struct mg_str data = mg_str_n((char *) c->recv.buf + sizeof(*id),

// @hunk free
  cym_unpark_all(mgr);  /* cymongoose build fix: parked ones are closed too */
