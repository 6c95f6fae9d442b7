"""HTTPS server with a certificate you give or one it makes.

    python examples/https_server.py --port 8443                  # makes a self-signed cert
    python examples/https_server.py --cert cert.pem --key key.pem --root ./public

With a generated certificate it prints where the certificate is, so you can trust it:

    curl --cacert /tmp/.../cert.pem https://localhost:8443/

With the default OpenSSL engine (cymongoose.TLS_ENGINE == "openssl") any RSA or ECDSA
certificate works, over TLS 1.2 or 1.3. A build with Mongoose's built-in TLS speaks TLS 1.3
and accepts only ECDSA P-256 keys; make one with
`openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ...`.
The files are checked at start-up: an expired certificate, an encrypted key or one that is
not the certificate's stops the server with a message naming the file.
Ctrl-C (or SIGTERM) stops the server.
"""

from __future__ import annotations

import argparse
import datetime as dt
import ipaddress
import logging
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from cymongoose import MG_EV_ACCEPT, MG_EV_HTTP_MSG, Connection, HttpMessage, Manager, TlsOpts


def make_self_signed(directory: Path, hosts: list[str]) -> tuple[Path, Path]:
    """A P-256 self-signed certificate for `hosts`, written as cert.pem and key.pem."""
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        return _make_with_openssl(cert_path, key_path, hosts)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])])
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    now = dt.datetime.now(dt.timezone.utc)
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public),
                       critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption()))
    return cert_path, key_path


def _make_with_openssl(cert_path: Path, key_path: Path, hosts: list[str]) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        raise SystemExit("need the `cryptography` package or the `openssl` command to make a "
                         "certificate; or pass --cert and --key")
    san = ",".join(("IP:" if _is_ip(h) else "DNS:") + h for h in hosts)
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
         "ec_paramgen_curve:prime256v1", "-nodes", "-days", "30", "-subj", f"/CN={hosts[0]}",
         "-addext", f"subjectAltName={san}", "-keyout", str(key_path), "-out", str(cert_path)],
        check=True, capture_output=True)
    return cert_path, key_path


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="HTTPS server on cymongoose")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8443)
    parser.add_argument("--cert", type=Path, help="PEM certificate (chain, leaf first)")
    parser.add_argument("--key", type=Path, help="PEM private key, unencrypted")
    parser.add_argument("--cert-dir", type=Path,
                        help="where to write a generated certificate (default: a temp dir)")
    parser.add_argument("--root", type=Path, help="serve this directory instead of a greeting")
    args = parser.parse_args(argv)

    if (args.cert is None) != (args.key is None):
        parser.error("--cert and --key go together")
    if args.cert is None:
        directory = args.cert_dir or Path(tempfile.mkdtemp(prefix="cymongoose-https-"))
        directory.mkdir(parents=True, exist_ok=True)
        args.cert, args.key = make_self_signed(directory, ["localhost", "127.0.0.1", "::1"])
        print(f"generated a self-signed certificate: {args.cert}", flush=True)

    # Read and checked once, here; tls_init() then reuses the checked options for every
    # accepted connection.
    try:
        opts = TlsOpts.from_files(cert=args.cert, key=args.key)
    except (OSError, ValueError) as exc:
        print(f"https_server.py: {exc}", file=sys.stderr, flush=True)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_ACCEPT:
            conn.tls_init(opts)  # on every accepted connection, not on the listener
        elif ev == MG_EV_HTTP_MSG:
            msg: HttpMessage = data
            if args.root is not None:
                conn.serve_dir(msg, str(args.root))
            else:
                conn.reply(200, f"Hello over TLS: {msg.method} {msg.uri}\n")

    mgr = Manager(handler)
    listener = mgr.listen(f"https://{args.host}:{args.port}")
    print(f"https listening on https://{args.host}:{listener.local_addr[1]}/", flush=True)
    mgr.run()  # until Ctrl-C or SIGTERM; closes the manager
    return 0


if __name__ == "__main__":
    sys.exit(main())
