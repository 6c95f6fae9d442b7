# TlsOpts.from_files(): certificate and key files read and checked at start-up, so a bad
# file is a ValueError naming it (expired, not yet valid, not a certificate, an encrypted or
# foreign key) instead of a failure at each handshake.


cdef list _tls_cert_ders(bytes data):
    """Every certificate of a PEM bundle, or the one DER certificate, as DER."""
    cdef list out = []
    for m in _PEM_BLOCK.finditer(data):
        if m.group(1) == b"CERTIFICATE":
            try:
                out.append(binascii_a2b_base64(b"".join(m.group(2).split())))
            except binascii_Error:
                raise ValueError("a CERTIFICATE block is not valid base64") from None
    if not out and data[:1] == b"\x30":
        out.append(data)
    return out


cdef double _tls_asn1_time(bytes der, tuple tlv) except? -1:
    """Seconds since the epoch of an X.509 UTCTime or GeneralizedTime (RFC 5280 §4.1.2.5)."""
    text = der[tlv[1]:tlv[2]].decode("ascii")
    if tlv[0] == 0x17:  # YYMMDDHHMMSSZ; years 50-99 are 19xx
        year = int(text[:2])
        text = str(year + (1900 if year >= 50 else 2000)) + text[2:]
    elif tlv[0] != 0x18:
        raise _DerError("not a time")
    if len(text) != 15 or text[14] != "Z":
        raise _DerError("not a UTC time")
    import_calendar_datetime()
    return calendar_timegm((int(text[:4]), int(text[4:6]), int(text[6:8]), int(text[8:10]),
                            int(text[10:12]), int(text[12:14]), 0, 0, 0))


cdef tuple _tls_validity(bytes der):
    """(notBefore, notAfter) of a DER certificate, as seconds since the epoch."""
    cdef tuple root = _der(der, 0, len(der))
    cdef list parts = _der_children(der, root[1], root[2])
    cdef list tbs = _der_children(der, parts[0][1], parts[0][2])
    cdef Py_ssize_t i = 1 if tbs[0][0] == 0xA0 else 0  # [0] version is optional
    cdef list validity = _der_children(der, tbs[i + 3][1], tbs[i + 3][2])
    return _tls_asn1_time(der, validity[0]), _tls_asn1_time(der, validity[1])


cdef str _tls_subject(bytes der):
    """The certificate's subject as RFC 4514 text, or "" when the engine cannot say."""
    cdef size_t n = 0
    cdef char *text = mg.cym_tls_cert_subject(PyBytes_AS_STRING(der),
                                              <size_t>PyBytes_GET_SIZE(der), &n)
    if text == NULL:
        return ""
    try:
        return text[:n].decode("utf-8", "replace")
    finally:
        mg.cym_tls_free(text)


cdef bytes _tls_check_cert_file(object path, bytes data, str field):
    """`data` if every certificate in it is readable and valid now, else ValueError naming
    `path`. A CA bundle (field "ca") is the exception: a certificate in it that has expired
    or is not valid yet cannot verify anything and is left out with a warning, as nginx
    (OpenSSL) loads such a bundle and starts; Debian's system bundle has held an expired
    root. Only a bundle with no usable certificate left is refused."""
    import_calendar_datetime()
    try:
        _tls_check_certs(data, field)
        ders = _tls_cert_ders(data)
    except ValueError as exc:
        raise ValueError(f"{path}: not a certificate file: {exc}") from None
    now = time_time()
    cdef list kept = []
    cdef list skipped = []
    for i, der in enumerate(ders):
        where = "" if len(ders) == 1 else f" (certificate {i + 1} of {len(ders)})"
        try:
            not_before, not_after = _tls_validity(der)
        except (_DerError, IndexError, ValueError):
            raise ValueError(f"{path}: malformed certificate{where}") from None
        problem = None
        if now > not_after:
            when = datetime_datetime.fromtimestamp(not_after, datetime_timezone.utc)
            problem = f"expired on {when:%Y-%m-%d %H:%M:%S} UTC"
        elif now < not_before:
            when = datetime_datetime.fromtimestamp(not_before, datetime_timezone.utc)
            problem = f"is not valid before {when:%Y-%m-%d %H:%M:%S} UTC"
        if problem is None:
            kept.append(der)
        elif field == "ca":
            skipped.append((where, der, problem))
        else:
            raise ValueError(f"{path}: the certificate{where} {problem}")
    if not skipped:
        return data
    if not kept:
        where, der, problem = skipped[0]
        raise ValueError(f"{path}: no usable CA certificate: the certificate{where} {problem}"
                         + (f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else ""))
    for where, der, problem in skipped:
        # One line each, whatever the subject holds (RFC 4514 escapes kept as they are).
        subject = "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}"
                          for ch in _tls_subject(der))
        _log.warning("TLS: %s: skipping the CA certificate%s%s: it %s", path, where,
                     f" '{subject}'" if subject else "", problem)
    return b"".join(_pem("CERTIFICATE", der) for der in kept)


cdef TlsOpts _tls_opts_from_files(object ca, object cert, object key, object name,
                                  bint skip_verification, object ciphers):
    cdef dict data = {}
    for field, path in (("ca", ca), ("cert", cert), ("key", key)):
        if path is None:
            continue
        path = os_fspath(path)
        with open(path, "rb") as f:  # OSError (missing, unreadable) names the file itself
            data[field] = f.read()
        if field != "key":
            data[field] = _tls_check_cert_file(path, data[field], field)
    opts = TlsOpts(ca=data.get("ca"), cert=data.get("cert"), key=data.get("key"), name=name,
                   skip_verification=skip_verification, ciphers=ciphers)
    try:
        _tls_prepared(opts)
    except ValueError as exc:
        # Messages say "TlsOpts.<field>": name the file that field came from instead.
        text = str(exc)
        for field, path in (("key", key), ("cert", cert), ("ca", ca)):
            prefix = f"TlsOpts.{field}"
            if path is not None and text.startswith(prefix):
                text = f"{os_fspath(path)}: the {field} file" + text[len(prefix):]
                break
        raise ValueError(text) from None
    return opts
