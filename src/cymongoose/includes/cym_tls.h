/* What tls.pxi needs from the TLS engine Mongoose was built with (CMake CYMONGOOSE_TLS).
 * With the OpenSSL engine these call libssl; with the built-in one they are inert and
 * tls.pxi never calls them (it branches on CYM_TLS_OPENSSL). */
#ifndef CYM_TLS_H
#define CYM_TLS_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mongoose.h"

#if MG_TLS == MG_TLS_OPENSSL
#define CYM_TLS_OPENSSL 1
#include <pthread.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

/* A password callback that refuses: without one, OpenSSL would prompt on the terminal for
 * an encrypted key (Mongoose passes NULL), blocking the event loop. */
static int cym_tls_no_password(char *buf, int size, int rwflag, void *u) {
  (void) buf, (void) size, (void) rwflag, (void) u;
  return -1;
}

static void cym_tls_error_text(const char *what, char *err, size_t errlen) {
  unsigned long e = ERR_peek_last_error();
  char reason[160];
  if (e != 0) {
    ERR_error_string_n(e, reason, sizeof(reason));
    snprintf(err, errlen, "%s (%s)", what, reason);
  } else {
    snprintf(err, errlen, "%s", what);
  }
  ERR_clear_error();
}

/* The private key in key[0:key_len] (PEM, other PEM blocks allowed around it, or DER)
 * re-encoded as one unencrypted PKCS#8 PEM block, the form Mongoose's load_key() reads.
 * When cert_len > 0 the key must belong to the first certificate of cert (PEM or DER).
 * Returns 0 and *out (release with cym_tls_free) or -1 with a message in err. */
static int cym_tls_key_pem(const char *key, size_t key_len, const char *cert,
                           size_t cert_len, char **out, size_t *out_len, char *err,
                           size_t errlen) {
  BIO *in = NULL, *mem = NULL;
  EVP_PKEY *pkey = NULL;
  X509 *x509 = NULL;
  const unsigned char *p = (const unsigned char *) key;
  char *data = NULL;
  long n;
  int rc = -1;
  *out = NULL;
  *out_len = 0;
  ERR_clear_error();
  if (key_len > 0 && (unsigned char) key[0] == 0x30) {
    pkey = d2i_AutoPrivateKey(NULL, &p, (long) key_len);
  } else if ((in = BIO_new_mem_buf(key, (int) key_len)) != NULL) {
    pkey = PEM_read_bio_PrivateKey(in, NULL, cym_tls_no_password, NULL);
    BIO_free(in);
    in = NULL;
  }
  if (pkey == NULL) {
    cym_tls_error_text("OpenSSL cannot read the private key", err, errlen);
    goto done;
  }
  if (cert_len > 0 && (in = BIO_new_mem_buf(cert, (int) cert_len)) != NULL) {
    x509 = (unsigned char) cert[0] == 0x30 ? d2i_X509_bio(in, NULL)
                                           : PEM_read_bio_X509(in, NULL, NULL, NULL);
    if (x509 == NULL) {
      cym_tls_error_text("OpenSSL cannot read the certificate", err, errlen);
      goto done;
    }
    if (X509_check_private_key(x509, pkey) != 1) {
      cym_tls_error_text("the private key does not belong to the (first) certificate", err,
                         errlen);
      goto done;
    }
  }
  if ((mem = BIO_new(BIO_s_mem())) == NULL ||
      PEM_write_bio_PrivateKey(mem, pkey, NULL, NULL, 0, NULL, NULL) != 1) {
    cym_tls_error_text("OpenSSL could not re-encode the private key", err, errlen);
    goto done;
  }
  n = BIO_get_mem_data(mem, &data);
  if (n <= 0 || (*out = (char *) OPENSSL_malloc((size_t) n)) == NULL) {
    snprintf(err, errlen, "out of memory");
    goto done;
  }
  memcpy(*out, data, (size_t) n);
  *out_len = (size_t) n;
  rc = 0;
done:
  BIO_free(in);
  BIO_free(mem);
  X509_free(x509);
  EVP_PKEY_free(pkey);
  ERR_clear_error();
  return rc;
}

static void cym_tls_free(char *p) {
  OPENSSL_free(p);
}

static const unsigned char cym_alpn_http11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
static const unsigned char cym_alpn_h2_http11[] = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/',
                                                   '1', '.', '1'};

/* Whether an accepted connection may speak HTTP/2 (an HTTP listener with http2 on, a
 * module built with libnghttp2): set by the core (http2.pxi). NULL: never. */
static int (*cym_tls_h2_allowed)(struct mg_connection *c) = NULL;

/* Server-side ALPN (RFC 7301): h2 when the client offers it and the connection may speak
 * it, else http/1.1 when offered; otherwise answer without ALPN rather than failing, which
 * keeps non-HTTP protocols over TLS (MQTT) working. The server's order decides: h2 first. */
static int cym_tls_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                               const unsigned char *in, unsigned int inlen, void *arg) {
  unsigned char *selected = NULL;
  BIO *bio = SSL_get_rbio(ssl);
  struct mg_connection *c = bio != NULL ? (struct mg_connection *) BIO_get_data(bio) : NULL;
  int h2 = c != NULL && cym_tls_h2_allowed != NULL && cym_tls_h2_allowed(c);
  const unsigned char *ours = h2 ? cym_alpn_h2_http11 : cym_alpn_http11;
  unsigned int ours_len = h2 ? sizeof(cym_alpn_h2_http11) : sizeof(cym_alpn_http11);
  (void) arg;
  if (SSL_select_next_proto(&selected, outlen, ours, ours_len, in, inlen) ==
      OPENSSL_NPN_NEGOTIATED) {
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

/* Whether the handshake chose h2 by ALPN. */
static int cym_tls_alpn_h2(struct mg_connection *c) {
  const unsigned char *proto = NULL;
  unsigned int len = 0;
  struct mg_tls *tls = (struct mg_tls *) c->tls;
  if (tls == NULL || tls->ssl == NULL) return 0;
  SSL_get0_alpn_selected(tls->ssl, &proto, &len);
  return len == 2 && proto[0] == 'h' && proto[1] == '2';
}


/* One SSL_CTX per TlsOpts and role, shared by every connection set up with it: Mongoose's
 * mg_tls_init() builds a context and parses the certificate and key for each connection
 * (1.7 ms with an RSA-2048 key on OpenSSL 3, more than the handshake itself). Connections
 * still get Mongoose's struct mg_tls, so mg_tls_handshake/recv/send/free work unchanged;
 * mg_tls_free()'s SSL_CTX_free() drops the reference each connection takes. */

static int cym_bio_write(BIO *b, const char *buf, int len) {
  long n = mg_io_send((struct mg_connection *) BIO_get_data(b), buf, (size_t) len);
  BIO_clear_retry_flags(b);
  if (n == MG_IO_WAIT) {
    BIO_set_retry_write(b);
    return -1;
  }
  return n > 0 ? (int) n : -1;
}

static int cym_bio_read(BIO *b, char *buf, int len) {
  long n = mg_io_recv((struct mg_connection *) BIO_get_data(b), buf, (size_t) len);
  BIO_clear_retry_flags(b);
  if (n == MG_IO_WAIT) {
    BIO_set_retry_read(b);
    return -1;
  }
  return n > 0 ? (int) n : -1;
}

static long cym_bio_ctrl(BIO *b, int cmd, long larg, void *parg) {
  (void) b, (void) larg, (void) parg;
  return cmd == BIO_CTRL_FLUSH || cmd == BIO_CTRL_PUSH || cmd == BIO_CTRL_POP ||
         cmd == BIO_C_SET_NBIO;
}

/* One BIO method for every connection of every loop, made once and never freed. Loops on
 * several threads (free threading) can attach their first TLS connections at once:
 * pthread_once makes the method exactly once and publishes it whole to each of them. */
static BIO_METHOD *cym_bio_method_made = NULL;
static pthread_once_t cym_bio_method_once = PTHREAD_ONCE_INIT;

static void cym_bio_method_make(void) {
  BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "cymongoose");
  if (m == NULL) return;
  BIO_meth_set_write(m, cym_bio_write);
  BIO_meth_set_read(m, cym_bio_read);
  BIO_meth_set_ctrl(m, cym_bio_ctrl);
  cym_bio_method_made = m;
}

/* NULL when OpenSSL could not make it (out of memory): that attach fails, and so do later
 * ones, as they would have. */
static BIO_METHOD *cym_bio_method(void) {
  pthread_once(&cym_bio_method_once, cym_bio_method_make);
  return cym_bio_method_made;
}

static int cym_tls_load_chain(SSL_CTX *ctx, const char *cert, size_t len) {
  BIO *bio = BIO_new_mem_buf(cert, (int) len);
  X509 *x = NULL;
  int ok = 0;
  if (bio == NULL) return 0;
  if ((unsigned char) cert[0] == 0x30) {
    x = d2i_X509_bio(bio, NULL);
    ok = x != NULL && SSL_CTX_use_certificate(ctx, x) == 1;
  } else {
    x = PEM_read_bio_X509(bio, NULL, NULL, NULL);
    ok = x != NULL && SSL_CTX_use_certificate(ctx, x) == 1;
    while (ok) {  /* the rest of the file: the chain, leaf first */
      X509 *next = PEM_read_bio_X509(bio, NULL, NULL, NULL);
      if (next == NULL) break;
      ok = SSL_CTX_add0_chain_cert(ctx, next) == 1;
      if (!ok) X509_free(next);
    }
    ERR_clear_error(); /* the read past the last certificate */
  }
  X509_free(x);
  BIO_free(bio);
  return ok;
}

/* What a server offers for TLS 1.2 unless told otherwise: ECDHE key exchange with an AEAD
 * cipher only, Mozilla's "intermediate" list without its DHE entries (no static-RSA key
 * exchange, so forward secrecy always; no CBC, no SHA-1 MACs). Every TLS 1.2 client of the
 * last decade offers one of these. TLS 1.3 suites are OpenSSL's defaults (all AEAD with
 * ECDHE). Servers also choose by their own order (SSL_OP_CIPHER_SERVER_PREFERENCE), so a
 * client listing AES128-SHA first still gets ECDHE-GCM, as nginx configured with
 * `ssl_prefer_server_ciphers on` does. */
#define CYM_TLS_DEFAULT_CIPHERS                                                              \
  "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"                               \
  "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"                               \
  "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"
static const char cym_tls_default_ciphers[] = CYM_TLS_DEFAULT_CIPHERS;

/* 0, or -1 with a message in err when `list` (an OpenSSL cipher list, NUL-terminated) is not
 * one to serve with. OpenSSL itself only fails a list that selects nothing and silently
 * drops names it does not know, so a typo would quietly narrow (or with "DEFAULT:typo",
 * not change) what is offered: each positive entry (not !, -, +, @) must select a TLS 1.2
 * cipher on its own. */
static int cym_tls_check_ciphers(const char *list, char *err, size_t errlen) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
  char token[128];
  const char *p = list;
  int rc = 0;
  if (ctx == NULL) {
    cym_tls_error_text("SSL_CTX_new failed", err, errlen);
    return -1;
  }
  while (rc == 0 && *p != '\0') {
    size_t n = strcspn(p, ":;, "); /* OpenSSL's separators */
    if (n > 0 && strchr("!-+@", p[0]) == NULL) {
      if (n >= sizeof(token)) {
        snprintf(err, errlen, "an entry is longer than %d characters", (int) sizeof(token) - 1);
        rc = -1;
      } else {
        memcpy(token, p, n);
        token[n] = '\0';
        if (SSL_CTX_set_cipher_list(ctx, token) != 1) {
          snprintf(err, errlen,
                   "'%s' selects no TLS 1.2 cipher of this OpenSSL (see `openssl ciphers`; "
                   "TLS 1.3 suites are OpenSSL's defaults and not set here)", token);
          rc = -1;
        }
      }
    }
    p += n;
    if (*p != '\0') p++;
  }
  if (rc == 0 && SSL_CTX_set_cipher_list(ctx, list) != 1) {
    snprintf(err, errlen, "it selects no TLS 1.2 cipher");
    rc = -1;
  }
  SSL_CTX_free(ctx);
  ERR_clear_error();
  return rc;
}

/* A context for clients (is_client) or servers; NULL with a message in err. `key` is the
 * PKCS#8 PEM made by cym_tls_key_pem(). `ciphers`: the TLS 1.2 cipher list (checked by
 * cym_tls_check_ciphers), or "" for the default: CYM_TLS_DEFAULT_CIPHERS for a server,
 * OpenSSL's for a client (which must still reach older servers). */
static SSL_CTX *cym_tls_ctx_new(int is_client, const char *ca, size_t ca_len,
                                const char *cert, size_t cert_len, const char *key,
                                size_t key_len, const char *ciphers, char *err,
                                size_t errlen) {
  static const unsigned char sid[] = "cymongoose";
  SSL_CTX *ctx = SSL_CTX_new(is_client ? TLS_client_method() : TLS_server_method());
  ERR_clear_error();
  if (ctx == NULL) {
    cym_tls_error_text("SSL_CTX_new failed", err, errlen);
    return NULL;
  }
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  if (!is_client || ciphers[0] != '\0') {
    const char *list = ciphers[0] != '\0' ? ciphers : cym_tls_default_ciphers;
    if (SSL_CTX_set_cipher_list(ctx, list) != 1) {
      cym_tls_error_text("OpenSSL refused the cipher list", err, errlen);
      SSL_CTX_free(ctx);
      return NULL;
    }
  }
  if (!is_client) {
    SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
#ifdef SSL_OP_NO_RENEGOTIATION
    /* TLS 1.2 renegotiation started by a client: a CPU cost per request for nothing we use,
     * and it would change the peer certificate that Connection.tls_info keeps (nginx
     * refuses it too). */
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
#endif
  }
  SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_session_id_context(ctx, sid, sizeof(sid) - 1);
  if (ca_len > 0) {
    BIO *bio = BIO_new_mem_buf(ca, (int) ca_len);
    STACK_OF(X509_INFO) *infos = bio ? PEM_X509_INFO_read_bio(bio, NULL, NULL, NULL) : NULL;
    X509_STORE *store = SSL_CTX_get_cert_store(ctx);
    int i, added = 0;
    for (i = 0; infos != NULL && i < sk_X509_INFO_num(infos); i++) {
      X509_INFO *info = sk_X509_INFO_value(infos, i);
      if (info->x509 != NULL && X509_STORE_add_cert(store, info->x509) == 1) added++;
    }
    sk_X509_INFO_pop_free(infos, X509_INFO_free);
    BIO_free(bio);
    if (added == 0) {
      cym_tls_error_text("no CA certificate could be read", err, errlen);
      SSL_CTX_free(ctx);
      return NULL;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
  }
  if (cert_len > 0 && !cym_tls_load_chain(ctx, cert, cert_len)) {
    cym_tls_error_text("OpenSSL cannot use the certificate", err, errlen);
    SSL_CTX_free(ctx);
    return NULL;
  }
  if (key_len > 0) {
    BIO *bio = BIO_new_mem_buf(key, (int) key_len);
    EVP_PKEY *pkey = bio ? PEM_read_bio_PrivateKey(bio, NULL, cym_tls_no_password, NULL)
                         : NULL;
    int ok = pkey != NULL && SSL_CTX_use_PrivateKey(ctx, pkey) == 1;
    EVP_PKEY_free(pkey);
    BIO_free(bio);
    if (!ok) {
      cym_tls_error_text("OpenSSL cannot use the private key", err, errlen);
      SSL_CTX_free(ctx);
      return NULL;
    }
  }
  if (!is_client) SSL_CTX_set_alpn_select_cb(ctx, cym_tls_alpn_select, NULL);
  ERR_clear_error();
  return ctx;
}

static void cym_tls_ctx_free(void *ctx) {
  SSL_CTX_free((SSL_CTX *) ctx);
}

/* What mg_tls_init() leaves behind, from a shared context: 0, or -1 (out of memory). A
 * client checks `name` through OpenSSL when the context verifies (has a CA), else through
 * Mongoose's own check after the handshake (check_name), as mg_tls_init() does.
 * `skip_verification`: the peer is not verified at all (no chain, no name), whatever the
 * context would do; SNI is still sent. `alpn_http11`: a client that will speak HTTP offers
 * http/1.1 by ALPN (servers that serve several protocols on one port need it to choose). */
static int cym_tls_attach(struct mg_connection *c, void *shared, const char *name,
                          size_t name_len, int verifies, int skip_verification,
                          int alpn_http11) {
  SSL_CTX *ctx = (SSL_CTX *) shared;
  struct mg_tls *tls = (struct mg_tls *) calloc(1, sizeof(*tls)); /* mg_free()d */
  BIO *bio = NULL;
  BIO_METHOD *method = cym_bio_method();
  if (tls == NULL || method == NULL) goto fail;
  c->tls = tls;
  SSL_CTX_up_ref(ctx);
  tls->ctx = ctx; /* tls->bm stays NULL: the method is shared, BIO_meth_free(NULL) is a no-op */
  if ((tls->ssl = SSL_new(ctx)) == NULL) goto fail;
  if (c->is_client && name_len > 0) {
    if ((tls->name = (char *) calloc(1, name_len + 1)) == NULL) goto fail;
    memcpy(tls->name, name, name_len);
    tls->check_name = !verifies && !skip_verification;
    if (!skip_verification) SSL_set1_host(tls->ssl, tls->name);
    SSL_set_tlsext_host_name(tls->ssl, tls->name);
  }
  if (skip_verification) SSL_set_verify(tls->ssl, SSL_VERIFY_NONE, NULL);
  if (c->is_client && alpn_http11 &&
      SSL_set_alpn_protos(tls->ssl, cym_alpn_http11, sizeof(cym_alpn_http11)) != 0)
    goto fail;
  if ((bio = BIO_new(method)) == NULL) goto fail;
  BIO_set_data(bio, c);
  BIO_set_init(bio, 1);
  SSL_set_bio(tls->ssl, bio, bio);
  c->is_tls = 1;
  c->is_tls_hs = 1;
  return 0;
fail:
  ERR_clear_error();
  if (tls == NULL) return -1;
  mg_tls_free(c); /* frees what was made, drops the context reference, clears c->tls */
  return -1;
}

/* Why the peer's certificate was refused, when that is what failed (else 0). Read at
 * MG_EV_ERROR, which Mongoose fires while the SSL object still exists. */
static int cym_tls_verify_error(struct mg_connection *c, char *buf, size_t len) {
  struct mg_tls *tls = (struct mg_tls *) c->tls;
  long r;
  if (tls == NULL || tls->ssl == NULL) return 0;
  r = SSL_get_verify_result(tls->ssl);
  if (r == X509_V_OK) return 0;
  snprintf(buf, len, "TLS: the peer's certificate was refused: %s",
           X509_verify_cert_error_string(r));
  return 1;
}

/* What Connection.tls_info reports (tls_peer.pxi), once the handshake is done: 0, or -1
 * (no TLS session, or the handshake is still running). */
struct cym_tls_info {
  int version;    /* on the wire: 0x0303 TLS 1.2, 0x0304 TLS 1.3 */
  int cipher_id;  /* the IANA number of the suite, 0x1301 for TLS_AES_128_GCM_SHA256 */
  int has_peer;   /* the peer presented a certificate */
  long verify;    /* SSL_get_verify_result(): X509_V_OK when verified (or not asked for) */
  const char *protocol, *cipher; /* OpenSSL's names ("TLSv1.3"), static strings */
  const char *verify_text;       /* why verification failed, when verify != X509_V_OK */
};

static int cym_tls_get_info(struct mg_connection *c, struct cym_tls_info *out) {
  struct mg_tls *tls = (struct mg_tls *) c->tls;
  const SSL_CIPHER *cipher;
  X509 *peer;
  if (tls == NULL || tls->ssl == NULL || c->is_tls_hs) return -1;
  cipher = SSL_get_current_cipher(tls->ssl);
  out->version = SSL_version(tls->ssl);
  out->protocol = SSL_get_version(tls->ssl);
  out->cipher_id = cipher != NULL ? (int) (SSL_CIPHER_get_id(cipher) & 0xFFFF) : 0;
  out->cipher = cipher != NULL ? SSL_CIPHER_get_name(cipher) : "";
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
  peer = SSL_get1_peer_certificate(tls->ssl);
#else
  peer = SSL_get_peer_certificate(tls->ssl);
#endif
  out->has_peer = peer != NULL;
  out->verify = SSL_get_verify_result(tls->ssl);
  out->verify_text = X509_verify_cert_error_string(out->verify);
  X509_free(peer);
  return 0;
}

/* A BIO's bytes as an OPENSSL_malloc'd buffer (release with cym_tls_free), or NULL. */
static char *cym_tls_bio_text(BIO *bio, size_t *len) {
  char *data = NULL, *out = NULL;
  long n = BIO_get_mem_data(bio, &data);
  if (n > 0 && (out = (char *) OPENSSL_malloc((size_t) n)) != NULL) {
    memcpy(out, data, (size_t) n);
    *len = (size_t) n;
  }
  return out;
}

/* A distinguished name as RFC 4514 text (the RFC 2253 form, most specific first, as nginx's
 * $ssl_client_s_dn and mod_ssl's SSL_CLIENT_S_DN give it), UTF-8 kept as such. */
static void cym_tls_print_name(BIO *bio, X509_NAME *name) {
  X509_NAME_print_ex(bio, name, 0, XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB);
}

/* Text about this connection's certificates, OPENSSL_malloc'd (cym_tls_free), or NULL when
 * there is none. what: 0 the peer's chain as PEM, its own certificate first; 1 the peer's
 * subject; 2 its issuer; 3 its serial number (hex); 4 and 5 its notBefore and notAfter
 * ("Nov 27 23:00:00 2026 GMT"); 6 this side's own certificate as PEM. */
static char *cym_tls_peer_text(struct mg_connection *c, int what, size_t *len) {
  struct mg_tls *tls = (struct mg_tls *) c->tls;
  X509 *x = NULL;
  BIO *bio;
  char *out = NULL;
  int ok = 1;
  *len = 0;
  if (tls == NULL || tls->ssl == NULL || c->is_tls_hs) return NULL;
  if (what == 6) {
    x = SSL_get_certificate(tls->ssl); /* not a new reference */
    if (x == NULL || (bio = BIO_new(BIO_s_mem())) == NULL) return NULL;
    ok = PEM_write_bio_X509(bio, x) == 1;
    if (ok) out = cym_tls_bio_text(bio, len);
    BIO_free(bio);
    return out;
  }
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
  x = SSL_get1_peer_certificate(tls->ssl);
#else
  x = SSL_get_peer_certificate(tls->ssl);
#endif
  if (x == NULL) return NULL;
  if ((bio = BIO_new(BIO_s_mem())) == NULL) {
    X509_free(x);
    return NULL;
  }
  switch (what) {
    case 0: {
      /* A server's SSL_get_peer_cert_chain() leaves the peer's own certificate out, a
       * client's starts with it. */
      STACK_OF(X509) *chain = SSL_get_peer_cert_chain(tls->ssl);
      int i = c->is_client ? 1 : 0;
      ok = PEM_write_bio_X509(bio, x) == 1;
      for (; ok && chain != NULL && i < sk_X509_num(chain); i++)
        ok = PEM_write_bio_X509(bio, sk_X509_value(chain, i)) == 1;
      break;
    }
    case 1: cym_tls_print_name(bio, X509_get_subject_name(x)); break;
    case 2: cym_tls_print_name(bio, X509_get_issuer_name(x)); break;
    case 3: ok = i2a_ASN1_INTEGER(bio, X509_get_serialNumber(x)) > 0; break;
    case 4: ok = ASN1_TIME_print(bio, X509_get0_notBefore(x)) == 1; break;
    case 5: ok = ASN1_TIME_print(bio, X509_get0_notAfter(x)) == 1; break;
    default: ok = 0;
  }
  if (ok) out = cym_tls_bio_text(bio, len);
  BIO_free(bio);
  X509_free(x);
  ERR_clear_error();
  return out;
}

/* The subject of one DER certificate, as cym_tls_print_name writes it; NULL if unreadable. */
static char *cym_tls_cert_subject(const char *der, size_t len, size_t *out_len) {
  const unsigned char *p = (const unsigned char *) der;
  X509 *x = d2i_X509(NULL, &p, (long) len);
  BIO *bio = x != NULL ? BIO_new(BIO_s_mem()) : NULL;
  char *out = NULL;
  *out_len = 0;
  if (bio != NULL) {
    cym_tls_print_name(bio, X509_get_subject_name(x));
    out = cym_tls_bio_text(bio, out_len);
  }
  BIO_free(bio);
  X509_free(x);
  ERR_clear_error();
  return out;
}

#else
#define CYM_TLS_OPENSSL 0

static const char cym_tls_default_ciphers[] = "";
static int cym_tls_check_ciphers(const char *list, char *err, size_t errlen) {
  (void) list;
  snprintf(err, errlen, "not built with OpenSSL");
  return -1;
}
static void *cym_tls_ctx_new(int is_client, const char *ca, size_t ca_len, const char *cert,
                             size_t cert_len, const char *key, size_t key_len,
                             const char *ciphers, char *err, size_t errlen) {
  (void) is_client, (void) ca, (void) ca_len, (void) cert, (void) cert_len, (void) key;
  (void) key_len, (void) ciphers;
  snprintf(err, errlen, "not built with OpenSSL");
  return NULL;
}
struct cym_tls_info {
  int version, cipher_id, has_peer;
  long verify;
  const char *protocol, *cipher, *verify_text;
};
static int cym_tls_get_info(struct mg_connection *c, struct cym_tls_info *out) {
  (void) c, (void) out;
  return -1;
}
static char *cym_tls_peer_text(struct mg_connection *c, int what, size_t *len) {
  (void) c, (void) what;
  *len = 0;
  return NULL;
}
static char *cym_tls_cert_subject(const char *der, size_t len, size_t *out_len) {
  (void) der, (void) len;
  *out_len = 0;
  return NULL;
}
static void cym_tls_ctx_free(void *ctx) {
  (void) ctx;
}
static int cym_tls_attach(struct mg_connection *c, void *shared, const char *name,
                          size_t name_len, int verifies, int skip_verification,
                          int alpn_http11) {
  (void) c, (void) shared, (void) name, (void) name_len, (void) verifies;
  (void) skip_verification, (void) alpn_http11;
  return -1;
}

static int cym_tls_verify_error(struct mg_connection *c, char *buf, size_t len) {
  (void) c, (void) buf, (void) len;
  return 0;
}

/* Mongoose's built-in TLS has no ALPN: its connections stay HTTP/1.1. */
static int (*cym_tls_h2_allowed)(struct mg_connection *c) = NULL;
static int cym_tls_alpn_h2(struct mg_connection *c) {
  (void) c;
  return 0;
}

static int cym_tls_key_pem(const char *key, size_t key_len, const char *cert,
                           size_t cert_len, char **out, size_t *out_len, char *err,
                           size_t errlen) {
  (void) key, (void) key_len, (void) cert, (void) cert_len;
  *out = NULL;
  *out_len = 0;
  snprintf(err, errlen, "not built with OpenSSL");
  return -1;
}
static void cym_tls_free(char *p) {
  (void) p;
}
#endif

#endif
