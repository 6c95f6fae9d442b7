"""Test-time certificates for the TLS tests: a private CA and leaf certificates.

Keys default to P-256 in the traditional "EC PRIVATE KEY" form, which both TLS engines take
(Mongoose's built-in one takes nothing else); the OpenSSL engine takes RSA and other curves.
Keys are generated per test run, never committed.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

if sysconfig.get_config_var("Py_GIL_DISABLED") and sys.version_info < (3, 14):
    # Only there: cryptography needs cffi, which builds free-threaded from 3.14 on. The TLS
    # tests run on every other interpreter (the main suite, ASan, the installed wheel).
    pytest.skip("cryptography has no free-threaded 3.13 build (cffi supports 3.14t on)",
                allow_module_level=True)

from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa  # noqa: E402
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID  # noqa: E402

T = TypeVar("T")
PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey


def new_key(kind: str = "p256") -> PrivateKey:
    """kind: p256, p384, rsa2048, rsa4096, ed25519."""
    if kind == "p256":
        return ec.generate_private_key(ec.SECP256R1())
    if kind == "p384":
        return ec.generate_private_key(ec.SECP384R1())
    if kind in ("rsa2048", "rsa4096"):
        return rsa.generate_private_key(public_exponent=65537, key_size=int(kind[3:]))
    if kind == "ed25519":
        return ed25519.Ed25519PrivateKey.generate()
    raise ValueError(kind)


def key_pem(key: PrivateKey, form: str = "traditional", password: bytes | None = None) -> bytes:
    """form: traditional (EC/RSA PRIVATE KEY), pkcs8 (PRIVATE KEY), der-traditional, der-pkcs8."""
    fmt = (serialization.PrivateFormat.PKCS8 if form.endswith("pkcs8")
           else serialization.PrivateFormat.TraditionalOpenSSL)
    enc = serialization.Encoding.DER if form.startswith("der") else serialization.Encoding.PEM
    algo: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password) if password
        else serialization.NoEncryption())
    return key.private_bytes(enc, fmt, algo)


def _sign_hash(key: PrivateKey) -> hashes.HashAlgorithm | None:
    return None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256()


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


@dataclass
class Leaf:
    cert_pem: bytes
    key: PrivateKey

    def key_pem(self, form: str = "traditional") -> bytes:
        return key_pem(self.key, form)

    def write(self, directory: Path, stem: str = "server") -> tuple[Path, Path]:
        cert = directory / f"{stem}.crt"
        key = directory / f"{stem}.key"
        cert.write_bytes(self.cert_pem)
        key.write_bytes(self.key_pem())
        return cert, key


class CA:
    """A self-signed certificate authority that issues leaf certificates."""

    def __init__(self, kind: str = "p256", name: str = "cymongoose test CA",
                 not_before: dt.datetime | None = None,
                 not_after: dt.datetime | None = None) -> None:
        self.key = new_key(kind)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = _now()
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before or now - dt.timedelta(days=1))
            .not_valid_after(not_after or now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(digital_signature=True, content_commitment=False,
                              key_encipherment=False, data_encipherment=False,
                              key_agreement=False, key_cert_sign=True, crl_sign=True,
                              encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()),
                           critical=False)
        )
        self.cert = builder.sign(self.key, _sign_hash(self.key))
        self.cert_pem = self.cert.public_bytes(serialization.Encoding.PEM)

    def write(self, directory: Path, stem: str = "ca") -> Path:
        path = directory / f"{stem}.crt"
        path.write_bytes(self.cert_pem)
        return path

    def issue(self, hosts: Iterable[str] = ("localhost", "127.0.0.1"), kind: str = "p256",
              not_before: dt.datetime | None = None, not_after: dt.datetime | None = None,
              client: bool = False) -> Leaf:
        key = new_key(kind)
        hosts = list(hosts)
        sans: list[x509.GeneralName] = []
        for h in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(h)))
            except ValueError:
                sans.append(x509.DNSName(h))
        now = _now()
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                                        hosts[0] if hosts else "client")]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before or now - dt.timedelta(days=1))
            .not_valid_after(not_after or now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH]),
                critical=False)
            # Python 3.13+ verifies with VERIFY_X509_STRICT by default, which wants it.
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                self.key.public_key()), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self.key, _sign_hash(self.key))
        return Leaf(cert.public_bytes(serialization.Encoding.PEM), key)


def expired_window() -> tuple[dt.datetime, dt.datetime]:
    now = _now()
    return now - dt.timedelta(days=30), now - dt.timedelta(days=1)


# Mongoose 7.23 writes its ECDSA CertificateVerify signature without stripping a leading
# zero byte of r or s, which is not valid DER; OpenSSL-based peers (Python's ssl, curl,
# openssl) then fail about 0.4% of handshakes with "bad signature" (measured 11 in 3000).
# Our build compiles mongoose.c with a fix (vendor/mongoose/build_fixes.py), so no retry
# is allowed: one attempt, and test_many_handshakes_never_fail proves it at volume.
BAD_SIGNATURE_ATTEMPTS = 1


def is_bad_signature(text: str | bytes) -> bool:
    low = (text.decode(errors="replace") if isinstance(text, bytes) else text).lower()
    return "bad signature" in low or "bad_signature" in low


def retry_bad_signature(call: Callable[[], T]) -> T:
    for attempt in range(BAD_SIGNATURE_ATTEMPTS):
        try:
            return call()
        except Exception as exc:  # ssl.SSLError, or a library's wrapper of it
            if attempt == BAD_SIGNATURE_ATTEMPTS - 1 or not is_bad_signature(repr(exc) + str(
                    exc.__cause__ or exc.__context__ or "")):
                raise
    raise AssertionError("unreachable")


def is_non_tls_refusal(error: str) -> bool:
    """The MG_EV_ERROR text for a peer that does not speak TLS, from either engine."""
    return error == "TLS: the peer sent non-TLS data" or error.startswith(
        "TLS handshake failed: protocol error")


def run_tool(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[bytes]:
    """subprocess.run for curl/openssl, retried on the bad-signature failure only."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS")}
    kw.setdefault("env", env)  # no libasan in tools during the ASan run (curl hangs with it)
    kw.setdefault("capture_output", True)
    kw.setdefault("timeout", 20)
    for _ in range(BAD_SIGNATURE_ATTEMPTS):
        out = subprocess.run(cmd, **kw)
        if not (is_bad_signature(out.stderr or b"") or is_bad_signature(out.stdout or b"")):
            break
    return out
