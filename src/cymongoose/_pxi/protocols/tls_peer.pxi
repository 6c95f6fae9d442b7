# Connection.tls_info: what a TLS connection agreed on and which certificate the peer
# presented, read from OpenSSL once the handshake is done and kept on the Connection (the
# session cannot change afterwards: cym_tls.h refuses renegotiation). Nothing here runs
# unless asked: the WSGI and ASGI servers ask only when they verify client certificates
# (--ssl-ca), and turn that into the environ's SSL_* keys and the scope's "tls" extension
# (serving/tls_fields.py), so plain HTTP and server-only TLS pay nothing.


cdef str _tls_peer_text(mg.mg_connection *c, int what):
    cdef size_t n = 0
    cdef char *text = mg.cym_tls_peer_text(c, what, &n)
    if text == NULL:
        return None
    try:
        return text[:n].decode("utf-8", "replace")
    finally:
        mg.cym_tls_free(text)


cdef list _tls_split_pem(str chain):
    if not chain:
        return []
    end = "-----END CERTIFICATE-----\n"
    return [part + end for part in chain.split(end) if part.strip()]


cdef object _tls_peer_info(Connection conn):
    """The dict Connection.tls_info documents, or None (not TLS, or still handshaking)."""
    cdef mg.mg_connection *c = _tls_carrier(conn)
    cdef mg.cym_tls_info info
    if c == NULL:
        return None
    if conn._tls_info is not None:
        return conn._tls_info
    if not mg.CYM_TLS_OPENSSL or not c.is_tls or mg.cym_tls_get_info(c, &info) != 0:
        return None
    if not info.has_peer:
        verify = "NONE"
    elif info.verify == 0:  # X509_V_OK
        verify = "SUCCESS"
    else:
        verify = "FAILED:" + info.verify_text.decode("utf-8", "replace")
    result = {
        "protocol": info.protocol.decode("ascii", "replace"),
        "version": info.version,
        "cipher": info.cipher.decode("ascii", "replace"),
        "cipher_suite": info.cipher_id,
        "local_cert": _tls_peer_text(c, 6),
        "peer_cert_chain": _tls_split_pem(_tls_peer_text(c, 0) or ""),
        "peer_subject": _tls_peer_text(c, 1),
        "peer_issuer": _tls_peer_text(c, 2),
        "peer_serial": _tls_peer_text(c, 3),
        "peer_not_before": _tls_peer_text(c, 4),
        "peer_not_after": _tls_peer_text(c, 5),
        "peer_verify": verify,
    }
    conn._tls_info = result
    return result
