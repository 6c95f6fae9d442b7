/* What tls.pxi needs from the TLS engine Mongoose was built with (CMake CYMONGOOSE_TLS).
 * With the OpenSSL engine these call libssl; with the built-in one they are inert and
 * tls.pxi never calls them (it branches on CYM_TLS_OPENSSL). */
#ifndef CYM_TLS_H
#define CYM_TLS_H
#include <stdio.h>
#include "mongoose.h"

#if MG_TLS == MG_TLS_OPENSSL
#define CYM_TLS_OPENSSL 1
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

/* Server-side ALPN (RFC 7301): we speak HTTP/1.1 only, so pick it when the client offers
 * it (curl offers h2 first) and otherwise answer without ALPN rather than failing, which
 * keeps non-HTTP protocols over TLS (MQTT) working. */
static int cym_tls_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                               const unsigned char *in, unsigned int inlen, void *arg) {
  unsigned char *selected = NULL;
  (void) ssl, (void) arg;
  if (SSL_select_next_proto(&selected, outlen, cym_alpn_http11, sizeof(cym_alpn_http11), in,
                            inlen) == OPENSSL_NPN_NEGOTIATED) {
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

/* After mg_tls_init() on an accepted connection: Mongoose makes one SSL_CTX per
 * connection (struct mg_tls in mongoose.h), so the callback goes on that context. */
static void cym_tls_server_alpn(struct mg_connection *c) {
  struct mg_tls *tls = (struct mg_tls *) c->tls;
  if (tls != NULL && tls->ctx != NULL)
    SSL_CTX_set_alpn_select_cb(tls->ctx, cym_tls_alpn_select, NULL);
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

#else
#define CYM_TLS_OPENSSL 0

static int cym_tls_verify_error(struct mg_connection *c, char *buf, size_t len) {
  (void) c, (void) buf, (void) len;
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
static void cym_tls_server_alpn(struct mg_connection *c) {
  (void) c;
}
static void cym_tls_free(char *p) {
  (void) p;
}
#endif

#endif
