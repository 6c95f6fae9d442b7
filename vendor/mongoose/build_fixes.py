#!/usr/bin/env python3
"""Write the copy of mongoose.c that cymongoose compiles: the pinned file plus our fixes.

The pristine, hash-verified mongoose.c stays untouched beside this script (and in our sdist);
the build (CMakeLists.txt) compiles the output of this script instead. Each fix is our own
code inserted after an anchor line, applied only to the pinned file (its sha256 is checked),
and the script fails loudly if an anchor is missing, so a Mongoose update can never be
half-fixed silently.

    python3 build_fixes.py <pristine mongoose.c> <output mongoose.c>
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PIN = json.loads((HERE / "pin.json").read_text())

# Mongoose 7.23 encodes the ECDSA signature of its TLS 1.3 CertificateVerify with fixed
# 32-byte INTEGERs. When r or s starts with a zero byte (about 1 handshake in 256) that is
# not minimal DER, and OpenSSL-based clients (Python's ssl, curl) reject the handshake with
# "bad signature". tests/protocols/test_tls.py runs enough handshakes to catch it. Our block
# runs right after Mongoose built the signature and re-encodes it minimally from the raw
# 64-byte r||s still in `sig`.
ECDSA_MINIMAL_DER = """\
    {  /* cymongoose build fix: minimal DER INTEGERs in CertificateVerify */
      const uint8_t *r_ = sig, *s_ = sig + 32;
      size_t rl_ = 32, sl_ = 32, p_;
      int rn_, sn_;
      while (rl_ > 1 && r_[0] == 0 && !(r_[1] & 0x80)) r_++, rl_--;
      while (sl_ > 1 && s_[0] == 0 && !(s_[1] & 0x80)) s_++, sl_--;
      rn_ = !!(r_[0] & 0x80);
      sn_ = !!(s_[0] & 0x80);
      verify[9] = (uint8_t) (4 + rl_ + (size_t) rn_ + sl_ + (size_t) sn_);
      verify[10] = 0x02;
      verify[11] = (uint8_t) (rl_ + (size_t) rn_);
      verify[12] = 0;
      memmove(verify + 12 + rn_, r_, rl_);
      p_ = 12 + (size_t) rn_ + rl_;
      verify[p_] = 0x02;
      verify[p_ + 1] = (uint8_t) (sl_ + (size_t) sn_);
      verify[p_ + 2] = 0;
      memmove(verify + p_ + 2 + sn_, s_, sl_);
      sigsz = p_ + 2 + (size_t) sn_ + sl_ - 8;
    }
"""

# mg_bzero() wipes every buffer Mongoose frees or consumes (each byte sent, for one) with a
# volatile byte-at-a-time loop: about 5 instructions per byte, 96% of the user-space
# instructions when serving 100 KiB files (docs/performance.md). memset() plus a compiler
# barrier keeps the guarantee that matters (the stores cannot be elided) at memset speed.
FAST_BZERO = """\
  if (buf != NULL && len > 0) {  /* cymongoose build fix: fast wipe, still not elidable */
    memset((void *) buf, 0, len);
    __asm__ __volatile__("" : : "r"(buf) : "memory");
  }
  if (len > 0) return;
"""

# Mongoose's epoll interest always includes EPOLLIN, so a connection whose reads are paused
# (c->is_full: a streamed request body the app is not consuming yet) would make the
# level-triggered epoll_wait() return at once, forever: the loop would spin. Our definition
# leaves EPOLLIN out while is_full is set; cymongoose re-arms it when it clears the flag.
#
# Mongoose also asks for EPOLLOUT before every write and drops it after (two epoll_ctl()
# system calls per response, as many as the send() and recv() together). A socket's send
# buffer almost always has room, so we write first and arm EPOLLOUT only after a write fell
# short; each connection's registered interest is kept in c->prof.len (the profiling
# buffer, unused unless MG_ENABLE_PROFILE), so an unchanged interest costs no system call.
# cym_epoll_set() is exported for http_stream.pxi, which pauses and resumes reads.
EPOLL_INTEREST = """\
#if MG_ENABLE_EPOLL  /* cymongoose build fix: epoll interest kept, changed only on a change */
#if MG_ENABLE_PROFILE
#error "cymongoose keeps the epoll interest in c->prof.len: build without MG_ENABLE_PROFILE"
#endif
#define CYM_EPOLLOUT_ARMED(c) (((c)->prof.len & EPOLLOUT) != 0)
void cym_epoll_set(struct mg_connection *c, int wr) {
  struct epoll_event ev = {EPOLLERR | EPOLLHUP, {c}};
  if (!c->is_full) ev.events |= EPOLLIN;
  if (wr) ev.events |= EPOLLOUT;
  if (c->prof.len == (size_t) ev.events) return;
  c->prof.len = (size_t) ev.events;
  epoll_ctl(c->mgr->epoll_fd, EPOLL_CTL_MOD, (int) (size_t) c->fd, &ev);
}
#undef MG_EPOLL_ADD
#define MG_EPOLL_ADD(c)                                                    \\
  do {                                                                     \\
    struct epoll_event ev = {EPOLLIN | EPOLLERR | EPOLLHUP, {c}};          \\
    (c)->prof.len = (size_t) ev.events;                                    \\
    epoll_ctl(c->mgr->epoll_fd, EPOLL_CTL_ADD, (int) (size_t) c->fd, &ev); \\
  } while (0)
#undef MG_EPOLL_MOD
#define MG_EPOLL_MOD(c, wr) cym_epoll_set((c), (wr))
#else
#define CYM_EPOLLOUT_ARMED(c) 1
#endif
"""

# Before waiting, a connection with bytes to send is marked writable (and the wait made
# zero) instead of having EPOLLOUT armed; only an armed one waits for the kernel's word.
WRITE_FIRST = """\
    if (can_write(c) && !CYM_EPOLLOUT_ARMED(c)) {  /* cymongoose build fix: write first */
      c->is_writable = 1;
      ms = 0;
    }
"""
WRITE_FIRST_AFTER_EVENTS = """\
      if (can_write(c) && !CYM_EPOLLOUT_ARMED(c)) c->is_writable = 1;  /* cymongoose fix */
"""
# What the handler queued while reading goes out in the same iteration, not the next.
WRITE_AFTER_READ = """\
      if (!c->is_writable && !c->is_closing && can_write(c) && !CYM_EPOLLOUT_ARMED(c))
        c->is_writable = 1;  /* cymongoose build fix: answer in the same iteration */
"""
# A write that fell short (a full socket buffer): now wait for EPOLLOUT.
ARM_AFTER_SHORT_WRITE = """\
  if (c->send.len > 0 && !c->is_closing) MG_EPOLL_MOD(c, 1);  /* cymongoose build fix */
"""

# (anchor line, code inserted after it)
FIXES = [
    ("    sigsz = (size_t) (70 + neg1 + neg2);\n", ECDSA_MINIMAL_DER),
    ("void mg_bzero(volatile unsigned char *buf, size_t len) {\n", FAST_BZERO),
    ('#include "mongoose.h"\n', EPOLL_INTEREST),
    ("      c->is_writable = can_write(c) && wr ? 1U : 0;\n", WRITE_FIRST_AFTER_EVENTS),
    ("      if (c->is_readable) read_conn(c);\n", WRITE_AFTER_READ),
    ("  iolog(c, buf, n, false);\n", ARM_AFTER_SHORT_WRITE),
]

# (text, its replacement): Mongoose lines that our fixes take the place of.
REPLACEMENTS = [
    ("    if (can_write(c)) MG_EPOLL_MOD(c, 1);\n", WRITE_FIRST),
]


def apply(source: bytes) -> bytes:
    text = source.decode("utf-8")
    for anchor, block in FIXES:
        if text.count(anchor) != 1:
            raise SystemExit(f"build_fixes.py: anchor not found exactly once: {anchor.strip()!r}")
        text = text.replace(anchor, anchor + block)
    for old, new in REPLACEMENTS:
        if text.count(old) != 1:
            raise SystemExit(f"build_fixes.py: text to replace not found exactly once: "
                             f"{old.strip()!r}")
        text = text.replace(old, new)
    return text.encode("utf-8")


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    source = Path(argv[1]).read_bytes()
    digest = hashlib.sha256(source).hexdigest()
    if digest != PIN["sha256"]["mongoose.c"]:
        # A user's own copy (CYMONGOOSE_MONGOOSE_DIR): compile it as it is.
        print(f"build_fixes.py: {argv[1]} is not the pinned file; compiling it unmodified")
        patched = source
    else:
        patched = apply(source)
    out = Path(argv[2])
    if not out.exists() or out.read_bytes() != patched:
        out.write_bytes(patched)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
