/* FAST_BZERO (perf, upstream: cymongoose-only), vendor/mongoose/inventory.py.
 *
 * mg_bzero() wipes every buffer Mongoose frees or consumes (each byte sent, for one) with a
 * volatile byte-at-a-time loop: about 5 instructions per byte, 96% of the user-space
 * instructions when serving 100 KiB files (docs/performance.md). memset() plus a compiler
 * barrier keeps the guarantee that matters (the stores cannot be elided) at memset speed.
 */

// @hunk wipe
  if (buf != NULL && len > 0) {  /* cymongoose build fix: fast wipe, still not elidable */
    memset((void *) buf, 0, len);
    __asm__ __volatile__("" : : "r"(buf) : "memory");
  }
  if (len > 0) return;
