/* ECDSA_MINIMAL_DER (bug, upstream: patch-ready), vendor/mongoose/inventory.py.
 *
 * Mongoose 7.23 encodes the ECDSA signature of its TLS 1.3 CertificateVerify with fixed
 * 32-byte INTEGERs. When r or s starts with a zero byte (about 1 handshake in 256) that is
 * not minimal DER, and OpenSSL-based clients (Python's ssl, curl) reject the handshake with
 * "bad signature". tests/protocols/test_tls.py runs enough handshakes to catch it. Our block
 * runs right after Mongoose built the signature and re-encodes it minimally from the raw
 * 64-byte r||s still in `sig`.
 */

// @hunk minimal_der
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
