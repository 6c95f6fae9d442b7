/* WRITE_FIRST (perf, upstream: cymongoose-only), vendor/mongoose/inventory.py.
 *
 * Before waiting, a connection with bytes to send is marked writable (and the wait made
 * zero) instead of having EPOLLOUT armed; only an armed one waits for the kernel's word.
 * A connect still in progress is the exception: writability is how the kernel says the
 * handshake ended, and Mongoose takes "writable" as "connected or failed" (connect_conn), so
 * marking it ourselves failed every connect that did not complete at once ("socket error":
 * any upstream farther than loopback; found by the reverse proxy's connect-timeout test).
 *
 * What the handler queued while reading goes out in the same iteration, not the next.
 *
 * A write that fell short (a full socket buffer): now wait for EPOLLOUT.
 */

// @hunk before_wait
    if (can_write(c) && !CYM_EPOLLOUT_ARMED(c)) {  /* cymongoose build fix: write first */
      if (c->is_connecting) {
        MG_EPOLL_MOD(c, 1);  /* a pending connect: the kernel tells when it is done */
      } else {
        c->is_writable = 1;
        ms = 0;
      }
    }

// @hunk after_events
      if (can_write(c) && !c->is_connecting && !CYM_EPOLLOUT_ARMED(c))
        c->is_writable = 1;  /* cymongoose build fix: write first */

// @hunk after_read
      if (!c->is_writable && !c->is_closing && !c->is_connecting && can_write(c) &&
          !CYM_EPOLLOUT_ARMED(c))
        c->is_writable = 1;  /* cymongoose build fix: answer in the same iteration */

// @hunk short_write
  if (c->send.len > 0 && !c->is_closing) MG_EPOLL_MOD(c, 1);  /* cymongoose build fix */
