"""The client certificate a TLS connection presented, as the app servers hand it to apps:
the WSGI environ's `SSL_*` keys (mod_ssl's names, which mod_wsgi passes on and Django/Flask
client-certificate middleware reads) and the ASGI scope's `"tls"` extension (asgiref's TLS
extension 0.2). Both come from `Connection.tls_info`, read once per connection.

The servers add these fields only while they verify client certificates (`--ssl-ca`, a
server `TlsOpts` with `ca`): there is then something worth reading, and plain HTTP and
server-only TLS keep their fast paths.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["verifies_clients", "wsgi_ssl_environ", "asgi_tls_extension"]


def verifies_clients(tls: Any) -> bool:
    """Whether a server `TlsOpts` asks every client for a certificate signed by its CA."""
    return tls is not None and bool(tls.ca) and not tls.skip_verification


def wsgi_ssl_environ(info: Mapping[str, Any] | None) -> dict[str, str]:
    """mod_ssl's variables for a TLS connection: HTTPS, SSL_PROTOCOL, SSL_CIPHER,
    SSL_CLIENT_VERIFY (SUCCESS, NONE or FAILED:reason), and with a client certificate
    SSL_CLIENT_S_DN, SSL_CLIENT_I_DN (RFC 4514 text), SSL_CLIENT_M_SERIAL (hex),
    SSL_CLIENT_V_START, SSL_CLIENT_V_END, SSL_CLIENT_CERT (PEM) and SSL_CLIENT_CERT_CHAIN_n
    for the certificates the client sent after its own."""
    if info is None:
        return {}
    env = {"HTTPS": "on", "SSL_PROTOCOL": info["protocol"], "SSL_CIPHER": info["cipher"],
           "SSL_CLIENT_VERIFY": info["peer_verify"]}
    chain = info["peer_cert_chain"]
    if chain:
        env["SSL_CLIENT_CERT"] = chain[0]
        for i, pem in enumerate(chain[1:]):
            env[f"SSL_CLIENT_CERT_CHAIN_{i}"] = pem
        for key, field in (("SSL_CLIENT_S_DN", "peer_subject"),
                           ("SSL_CLIENT_I_DN", "peer_issuer"),
                           ("SSL_CLIENT_M_SERIAL", "peer_serial"),
                           ("SSL_CLIENT_V_START", "peer_not_before"),
                           ("SSL_CLIENT_V_END", "peer_not_after")):
            if info[field] is not None:
                env[key] = info[field]
    return env


def asgi_tls_extension(info: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The scope's extensions["tls"] (server_cert, client_cert_chain, client_cert_name,
    client_cert_error, tls_version, cipher_suite), or None when `info` is."""
    if info is None:
        return None
    verify = info["peer_verify"]
    return {
        "server_cert": info["local_cert"],
        "client_cert_chain": list(info["peer_cert_chain"]),
        "client_cert_name": info["peer_subject"],
        "client_cert_error": verify[len("FAILED:"):] if verify.startswith("FAILED:") else None,
        "tls_version": info["version"],
        "cipher_suite": info["cipher_suite"],
    }
